#pragma once
// Hands each round between the client actor, which runs a bridge trainer,
// and the Python thread that trains: the actor offers a task (the received
// model) and waits; Python takes it, trains with its own code and hands back
// views of its arrays as the update, which the actor streams from them.
// No CAF, no Python: the module (python/module.cpp) drives the Python side.
// Thread-safety: every member function may be called from any thread; all
// synchronise on one mutex.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fedcaf/byte_buffer.hpp"
#include "fedcaf/config/client_sections.hpp"
#include "fedcaf/manifest.hpp"
#include "fedcaf/trainer.hpp"

namespace fedcaf::bridge {

/// The received global model: its layout and bytes, shared with the numpy
/// arrays that view it (they keep it alive).
struct model_memory {
  manifest layout;
  byte_buffer bytes;
};

/// A round as Python sees it.
struct task_info {
  uint64_t id = 0; ///< names the task in later calls
  uint32_t round = 0;
  bool evaluate_only = false;
  std::shared_ptr<model_memory> model;
};

using figures = std::vector<std::pair<std::string, double>>;

class task_bridge {
public:
  enum class wait_result { ready, ended, timeout };

  // -- the client actor's side (the bridge trainer) ---------------------------

  /// Takes the server's layout; allocates the model memory when it changes.
  result<void> adopt(const manifest& layout);
  void begin_round(uint32_t round, bool evaluate_only);
  /// Views of the model memory, where the received model is written.
  model_view received();
  /// Offers the round as a training task and waits for Python's update.
  /// Returns an error iff the client was stopped or Python went on without
  /// sending one.
  result<train_metrics> train();
  /// The update's memory (Python's arrays), valid until the next task.
  model_view update();
  uint64_t samples() const;
  /// Offers the final model as an evaluation task and waits; nullopt iff
  /// Python went on without evaluating.
  result<std::optional<eval_metrics>> evaluate_final();
  void upload_closed();
  /// The client ended; `failure` is empty on success.
  void run_ended(std::string failure);

  // -- Python's side ---------------------------------------------------------

  /// Waits up to `slice` for the next task. A training task Python took
  /// without sending an update fails the client first (bad_argument).
  wait_result next_task(std::chrono::milliseconds slice, task_info& out);
  /// Hands over the update of task `id`: views of Python's arrays, which
  /// must stay alive until the next task. Returns an error iff `id` is not
  /// the current training task or it was sent already.
  result<void> send(uint64_t id, model_view update, uint64_t samples,
                    figures train_figures);
  /// Waits up to `slice` for task `id`'s upload to close: ready when it
  /// closed (or a newer task came), ended when the run ended.
  wait_result wait_uploaded(uint64_t id, std::chrono::milliseconds slice);
  /// The evaluation of the final model, task `id` (evaluate_only). Returns
  /// an error iff that is not the current task or it was evaluated already.
  /// (A training task's evaluation goes to the client actor directly.)
  result<void> evaluated(uint64_t id, const eval_metrics& m);
  /// Stops waiting on both sides; the trainer's calls return `why`.
  void cancel(const error& why);
  /// Empty while running or after success.
  std::string failure() const;
  bool ended() const;

  /// Set by the client's gateway as soon as the server's Done arrives (the
  /// run is over): Python's task.cancelled, and a training task left
  /// without task.send(...) then is no mistake.
  const std::shared_ptr<std::atomic<bool>>& run_over_flag() const {
    return run_over_;
  }
  bool run_over() const { return run_over_->load(); }

private:
  struct task_state {
    task_info info;
    bool taken = false;
    bool sent = false;
    bool uploaded = false;
    bool left = false; ///< Python went on to the next task
    std::optional<eval_metrics> final_evaluation;
    bool evaluated = false;
  };

  /// Publishes a task and waits until `done` holds for it or the bridge
  /// was cancelled. REQUIRES: lock held.
  template <class Done>
  result<void> offer_and_wait(std::unique_lock<std::mutex>& lock, bool eval,
                              Done done);
  /// Python moved on from the current task. REQUIRES: lock held.
  void leave_task();

  mutable std::mutex mtx_;
  std::condition_variable changed_;
  std::shared_ptr<model_memory> model_;
  uint32_t round_ = 0;
  bool evaluate_only_ = false;
  std::optional<task_state> task_;
  uint64_t next_id_ = 1;
  model_view update_;
  uint64_t samples_ = 0;
  figures train_figures_;
  std::optional<error> cancelled_;
  std::shared_ptr<std::atomic<bool>> run_over_ =
      std::make_shared<std::atomic<bool>>(false);
  bool ended_ = false;
  std::string failure_;
};

/// A trainer whose training is Python's: see task_bridge.
std::unique_ptr<trainer> make_bridge_trainer(std::shared_ptr<task_bridge> b,
                                             const client_configs& cfg);

} // namespace fedcaf::bridge
