#pragma once
// What a relay's aggregator keeps beside the sum, without CAF: the
// parent's model it adopted (how far it has arrived: the one truth its
// refusal of an early offer reads, model_arrival; how far ||g|| has been
// measured), in window mode where g is held for the checks (relay_residency:
// the positions held, those resident, the streams' chunks that wait for g
// at their position, parked in the order they came), and a streaming
// relay's round: its weight (that of position 0) and how each position's
// sum is scaled to it. See docs/design.md, "Trees of aggregators".
// Thread-safety: none; owned by the aggregator actor.

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "fedcaf/byte_buffer.hpp"
#include "fedcaf/chunk_plan.hpp"
#include "fedcaf/error.hpp"
#include "protocol/relay_model.hpp"

namespace fedcaf {

class relay_checks {
public:
  /// `plan`: the children's chunk plan (the aggregator's); `streams`: the
  /// relay's sum streams up as its positions settle (window and disk
  /// modes).
  relay_checks(const chunk_plan& plan, bool streams);

  // -- the parent's model ----------------------------------------------------

  /// Adopts `m` as the round's global model; what was held of the last
  /// one is let go (the caller answers its parked chunks first:
  /// take_all_parked). In window mode `resident` hears each position
  /// fetched again and `sent_up` that sums went up (both from any
  /// thread). Returns true iff ||g|| is to be measured as the model
  /// arrives (arrived()), false iff it is to be measured whole now.
  bool adopt(const relay_model& m, std::function<void(uint64_t)> resident,
             std::function<void()> sent_up);
  /// The refusal of client `id`'s offer iff the model is not whole yet;
  /// nullopt: it may open (measure whatever arrived() has not yet).
  std::optional<error> refuse_offer(const std::string& id) const;
  /// True iff the adopted model is still being measured as it arrives.
  bool measuring() const { return measuring_; }
  /// Bytes [0, upto) are in: returns the positions [from, to) of g to
  /// measure now (window mode; empty otherwise), then call measured(to).
  std::pair<uint64_t, uint64_t> measurable(uint64_t upto) const;
  /// g is measured below position `to` (those may leave the cache).
  void measured(uint64_t to);
  /// g is measured whole.
  void measured_all();

  /// The window-mode relay's residency, or null.
  relay_residency* residency() const { return residency_.get(); }
  /// False iff the relay's round is given up (its parent's model could
  /// not be fetched again): chunks are then checked for finite values
  /// only, and its sum goes nowhere.
  bool has_global() const;

  // -- g at a position, for the checks (window mode) --------------------------

  /// True iff g is resident at position `seq` (held for the checks from
  /// now until it settles); else it is fetched again (asked once) and
  /// filled() says when it is in.
  bool global_at(uint64_t seq);
  /// True iff g at `seq`, held for the checks, is resident again: the
  /// chunks parked for it may go on.
  bool filled(uint64_t seq);
  /// True iff g is resident at `seq` for the checks.
  bool present(uint64_t seq) const { return present_.count(seq) > 0; }
  /// Lets go of g where it is held for the checks (a round over, or
  /// collected again).
  void forget_globals();

  // -- settling (window mode) ---------------------------------------------------

  /// True iff position `seq` may settle now: g is in where nobody
  /// delivered, and no more sums wait to go up than the cache holds.
  bool may_settle(uint64_t seq);
  /// Position `seq` is about to hold its settled sum.
  void settling(uint64_t seq);
  /// Position `seq` settled: g there is let go.
  void settled(uint64_t seq);

  // -- a streaming relay's round ------------------------------------------------

  /// An upload of round `round` opened: true iff it is the first of that
  /// round (its position 0 weighs nothing yet).
  bool stream_opened(uint32_t round);
  uint32_t stream_round() const { return stream_round_; }
  /// Position `seq` settled with weight `w`. Returns the factor its sum is
  /// scaled by to the round's weight W, that of position 0 (1: none; a
  /// position nobody delivered holds g, which then weighs W), or nullopt
  /// iff the round goes up with nothing (position 0 holds nothing, or its
  /// sum goes nowhere).
  std::optional<double> stream_scale(uint64_t seq, double w);
  /// The round's weight W.
  double stream_weight() const { return stream_weight_; }

  /// A relay's sum `bytes` of round weight `weight` (ram mode): each
  /// position summed over another weight (`weights`, by position: a child
  /// cut off counts where it delivered) is scaled in place to `weight`;
  /// file-backed sums give their pages back.
  static void scale_sum(const chunk_plan& plan, byte_buffer& bytes,
                        const std::vector<double>& weights, double weight);
  /// Multiplies the float32 values in `values` by `factor` in place.
  static void scale_floats(std::span<std::byte> values, float factor);

private:
  const chunk_plan& plan_;
  bool streams_;
  std::shared_ptr<model_arrival> arrival_;
  std::shared_ptr<relay_residency> residency_;
  bool measuring_ = false;
  uint64_t measured_ = 0;      ///< positions of the arriving model measured
  std::set<uint64_t> held_g_;  ///< positions where g is held for checks
  std::set<uint64_t> present_; ///< and of those, where it is in
  bool given_up_logged_ = false;
  uint32_t stream_round_ = 0;
  double stream_weight_ = 0;
};

/// A window-mode relay's chunks that wait for g at their position, per
/// stream in the order they came; `Reply` answers each (the aggregator's
/// response promise). Only a stream's next chunk waits: what waits is at
/// most a window of chunks per child.
template <class Reply> class parked_chunks {
public:
  struct chunk {
    uint64_t seq;
    std::string sender;
    std::vector<char> frame;
    Reply reply;
  };

  /// True iff stream `sid` has chunks waiting.
  bool any(uint64_t sid) const { return streams_.count(sid) > 0; }
  /// The sequence number the next chunk of stream `sid` that waits after
  /// those must have. REQUIRES: any(sid).
  uint64_t next_of(uint64_t sid) const {
    return streams_.at(sid).back().seq + 1;
  }
  void park(uint64_t sid, chunk c) { streams_[sid].push_back(std::move(c)); }

  /// Takes the chunks of every stream whose turn came (g present at their
  /// position, in order: up to one whose g is not), one at a time:
  /// `take(chunk)` may park or unpark others.
  template <class Present, class Take>
  void release(Present&& present, Take&& take) {
    std::vector<uint64_t> sids;
    for (const auto& [sid, queue] : streams_)
      sids.push_back(sid);
    for (auto sid : sids)
      for (auto it = streams_.find(sid);
           it != streams_.end() && present(it->second.front().seq);
           it = streams_.find(sid)) {
        auto c = std::move(it->second.front());
        it->second.pop_front();
        if (it->second.empty())
          streams_.erase(it);
        take(c);
      }
  }

  /// Takes every chunk of stream `sid` (its stream ended), in order.
  std::deque<chunk> take_stream(uint64_t sid) {
    auto it = streams_.find(sid);
    if (it == streams_.end())
      return {};
    auto queue = std::move(it->second);
    streams_.erase(it);
    return queue;
  }
  /// The stream with chunks waiting, if any.
  std::optional<uint64_t> first() const {
    if (streams_.empty())
      return std::nullopt;
    return streams_.begin()->first;
  }

private:
  std::map<uint64_t, std::deque<chunk>> streams_;
};

} // namespace fedcaf
