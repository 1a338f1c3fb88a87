#pragma once
// What a relay's scheduler keeps of its group's round beside the roster,
// without CAF: a round short of min_clients is sat out (the children that
// have not offered leave at once; it completes once the uploads under way
// have closed), and a streaming relay's round (window and disk modes)
// commits once position 0 holds min_clients updates: its children that
// leave mid-round stay in the positions they delivered (kept) and count
// towards min_clients, and the figures its upstream offer carries are
// fixed then. A server's scheduler keeps one too: it never sits out nor
// streams. See docs/design.md, "Trees of aggregators".
// Thread-safety: none; owned by the scheduler actor.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "protocol/relay_model.hpp"
#include "protocol/round_roster.hpp"

namespace fedcaf {

class group_round {
public:
  /// A new round: not sat out, not streaming, nobody kept.
  void start() { *this = group_round{}; }

  // -- sitting out -----------------------------------------------------------

  /// True iff the round is sat out (its children are too few).
  bool sitting_out() const { return sitting_out_; }
  /// True iff a round whose `participants` may still deliver cannot have
  /// `min_clients` (the kept children count; a streaming round never falls
  /// short).
  bool falls_short(size_t participants, uint32_t min_clients) const {
    return participants + kept_ < min_clients && !streaming_;
  }

  /// What a sit-out does now.
  struct sit_out_step {
    bool first = false; ///< the round was not sat out before
    /// The participants that had not offered left `roster` now: the
    /// aggregator awaits fewer.
    bool cut = false;
    /// Uploads under way are awaited: the sit-out completes on a later
    /// call, once they have closed; else it completes now.
    bool waits = false;
  };
  /// The round cannot have min_clients. `announced`: its clients were told
  /// of it (else it never opened, and completes at once). The first call
  /// for an announced round sits it out from then on and takes the
  /// participants of `roster` that have not offered out of it.
  sit_out_step sit_out(bool announced, round_roster& roster);
  /// The log line of a sit-out that waits for the uploads under way, the
  /// round short of its children for `why`.
  static std::string waits_note(const std::string& why);
  /// The log line of a sit-out of round `round` that completes with
  /// `step`: `why` if it is the first, else that the uploads have closed.
  static std::string sits_out_note(const std::string& why,
                                   const sit_out_step& step, uint32_t round);

  // -- streaming -------------------------------------------------------------

  /// True iff the round's sum goes up as it settles (never sat out now).
  bool streaming() const { return streaming_; }
  /// Children that left the round with chunks in the sum.
  uint32_t kept() const { return kept_; }
  /// Of those, the ones that had delivered their whole update: still in
  /// every position, so the aggregator awaits them there.
  uint32_t kept_whole() const { return kept_whole_; }
  /// The updates each open position of `roster`'s round awaits: its
  /// participants', and those of the children kept whole.
  uint32_t contributors(const round_roster& roster) const {
    return static_cast<uint32_t>(roster.participants().size()) + kept_whole_;
  }
  /// A child left with its whole update in the sum.
  void keep_whole() {
    ++kept_;
    ++kept_whole_;
  }
  /// A child left (cut, dropped or refused) with `chunks` of its update in
  /// the sum: it counts towards min_clients iff that is a chunk or more.
  void keep_cut(uint64_t chunks) { kept_ += chunks > 0 ? 1 : 0; }

  /// The sum is settled up to `bytes`, position 0 with weight `weight`.
  /// Returns the step the server hears, or nullopt: the round is sat out,
  /// `weight` is not positive, or position 0 does not hold `min_clients`
  /// yet. The first step commits the round (streaming) and fixes the
  /// figures of every later step: the children in position 0 (the
  /// participants of `roster` and those kept) and their mean loss.
  std::optional<relay_step> settle(uint64_t bytes, double weight,
                                   const round_roster& roster,
                                   uint32_t min_clients);

private:
  bool sitting_out_ = false;
  bool streaming_ = false;
  uint32_t kept_ = 0;
  uint32_t kept_whole_ = 0;
  double stream_loss_ = 0;      ///< the offer's: the children's mean loss
  uint32_t stream_clients_ = 0; ///< and how many were in position 0
};

} // namespace fedcaf
