#pragma once
// How far every child of a window-mode relay's round has fetched its
// model, without CAF: the relay's download cache keeps a chunk until every
// child still fetching has it, and its download goes no further than the
// cache ahead of the slowest (relay_residency). A child paces the others
// from the round's start until it is silent for the idle timeout (no fetch
// since the start, or since its last), or until it has held the others
// back for the idle timeout (at the low, `hold_gap` chunks or more behind
// the child furthest on, however it drips its progress): then it is paced
// no more, and what it fetches later that left the cache is fetched again
// from the parent (refetch_budget bounds that).
// See docs/design.md, "Trees of aggregators".
// Thread-safety: none; owned by the server actor.

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace fedcaf {

class fetch_pacing {
public:
  using time_point = std::chrono::steady_clock::time_point;

  /// A model of `chunks` chunks goes to `children` (the round's chosen); a
  /// child `hold_gap` (the cache) or more chunks behind the one furthest
  /// on holds it back (0: only silence lets a child go); the round ends at
  /// `deadline`, if set.
  void start(uint64_t chunks, const std::set<std::string>& children,
             time_point now, uint64_t hold_gap = 0,
             std::optional<time_point> deadline = std::nullopt);
  /// True iff a round's model is paced.
  bool active() const { return chunks_ > 0; }

  /// Child `id` was served chunk `seq`. Only a fetch that completes more
  /// of its prefix counts as progress (a chunk fetched again, or one far
  /// ahead, keeps no child paced).
  void fetched(const std::string& id, uint64_t seq, time_point now);

  /// The chunks every child still paced has fetched (all of them when none
  /// is). A child at that low that made no progress for `idle` is paced no
  /// more (its id goes to `dropped`, logged by the caller), and so is every
  /// child within hold_gap of the low when the one furthest on waits
  /// hold_gap or more ahead and the low moved less than hold_gap, or less
  /// than it must to finish by the deadline, in the last `idle`; the
  /// others, ahead, wait for the cache, and their clocks start again each
  /// time the low moves.
  uint64_t low(time_point now, std::chrono::milliseconds idle,
               std::vector<std::string>* dropped = nullptr);

  /// Child `id` left the run (dropped): it paces no more.
  void forget(const std::string& id) { children_.erase(id); }

  /// The model is no longer paced (the round is over, or another came).
  void stop() {
    chunks_ = 0;
    children_.clear();
  }

private:
  struct child {
    uint64_t prefix = 0;      ///< chunks 0 .. prefix - 1 fetched
    std::set<uint64_t> above; ///< fetched past the prefix
    time_point last;          ///< the start, or its last fetch
    bool paced = true;
  };
  /// Lets go every paced child within hold_gap of `low` iff the one
  /// furthest on waits hold_gap or more ahead now and the low moved too
  /// little in the last `idle`.
  void judge_rate(uint64_t low, uint64_t furthest, time_point now,
                  std::chrono::milliseconds idle,
                  std::vector<std::string>* dropped);

  uint64_t chunks_ = 0;
  uint64_t hold_gap_ = 0;
  std::optional<time_point> deadline_;
  /// The low at times since the round's start (the oldest kept is the
  /// last at or before an idle timeout ago).
  std::deque<std::pair<time_point, uint64_t>> lows_;
  uint64_t last_low_ = 0; ///< the low the last call returned
  std::map<std::string, child> children_;
};

} // namespace fedcaf
