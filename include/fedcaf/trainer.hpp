#pragma once
// Local training and evaluation behind interfaces free of LibTorch, so only
// src/torch_*.cpp pay for its headers. Thread-safety: a trainer or evaluator
// is used by one actor at a time; its stop flag may be set from any thread.

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fedcaf/config/client_sections.hpp"
#include "fedcaf/error.hpp"
#include "fedcaf/fashion_mnist.hpp"
#include "fedcaf/manifest.hpp"
#include "fedcaf/model_snapshot.hpp"
#include "fedcaf/tensor_data.hpp"

namespace fedcaf {

struct train_metrics {
  double loss = 0;      ///< mean training loss over the samples seen
  uint64_t samples = 0; ///< samples seen (with repeats over epochs)
  double seconds = 0;
  /// DP-SGD (train_configs.dp): noisy steps taken and their sample rate, for
  /// the accountant; 0 without DP.
  uint64_t dp_steps = 0;
  double dp_sample_rate = 0;
  /// Figures of the trainer's own choosing, sent with the offer (names of
  /// [A-Za-z0-9_./-], at most 32).
  std::vector<std::pair<std::string, double>> figures{};
};

struct eval_metrics {
  double loss = 0;
  double accuracy = 0;
  uint64_t samples = 0;
  /// Figures by name; when set, sent instead of accuracy and loss.
  std::vector<std::pair<std::string, double>> figures{};
};

/// A flag that asks long work to stop: set from any thread (an interrupt's),
/// read between steps.
using stop_flag = std::shared_ptr<const std::atomic<bool>>;

/// Work of many steps (training, evaluation) that stops at its next step
/// once asked, with errc::cancelled.
class stoppable {
public:
  /// Stops at the next step once `*flag` is true. Null: never.
  void stop_when(stop_flag flag) { stop_ = std::move(flag); }

  /// True iff the work should stop now.
  bool stop_asked() const {
    return stop_ && stop_->load(std::memory_order_relaxed);
  }

protected:
  ~stoppable() = default;

private:
  stop_flag stop_;
};

/// A local model and the data it trains on.
class trainer : public stoppable {
public:
  virtual ~trainer() = default;

  /// Says that round `round` starts (evaluate_only: the run's final model,
  /// to evaluate, not to train). Default: nothing.
  virtual void begin_round(uint32_t round, bool evaluate_only) {
    (void)round;
    (void)evaluate_only;
  }

  /// The model's layout, in the order of parameters().
  virtual const manifest& layout() const = 0;

  /// Takes the layout of the model the server sends, `server_layout`.
  /// Returns an error (manifest_mismatch) iff this trainer's model has
  /// another layout. Default: the layouts must be equal; a trainer that
  /// learns its layout from the server (the Python client) adopts it.
  virtual result<void> adopt_layout(const manifest& server_layout) {
    return compare_layouts(layout(), server_layout, "the server's");
  }

  /// Views of the parameter memory itself: a received chunk is written
  /// straight into it and an upload reads straight from it.
  virtual model_view parameters() = 0;

  /// Trains as train_configs says. Returns an error iff LibTorch fails, or
  /// cancelled iff a stop was asked (see stoppable; checked between steps).
  virtual result<train_metrics> train() = 0;

  /// The number of local training samples (FedAvg's sample_size weight).
  virtual uint64_t sample_count() const = 0;

  /// Evaluates the model now in parameters() (the global model received)
  /// on the client's own test data. Returns nullopt iff this trainer has
  /// none; an error iff evaluation failed (cancelled iff a stop was asked).
  /// Default: nullopt.
  virtual result<std::optional<eval_metrics>> evaluate_local() {
    return std::optional<eval_metrics>{};
  }

  /// Says that the server closed this round's upload: the memory that
  /// parameters() viewed for it is no longer read (unless the server asks
  /// for the update again). Default: nothing.
  virtual void upload_closed() {}

  /// Says that model bytes [model_offset, + bytes) (in the concatenation of
  /// the tensors) are not needed for now, so a trainer that keeps its model
  /// in a file can give their pages back. Default: nothing.
  virtual void release(uint64_t model_offset, uint64_t bytes) {
    (void)model_offset;
    (void)bytes;
  }
};

/// Evaluates a model given as bytes on a fixed test set.
class evaluator : public stoppable {
public:
  virtual ~evaluator() = default;

  /// Loads `model` into its own network and returns loss and accuracy.
  /// Returns an error iff the layout does not match or LibTorch fails, or
  /// cancelled iff a stop was asked (checked between batches).
  virtual result<eval_metrics> evaluate(const const_model_view& model) = 0;
};

/// Returns a LibTorch trainer of model_configs' network (the CNN, or the
/// TorchScript file model_configs.path) for `cfg` over samples
/// data.train_indices of data.train, shuffled with `seed`, with
/// train_configs.loss_fn. evaluate_local() uses data.test_indices of
/// data.test (none iff data.test is null or the indices are empty).
/// num_threads 0 uses train_configs.num_threads or, if that is 0 too, all
/// cores. Returns an error naming the file iff the TorchScript file cannot
/// be loaded or holds a non-float32 parameter, or the labels do not suit
/// the loss (class ids for cross_entropy and nll).
result<std::unique_ptr<trainer>> make_trainer(const client_configs& cfg,
                                              client_data data, uint64_t seed,
                                              uint32_t num_threads);

/// Returns an evaluator of model_configs' network on `test`.
result<std::unique_ptr<evaluator>>
make_evaluator(const client_configs& cfg, std::shared_ptr<const image_set> test,
               uint32_t num_threads);

/// Returns the initial global model: the CNN drawn from model_configs.seed,
/// or a torchscript model's weights (its parameters, then its floating-point
/// buffers, named and ordered as in PyTorch's state_dict). Returns an error
/// naming the file iff a TorchScript file cannot be loaded.
result<model_snapshot> make_initial_model(const model_config& cfg);

} // namespace fedcaf
