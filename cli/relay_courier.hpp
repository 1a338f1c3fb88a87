#pragma once
// How a relay's upstream "trainer" (on its upstream client's thread) talks
// to its children's side (actors): one courier actor carries its messages
// in the order they are made, and the side's answers come back through a
// box the trainer waits on. See docs/design.md, "Trees of aggregators".

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include <caf/all.hpp>

#include "actors/interfaces.hpp"
#include "fedcaf/error.hpp"

namespace fedcaf::cli {

/// The answers of a relay's children's side to its parent's models, by
/// the number of the model handed down, as the courier gets them (on an
/// actor's thread) for the trainer (on the upstream client's) to wait for.
/// Thread-safety: safe (a mutex).
class relay_answers {
public:
  void put(uint64_t model, result<relay_result> r) {
    std::lock_guard<std::mutex> lock{mutex_};
    answers_.insert_or_assign(model, std::move(r));
    changed_.notify_all();
  }

  /// The side stopped: every answer still awaited is `why`.
  void fail_all(const std::string& why) {
    std::lock_guard<std::mutex> lock{mutex_};
    failure_ = why;
    changed_.notify_all();
  }

  /// Waits for the answer to model `model`.
  result<relay_result> take(uint64_t model) {
    std::unique_lock<std::mutex> lock{mutex_};
    changed_.wait(
        lock, [&] { return answers_.count(model) > 0 || !failure_.empty(); });
    auto it = answers_.find(model);
    if (it == answers_.end())
      return error{errc::internal, "the relay's round failed: " + failure_};
    auto r = std::move(it->second);
    answers_.erase(it);
    return r;
  }

  /// Forgets answers to models before `model` (rounds given up).
  void forget_before(uint64_t model) {
    std::lock_guard<std::mutex> lock{mutex_};
    answers_.erase(answers_.begin(), answers_.lower_bound(model));
  }

private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<uint64_t, result<relay_result>> answers_;
  std::string failure_;
};

/// Carries a relay's trainer's messages to its children's side in the order
/// they are made (one sender): each parent's model (relay_atom, the model,
/// whether it is still arriving, its number) and the bytes of it that
/// arrived (arrived_atom); the side's answers go to `answers`. Quits, and
/// fails whatever is awaited, when the side's server goes down.
caf::behavior relay_courier(caf::event_based_actor* self, server_actor server,
                            std::shared_ptr<relay_answers> answers);

} // namespace fedcaf::cli
