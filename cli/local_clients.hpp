#pragma once
// The clients a process runs itself (simulate's, a relay's simulated
// children, `fedcaf client`): the data set splits they share, read on
// first use, and each one's trainer (the dummy trainer, or LibTorch on its
// partition of the data).
// Thread-safety: lazy_data_set::get may be called from several actors at
// once; the rest holds no shared state.

#include <cstdint>
#include <memory>
#include <mutex>

#include "actors/client.hpp"
#include "fedcaf/config/client_sections.hpp"
#include "fedcaf/tensor_data.hpp"
#include "fedcaf/trainer.hpp"

namespace fedcaf::cli {

/// The cores this machine has (at least 1).
uint32_t cores();

using samples_ptr = std::shared_ptr<const tensor_set>;

/// A split of the data set (train, or test), read on first use and shared
/// by every client of the process (clients with the dummy trainer never
/// read it; the test split is read only for federated evaluation). Null
/// for a test split the tensors dataset does not name.
class lazy_data_set {
public:
  lazy_data_set(data_config data, bool train)
      : data_(std::move(data)), train_(train) {}

  /// The split, read now if it was not yet; an error iff it cannot be read.
  result<samples_ptr> get();

private:
  std::mutex mtx_;
  data_config data_;
  bool train_;
  bool read_ = false;
  samples_ptr set_;
};

/// The training and test splits a process's clients share.
struct lazy_data {
  explicit lazy_data(const data_config& d) : train(d, true), test(d, false) {}
  lazy_data_set train;
  lazy_data_set test;
};

/// Builds client `index`'s trainer once the server's client_configs are
/// known: the dummy trainer, or LibTorch on its partition of the data. Its
/// training stops at the next step once `stop` is set (null: never). A rank
/// of a sharded client (`shard`) holds only its shard: the dummy trainer
/// (LibTorch's trains whole models only, and is refused).
trainer_factory local_trainer(std::shared_ptr<lazy_data> sets, data_config data,
                              uint32_t index, uint32_t num_threads,
                              stop_flag stop, shard_spec shard = {});

} // namespace fedcaf::cli
