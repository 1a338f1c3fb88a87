#pragma once
// How a relay's upstream half (its trainer, on its upstream client's
// thread) talks to its children's side (actors): one courier actor carries
// the trainer's messages in the order they are made, and the side's
// answers come back through a box the trainer waits on (train() blocks: a
// trainer's interface is synchronous). See docs/design.md, "Trees of
// aggregators".

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "actors/interfaces.hpp"
#include "fedcaf/error.hpp"

namespace fedcaf {

/// How a relay's round goes up: streamed as it settles (window and disk
/// modes), or (ram mode, and a round sat out) as the side's answer.
struct relay_start {
  std::optional<relay_step> stream;
  relay_result answer; ///< unless streamed
};

/// The answers of a relay's children's side to its parent's models, by
/// the number of the model handed down, as the courier gets them (on an
/// actor's thread) for the trainer (on the upstream client's) to wait for.
/// Thread-safety: safe (a mutex).
class relay_answers {
public:
  /// Model `model`'s round is settled as `s` says; the wake (on_settled)
  /// is called after.
  void settled(uint64_t model, const relay_step& s);
  /// Called (on the courier's thread) each time a round's sum settles
  /// further.
  void on_settled(std::function<void()> wake);
  /// Waits until model `model`'s round streams or is answered.
  result<relay_start> start(uint64_t model);
  /// The bytes of model `model`'s round's sum settled so far.
  uint64_t ready(uint64_t model) const;
  /// Model `model` is answered with `r`.
  void put(uint64_t model, result<relay_result> r);
  /// The side stopped: every answer still awaited is `why`.
  void fail_all(const std::string& why);
  /// Forgets answers to models before `model` (rounds given up, or gone
  /// up).
  void forget_before(uint64_t model);

private:
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::map<uint64_t, relay_step> streams_;
  std::map<uint64_t, result<relay_result>> answers_;
  std::function<void()> wake_;
  std::string failure_;
};

/// Spawns a relay's courier to `server` (the children's side) in `sys`:
/// it hands the server each parent's model (relay_atom, with its number)
/// and the bytes of it that arrived (arrived_atom), in the order they are
/// made; the server's answers go to `answers`, and so does each step of a
/// streaming round's sum (settled_atom, for the oldest model not yet
/// answered: the side answers them in order). It quits, and fails
/// whatever is awaited, when the server goes down.
relay_courier_actor spawn_relay_courier(caf::actor_system& sys,
                                        server_actor server,
                                        std::shared_ptr<relay_answers> answers);

} // namespace fedcaf
