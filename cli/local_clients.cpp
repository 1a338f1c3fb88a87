// The clients a process runs itself: the data set splits they share, and
// each one's trainer.

#include "local_clients.hpp"

#include <unistd.h>

#include <algorithm>
#include <thread>

#include "fedcaf/dummy_trainer.hpp"
#include "fedcaf/models.hpp"

namespace fedcaf::cli {

uint32_t cores() {
  return std::max(1u, std::thread::hardware_concurrency());
}

result<samples_ptr> lazy_data_set::get() {
  std::lock_guard<std::mutex> guard{mtx_};
  if (!read_ && !(data_.dataset_name == "tensors" && !train_ &&
                  data_.test_features.empty())) {
    auto loaded = read_data_set(data_, train_);
    if (!loaded)
      return loaded.err();
    set_ = std::make_shared<tensor_set>(std::move(*loaded));
  }
  read_ = true;
  return set_;
}

namespace {

/// Client `index`'s part of `split` (none when the split is null).
result<void> take_part(lazy_data_set& split, const data_config& data,
                       uint32_t index, samples_ptr& set,
                       std::vector<uint32_t>& part) {
  auto got = split.get();
  if (!got)
    return got.err();
  if (!*got)
    return {};
  auto idx = partition_set(**got, data, index);
  if (!idx)
    return idx.err();
  set = *got;
  part = std::move(*idx);
  return {};
}

/// Client `index`'s training data, and its test data iff it evaluates.
result<client_data> data_of(lazy_data& sets, const data_config& data,
                            uint32_t index, bool evaluates) {
  client_data cd;
  if (auto ok = take_part(sets.train, data, index, cd.train, cd.train_indices);
      !ok)
    return ok.err();
  if (evaluates)
    if (auto ok = take_part(sets.test, data, index, cd.test, cd.test_indices);
        !ok)
      return ok.err();
  return cd;
}

/// Client `index`'s trainer for the server's client_configs `cc`: the
/// dummy trainer, or LibTorch on its partition of the data.
result<std::unique_ptr<trainer>>
make_local_trainer(lazy_data& sets, const data_config& data, uint32_t index,
                   uint32_t num_threads, const client_configs& cc,
                   const shard_spec& shard) {
  if (cc.train.trainer == trainer_kind::python)
    return error{errc::bad_config,
                 "this server's clients train with their own Python code "
                 "(train_configs.trainer: python): run the Python client "
                 "(import fedcaf; see examples/python/fashion_mnist.py), "
                 "not fedcaf client"};
  if (shard.sharded() && cc.train.trainer != trainer_kind::dummy)
    return error{errc::bad_config,
                 "shard: rank " + std::to_string(shard.rank) + " of " +
                     std::to_string(shard.ranks) +
                     ": fedcaf client's LibTorch trainer trains a whole "
                     "network in one process; a sharded model trains in its "
                     "own job (the Python client under torchrun, see "
                     "examples/python/sharded_fashion_mnist.py), or with "
                     "train_configs.trainer: dummy"};
  if (cc.train.trainer == trainer_kind::dummy) {
    auto layout = model_layout(cc.model);
    if (!layout)
      return layout.err();
    if (shard.sharded()) { // its rows of every tensor, no more
      auto slices = slices_of(*layout, shard);
      if (!slices)
        return slices.err();
      layout = local_layout(*layout, *slices);
    }
    dummy_storage storage;
    if (cc.train.storage == model_storage::disk)
      storage.file = cc.train.storage_dir + "/fedcaf-client" +
                     std::to_string(index) + "-" + std::to_string(::getpid()) +
                     ".bin";
    auto add = cc.train.add * (cc.train.add_by_index ? index + 1 : 1);
    return make_dummy_trainer(std::move(*layout), static_cast<float>(add), 1,
                              storage, static_cast<float>(cc.train.noise),
                              index);
  }
  auto cd = data_of(sets, data, index, cc.train.federated_evaluation);
  if (!cd)
    return cd.err();
  return make_trainer(cc, std::move(*cd), data.seed + index, num_threads);
}

} // namespace

trainer_factory local_trainer(std::shared_ptr<lazy_data> sets, data_config data,
                              uint32_t index, uint32_t num_threads,
                              stop_flag stop, shard_spec shard) {
  return [sets, data, index, num_threads, stop,
          shard](const client_configs& cc,
                 const msg::welcome&) -> result<std::unique_ptr<trainer>> {
    auto made = make_local_trainer(*sets, data, index, num_threads, cc, shard);
    if (made)
      (*made)->stop_when(stop);
    return made;
  };
}

} // namespace fedcaf::cli
