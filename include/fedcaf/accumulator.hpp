#pragma once
// One interface over the server's accumulators, whatever the memory mode: a
// model-sized sum (fedavg_accumulator: ram mode, averaging rules) or open
// chunk positions (window_accumulator: window and disk modes, and the robust
// rules in ram mode). make() picks the kind that the aggregation plan names,
// once; the aggregator then calls the same functions in every mode (LevelDB's
// SanitizeOptions is the precedent: decide once, then never branch on it).
// Every call works on a chunk or a round, never on one element.
// Thread-safety: none; owned by the aggregator actor.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "fedcaf/aggregation_plan.hpp"
#include "fedcaf/byte_buffer.hpp"
#include "fedcaf/chunk_plan.hpp"
#include "fedcaf/error.hpp"
#include "fedcaf/manifest.hpp"
#include "fedcaf/secagg.hpp"
#include "fedcaf/secagg_masking.hpp"
#include "fedcaf/server_optimizer.hpp"
#include "fedcaf/work_pool.hpp"

namespace fedcaf {

class accumulator {
public:
  virtual ~accumulator() = default;

  /// Returns the accumulator that `p.accumulator` names, for models laid
  /// out as `m` and cut by `plan`: a model-sized sum (model_sum), or
  /// `window` open positions of p.position_contributors updates reduced by
  /// p.robust, into the global model's memory iff p.in_place
  /// (open_positions). Returns an error iff the tensors do not share one
  /// floating dtype, or (open_positions) window or contributors is 0.
  static result<std::unique_ptr<accumulator>> make(const manifest& m,
                                                   chunk_plan plan,
                                                   const aggregation_plan& p,
                                                   uint32_t window);

  /// The plan that chunk sequence numbers refer to.
  virtual const chunk_plan& plan() const = 0;

  /// Every reduced (and optimizer-stepped) value is clamped to +-limit
  /// before it is published (also to the element type's finite range).
  virtual void set_value_limit(float limit) = 0;

  /// Returns true iff chunk `seq` may be folded now: it lies in the plan
  /// and (open positions) in the open window.
  virtual bool open(uint64_t seq) const = 0;

  /// Positions below this one are settled: a chunk folded there may have
  /// its credit back. A model-sized sum settles a chunk as it is folded
  /// (returns the chunk count); open positions settle a position when every
  /// awaited contribution reduced it (returns the lowest open position).
  virtual uint64_t settled() const = 0;

  /// The global model's bytes below this position already hold this
  /// round's result (open positions in place: the highest settled() of the
  /// round, not lowered by restart); 0 where the model is not written
  /// before finalize.
  virtual uint64_t overwritten_below() const = 0;

  /// Adds weight * x to chunk `seq` (robust rules: keeps x, tagged `tag`);
  /// `global` is the global model's bytes (all tensors back to back),
  /// which a model-sized sum folds against. Returns an error, changing
  /// nothing, iff !open(seq), x is not that chunk's size, or (open
  /// positions) every contributor delivered it.
  virtual result<void> fold(uint64_t seq, std::span<const std::byte> x,
                            double weight, uint64_t tag,
                            std::span<const std::byte> global) = 0;

  /// Adds x, a relay's partial sum of updates of total weight `weight`, to
  /// chunk `seq` as it is (not scaled). Fails as fold() does, and under a
  /// robust rule.
  virtual result<void> fold_sum(uint64_t seq, std::span<const std::byte> x,
                                double weight,
                                std::span<const std::byte> global) = 0;

  /// The threads a chunk's fold may run on, for the checks before it
  /// (chunk_checker::inspect): none beside the caller's by default.
  virtual work_split fold_split() { return {}; }

  /// True iff fold_measured() folds and measures in one pass (a
  /// model-sized sum, which reads g to fold anyway).
  virtual bool measures() const { return false; }
  /// Folds as fold() (`summed`: fold_sum()) and returns the sum of
  /// (x - k g)^2 over the elements the update's distance counts (k =
  /// weight if summed, else 1); with `max_abs`, check_finite's bounds are
  /// tested in the same pass (fedavg_accumulator::fold_measured).
  /// REQUIRES: measures().
  virtual result<double>
  fold_measured(uint64_t seq, std::span<const std::byte> x, double weight,
                bool summed, std::span<const std::byte> global,
                std::optional<double> max_abs = std::nullopt);
  /// Takes the last fold_measured() back out exactly, called with its
  /// arguments before any other fold. REQUIRES: measures().
  virtual void unfold(uint64_t, std::span<const std::byte>, double, bool,
                      std::span<const std::byte>) {}

  /// True iff fold_grid() folds a relay's int32 sums on this
  /// accumulator's exact grid (a model-sized sum of a float32 model).
  virtual bool takes_grid() const { return false; }
  /// Folds x, a relay's int32 sums on the grid of total weight `weight`
  /// (Offer.gridSums), exactly, and returns their distance from weight g
  /// (fedavg_accumulator::fold_grid). REQUIRES: takes_grid().
  virtual result<double> fold_grid(uint64_t, std::span<const std::byte>, double,
                                   std::span<const std::byte>) {
    return error{errc::internal, "no exact grid to fold sums on"};
  }
  /// Takes the last fold_grid() back out, exactly.
  virtual void unfold_grid(uint64_t, std::span<const std::byte>) {}
  /// A relay's: the next finalize() leaves int32 sums on the grid where
  /// every position summed `weight` (fedavg_accumulator::grid_sums_of);
  /// sums_on_grid() says whether it did.
  virtual void grid_sums_of(double) {}
  virtual bool sums_on_grid() const { return false; }
  /// In place (window and disk modes), for the round under way: each
  /// position's global values are kept aside (a spill file: page cache,
  /// not memory) as they are first overwritten, and a reset puts them back
  /// (restore_originals()): a relay's int32 sums are relative to them.
  virtual void keep_originals() {}
  /// After restart(): the positions overwritten in place and kept hold
  /// their global values again, so the round is folded again from the
  /// model it began with (ram mode's result). Returns an error iff they
  /// could not be kept or read back (the positions then hold the first
  /// pass's averages).
  virtual result<void> restore_originals(byte_buffer& model) {
    (void)model;
    return {};
  }
  /// The global model was replaced (a relay adopts its parent's next
  /// one): nothing overwritten or kept refers to it.
  virtual void new_model() {}
  /// A streaming relay's (window and disk modes): `on`, each position
  /// that settles with the round's weight and int32 sums holds them, on
  /// the grid (window_accumulator::emit_grid); settled_on_grid() says
  /// which did.
  virtual void emit_grid(bool on) { (void)on; }
  virtual bool settled_on_grid(uint64_t seq) const {
    (void)seq;
    return false;
  }

  /// A relay's accumulator: settled positions (finalize's result) hold the
  /// weighted sums, not the means, and take_position_weights() the weight
  /// summed at each position.
  virtual void emit_sums() = 0;
  virtual std::vector<double> take_position_weights() = 0;
  /// The weight summed at position `seq`, once it settled (0: nobody
  /// delivered it, or not settled yet, or not emitting sums).
  virtual double settled_weight(uint64_t seq) const = 0;

  /// Secure aggregation: adds the masked chunk x (little-endian uint32 per
  /// element of an F32 model) to chunk `seq`'s sum in Z_2^32. Fails,
  /// changing nothing, as fold() does.
  virtual result<void> fold_ring(uint64_t seq,
                                 std::span<const std::byte> x) = 0;

  /// Returns true iff position settled() has every contribution it awaits
  /// and can be settled now (never for a model-sized sum).
  virtual bool ready() const = 0;

  /// Settles position settled(): reduces it (after `opt`, if not null) into
  /// the next model (in place: `model` itself, whose pages at that position
  /// are then released if it maps a file), or (`ring`) stores its ring sum
  /// into `model` there, where unmask() finds it. REQUIRES: ready(),
  /// model.size() == plan().total_bytes().
  virtual void settle_next(byte_buffer& model, server_optimizer* opt,
                           bool ring) = 0;

  /// Hands in a model-sized buffer nobody reads any more (an old global
  /// model): it holds the next sum or the next model. Ignored (and so
  /// freed) if not needed or of another size.
  virtual void recycle(byte_buffer&& buffer) = 0;

  /// One contributor's update was cut off before chunk `next_sequence`
  /// (open positions: it is awaited below only; a sum needs nothing).
  virtual void cut(uint64_t next_sequence) = 0;

  /// `contributors` clients (0: unknown, ignored), and those cut off, now
  /// complete a position (open positions; a sum needs nothing).
  virtual void expect(uint32_t contributors) = 0;

  /// Forgets every contribution of the round; `contributors` clients will
  /// send again (open positions: at least 1 is awaited).
  virtual void restart(uint32_t contributors) = 0;

  /// Ends the round: every position's result, after `opt` (null: FedAvg),
  /// against `model` (the global model's bytes), as the new model's bytes
  /// (in place: `model`'s own, moved out). Returns an error iff nothing was
  /// folded (a sum) or a position was not settled (open positions).
  virtual result<byte_buffer> finalize(byte_buffer& model,
                                       server_optimizer* opt) = 0;

  /// A model-sized sum calls `f(seq, model)` once per chunk during the next
  /// From now on, calls f(seq, model) as soon as chunk `seq` of a round's
  /// new model (`model`: all its bytes) is final, while it is in the
  /// caches (in finalize, on the thread that settled it: f must be safe to
  /// call for several chunks at once; or as the position settles during
  /// the round), and keeps its results for take_measured(): the new model
  /// measured without a pass of its own. Returns false (and never calls f)
  /// where nothing can be measured so.
  virtual bool
  observe_results(std::function<double(uint64_t, std::span<const std::byte>)>) {
    return false;
  }
  /// What observe_results' f returned for the round just finalized, per
  /// chunk in order; empty unless every chunk was measured (as a secure
  /// round's ring sums are not).
  virtual std::vector<double> take_measured() { return {}; }

  /// Returns the global model `model` as it was before the round, as the
  /// next model, starting over (a secure round that could not unmask): a
  /// sum copies it; open positions, which wrote the round's ring sums into
  /// it, read each position's old bytes back from the file they were kept
  /// in apart (so the mode's memory holds no second model) and move
  /// `model`'s bytes out. Returns an error iff they could not be kept.
  virtual result<byte_buffer> keep(byte_buffer& model) = 0;

  /// Robust rules: per tag, the values dropped as extreme since the last
  /// take; then forgets them. Empty for the other rules.
  virtual std::map<uint64_t, uint64_t> take_trimmed() = 0;

  /// Secure aggregation, at the round's end: removes the masks `plan`
  /// names from every chunk's ring sum (chunks in parallel, up to 4
  /// threads) and turns it into the round's mean: recorded as a sum of
  /// plan.contributors updates that finalize() divides (a sum), or written
  /// into `model` after `opt`'s noise, clamped (open positions in place).
  /// Returns an error (poisoned_update) iff an unmasked sum lies beyond
  /// what the contributors can give; then no chunk is recorded.
  /// REQUIRES: F32 model; open positions: every position settled (ring).
  result<void> unmask(const secagg::quantizer& q,
                      const secagg::unmask_plan& plan, byte_buffer& model,
                      server_optimizer* opt);

protected:
  /// Chunk `seq`'s ring sum: in the accumulator's storage (zeroed if
  /// nothing was folded there) or in `model`.
  virtual std::span<std::byte> ring_sum(uint64_t seq, byte_buffer& model) = 0;

  /// What an unmasked chunk's mean is multiplied by: `updates` where
  /// finalize() divides by the weight, 1 where the mean is final.
  virtual float unmask_factor(float updates) const = 0;

  /// Chunk `seq`'s ring sum `sum` holds its unmasked mean times
  /// unmask_factor(updates): records it, or finishes it in `model`.
  virtual void unmasked(uint64_t seq, std::span<std::byte> sum, float updates,
                        byte_buffer& model, server_optimizer* opt) = 0;
};

} // namespace fedcaf
