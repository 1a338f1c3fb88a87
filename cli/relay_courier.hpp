#pragma once
// How a relay's upstream "trainer" (on its upstream client's thread) talks
// to its children's side (actors): one courier actor carries its messages
// in the order they are made, and the side's answers come back through a
// box the trainer waits on. See docs/design.md, "Trees of aggregators".

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <caf/all.hpp>

#include "actors/interfaces.hpp"
#include "fedcaf/error.hpp"

namespace fedcaf::cli {

/// A streaming relay's round as its children's side reports it: the
/// round's weight and figures (fixed once position 0 settled), and how many
/// bytes of its sum, from the start, are settled and may go up.
struct relay_stream {
  double weight = 0;
  double loss = 0;
  uint32_t clients = 0;
  uint64_t ready = 0;
};

/// How a relay's round goes up: streamed as it settles (window and disk
/// modes), or (ram mode, and a round sat out) as the side's answer.
struct relay_start {
  std::optional<relay_stream> stream;
  relay_result answer; ///< unless streamed
};

/// The answers of a relay's children's side to its parent's models, by
/// the number of the model handed down, as the courier gets them (on an
/// actor's thread) for the trainer (on the upstream client's) to wait for.
/// Thread-safety: safe (a mutex).
class relay_answers {
public:
  /// Model `model`'s round is settled up to `s.ready` bytes; `wake` (see
  /// on_settled) is called after.
  void settled(uint64_t model, const relay_stream& s) {
    std::function<void()> wake;
    {
      std::lock_guard<std::mutex> lock{mutex_};
      auto& at = streams_[model];
      at = relay_stream{s.weight, s.loss, s.clients,
                        std::max(at.ready, s.ready)};
      wake = wake_;
      changed_.notify_all();
    }
    if (wake)
      wake();
  }

  /// Called (on the courier's thread) each time a round's sum settles
  /// further.
  void on_settled(std::function<void()> wake) {
    std::lock_guard<std::mutex> lock{mutex_};
    wake_ = std::move(wake);
  }

  /// Waits until model `model`'s round streams or is answered.
  result<relay_start> start(uint64_t model) {
    std::unique_lock<std::mutex> lock{mutex_};
    changed_.wait(lock, [&] {
      return streams_.count(model) > 0 || answers_.count(model) > 0 ||
             !failure_.empty();
    });
    if (auto s = streams_.find(model); s != streams_.end())
      return relay_start{s->second, {}};
    auto it = answers_.find(model);
    if (it == answers_.end())
      return error{errc::internal, "the relay's round failed: " + failure_};
    auto r = std::move(it->second);
    answers_.erase(it);
    if (!r)
      return r.err();
    return relay_start{std::nullopt, std::move(*r)};
  }

  /// The bytes of model `model`'s round's sum settled so far.
  uint64_t ready(uint64_t model) const {
    std::lock_guard<std::mutex> lock{mutex_};
    auto s = streams_.find(model);
    return s == streams_.end() ? 0 : s->second.ready;
  }

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

  /// Forgets answers to models before `model` (rounds given up, or gone
  /// up).
  void forget_before(uint64_t model) {
    std::lock_guard<std::mutex> lock{mutex_};
    answers_.erase(answers_.begin(), answers_.lower_bound(model));
    streams_.erase(streams_.begin(), streams_.lower_bound(model));
  }

private:
  mutable std::mutex mutex_;
  std::map<uint64_t, relay_stream> streams_;
  std::function<void()> wake_;
  std::condition_variable changed_;
  std::map<uint64_t, result<relay_result>> answers_;
  std::string failure_;
};

/// Carries a relay's trainer's messages to its children's side in the order
/// they are made (one sender): each parent's model (relay_atom, the model,
/// whether it is still arriving, its number) and the bytes of it that
/// arrived (arrived_atom); the side's answers go to `answers`, and so does
/// each step of a streaming round's sum (settled_atom, for the oldest
/// model not yet answered: the side answers them in order). Quits, and
/// fails whatever is awaited, when the side's server goes down.
caf::behavior relay_courier(caf::event_based_actor* self, server_actor server,
                            std::shared_ptr<relay_answers> answers);

} // namespace fedcaf::cli
