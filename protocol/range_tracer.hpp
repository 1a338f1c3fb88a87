#pragma once
// Traces a masked upload out of range to its sender, without CAF and
// without unmasking anyone's update alone. Under secure aggregation the
// server sees only the sum: when a round's unmasked sum lies beyond what
// its contributors can give, one of them (at least) uploaded something
// other than a masked update of bounded values, and nobody can tell which
// from that round. So from then on each round holds some suspects out of
// its sum (chosen at random after the shares are set, told only to
// themselves), and the evidence is kept:
//
//   suspects: the clients in the sum of every failing round since the
//             trace began (a failing sum always holds a liar, so with one
//             liar it is always a suspect);
//   cleared:  the suspects held out of a round whose sum was in range.
//
// A client is named once it is the only suspect and was held out of a
// round that completed; from then on it is held out of every sum it can be
// (never dropped for it), until a sum without it fails. A passing sum never
// clears a client in it (a liar may upload honestly when it pleases), so
// with one liar no honest client is ever named. Two liars or more can make
// the evidence point at an honest client (each lies while the other is
// held out, then both while an honest suspect is in the sum): so the trace
// only holds the client it names out of the sums, and lets it go as soon
// as a sum without it fails, which is what those liars must do to fail any
// round again. If the failing sums share no client, the trace starts again
// from the last.
// Thread-safety: none; owned by the server's secure aggregation flow.

#include <cstdint>
#include <optional>
#include <random>
#include <set>
#include <string>

namespace fedcaf {

class range_tracer {
public:
  /// The client the trace names, and the evidence, for the log and report.
  struct traced {
    std::string id;
    std::string why;
  };

  explicit range_tracer(uint64_t seed);

  /// True iff a failing sum is being traced.
  bool tracing() const { return !suspects_.empty(); }
  const std::set<std::string>& suspects() const { return suspects_; }
  /// The client the trace named, held out of the sums; empty if none.
  const std::string& named() const { return named_; }

  /// The clients of `members` (those that will mask, after the disputes)
  /// to hold out of this round's sum: the client named, if any; else
  /// suspects only, at most half of them (at least one), those not cleared
  /// first, the rest drawn at random; never so many that fewer than `least`
  /// stay in the sum. Empty when not tracing and none is named.
  std::set<std::string> hold_out(const std::set<std::string>& members,
                                 size_t least);

  /// Round `round`'s sum of `in_sum` (with `held` held out of it) was in
  /// range, or not. Returns the client named, iff the evidence now names
  /// one (the trace then ends; it is held out of the sums from now on).
  /// A failing sum without the client named lets it go (it is no longer
  /// named) and starts a trace from that sum.
  std::optional<traced> record(uint32_t round,
                               const std::set<std::string>& in_sum,
                               const std::set<std::string>& held,
                               bool in_range);

private:
  std::mt19937_64 draw_;
  std::set<std::string> suspects_;
  std::set<std::string> cleared_;
  uint32_t failed_ = 0; ///< failing rounds in this trace
  uint32_t first_ = 0;  ///< the round the trace began at
  std::string named_;
};

} // namespace fedcaf
