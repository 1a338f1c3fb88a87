#pragma once
// FedAvg in bounded memory for a sync round in which every client streams
// the same chunk plan in the same order: only `window` chunk positions are
// open at once, each summed in a chunk-sized slot of int64 sums, and a
// position is averaged straight into the global model's memory as soon as
// every expected client has delivered it. Memory: the global model plus
// window slots (8 bytes per element). The sums are integers on the exact
// grid of a model-sized sum (grid_units.hpp, fedavg_accumulator.hpp): each
// update adds round(w (x - g) / u) per element, and the mean is
// g + u S / W, rounded as fedavg_accumulator rounds it. So a position's
// mean does not depend on the order its chunks arrived in, and window and
// disk modes give ram mode's model bit for bit.
// Thread-safety: none; owned by the aggregator actor.

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "fedcaf/byte_buffer.hpp"
#include "fedcaf/chunk_plan.hpp"
#include "fedcaf/error.hpp"
#include "fedcaf/manifest.hpp"
#include "fedcaf/server_optimizer.hpp"
#include "fedcaf/work_pool.hpp"

namespace fedcaf {

/// How the contributions at a position become its value.
struct position_rule {
  enum kind { mean, trimmed_mean, median } rule = mean;
  double trim_ratio = 0; ///< trimmed_mean: in [0, 0.5)

  bool robust() const { return rule != mean; }
  /// The values dropped from each end of k sorted ones.
  uint32_t trimmed(uint32_t k) const;
};

class window_accumulator {
public:
  /// Returns an accumulator for `contributors` clients per round over models
  /// laid out as `m` and cut by `plan`, with `window` open positions, or an
  /// error iff the tensors do not share one floating dtype.
  static result<window_accumulator> make(const manifest& m, chunk_plan plan,
                                         uint32_t window, uint32_t contributors,
                                         position_rule rule = {});

  const chunk_plan& plan() const { return plan_; }

  /// The lowest position not yet averaged into the model.
  uint64_t low() const { return low_; }

  /// Returns true iff chunk `seq` may be folded now: it lies in the open
  /// window [low, low + window).
  bool open(uint64_t seq) const {
    return seq >= low_ && seq < low_ + window_ && seq < plan_.chunk_count();
  }

  /// Adds weight (x - g) to position `seq` on the grid, g the global model
  /// `global` (all tensors back to back) there (robust rules: keeps x,
  /// unweighted, tagged `tag`). An empty `global` reads as zeros (a
  /// window-mode relay's round given up: its sum goes nowhere). Returns an
  /// error, changing nothing, iff the position is not open, x is not that
  /// chunk's size, every contributor has already delivered it, or
  /// (poisoned_update) a value lies beyond 2^46 grid steps.
  result<void> fold(uint64_t seq, std::span<const std::byte> x, double weight,
                    std::span<const std::byte> global, uint64_t tag = 0);
  /// Adds x, a partial sum of updates of total weight `weight` (a relay's),
  /// to position `seq` as x - weight g. Fails as fold() does, and under a
  /// robust rule.
  result<void> fold_sum(uint64_t seq, std::span<const std::byte> x,
                        double weight, std::span<const std::byte> global);

  /// True iff the positions sum on the grid (a mean, not a robust rule):
  /// fold_measured(), unfold() and fold_grid() are then open.
  bool on_grid() const { return !rule_.robust(); }
  /// Folds as fold() (`summed`: fold_sum()) and returns the sum of
  /// (x - k g)^2 (k = weight if summed, else 1) over the elements the
  /// update's distance counts, as fedavg_accumulator::fold_measured
  /// measures it (the same bits); with `max_abs`, check_finite's bounds
  /// are tested in the same pass, nothing changed if they fail.
  /// REQUIRES: on_grid().
  result<double> fold_measured(uint64_t seq, std::span<const std::byte> x,
                               double weight, bool summed,
                               std::span<const std::byte> global,
                               std::optional<double> max_abs = std::nullopt);
  /// Takes the last fold_measured() back out, exactly: called with its
  /// arguments before any other fold.
  void unfold(uint64_t seq, std::span<const std::byte> x, double weight,
              bool summed, std::span<const std::byte> global);
  /// True iff fold_grid() takes a relay's int32 sums: on_grid(), float32.
  bool takes_grid() const { return on_grid() && type_ == dtype::float32; }
  /// Adds x, a relay's int32 sums S on this grid of total weight `weight`
  /// (Offer.gridSums), as they are; returns the sum of (u S)^2 over the
  /// counted elements (fedavg_accumulator::fold_grid). Fails as fold()
  /// does, and (poisoned_update) iff a sum lies beyond weight x 2^46 steps.
  result<double> fold_grid(uint64_t seq, std::span<const std::byte> x,
                           double weight, std::span<const std::byte> global);
  /// Takes the last fold_grid() back out, exactly.
  void unfold_grid(uint64_t seq, std::span<const std::byte> x);
  /// Weights are divided by 2^bits before they scale a delta
  /// (client_weights_mode sample_size: 10), as a model-sized sum's.
  void set_weight_bits(int bits) { weight_bits_ = bits; }

  /// Settled positions hold their weighted sums, not their means (a
  /// relay's partial sum), and take_position_weights() their weights.
  /// REQUIRES: not robust.
  void emit_sums() { sums_ = true; }
  /// The weight summed at each position settled since the last call.
  std::vector<double> take_position_weights() {
    return std::move(position_weights_);
  }
  /// The weight summed at settled position `seq` (0: none, or not yet).
  double settled_weight(uint64_t seq) const {
    return seq < position_weights_.size() ? position_weights_[seq] : 0;
  }
  /// With emit_sums() and `on`: a position that settles with position 0's
  /// weight (the round's) and every sum within int32 holds those int32
  /// sums S on the grid, not the floats W g + u S (a streaming relay's
  /// sum for a parent that folds them: Offer.gridSums, Chunk.floatSums).
  /// REQUIRES: takes_grid().
  void emit_grid(bool on) { grid_out_ = on; }
  /// True iff settled position `seq` holds int32 sums on the grid.
  bool settled_on_grid(uint64_t seq) const {
    return seq < position_grid_.size() && position_grid_[seq] != 0;
  }

  /// Secure aggregation: adds the masked chunk x (little-endian uint32 per
  /// element of an F32 model) to position `seq`'s sum in Z_2^32. Fails as
  /// fold() does.
  result<void> fold_ring(uint64_t seq, std::span<const std::byte> x);

  /// Returns true iff position low() has every contribution.
  bool ready() const;

  /// Secure aggregation: copies the ring sum at position low() (uint32 in
  /// host order) into `model` at that position, where the unmasking finds
  /// it once the round's survivors are known, and moves the window on.
  /// REQUIRES: ready(), model.size() == plan().total_bytes().
  void store_ring_next(std::span<std::byte> model);

  /// Writes the average at position low() (g + u S / W, W the weights
  /// folded there), after `opt` if not null, into `model` (the global
  /// model's bytes, in manifest order, read as the current model g) and
  /// moves the window on.
  /// A position nobody delivered keeps its value (the optimizer still steps).
  /// REQUIRES: ready(), model.size() == plan().total_bytes().
  void finalize_next(std::span<std::byte> model, server_optimizer* opt) {
    finalize_next(model, model, opt);
  }

  /// As above, reading the current model from `current` and writing the
  /// new one to `next` (ram mode: the published model stays as it is).
  void finalize_next(std::span<const std::byte> current,
                     std::span<std::byte> next, server_optimizer* opt);

  /// Robust rules: per tag, the values of its contributions that were
  /// dropped as extreme since the last take; then forgets them.
  std::map<uint64_t, uint64_t> take_trimmed() { return std::move(trimmed_); }

  /// A mean's fold of a chunk of two segments (32,768 elements) or more,
  /// and its settling (FedAvg, float32, no optimizer), run in parts on up
  /// to `n` threads,
  /// this one included: each element's sum is its own, so the bits are the
  /// same on any number. 1 (the default): on the caller's thread alone.
  void set_threads(unsigned n) { threads_ = std::max(1u, n); }
  /// The threads set_threads() gave, for other work on a chunk (its
  /// checks): the pool, started at the first call, if more than one.
  work_split split();

  /// Every averaged (and optimizer-stepped) value is clamped to +-limit
  /// before it is stored (also to the element type's finite range).
  void set_value_limit(float limit) { limit_ = limit; }

  /// One contributor's update was cut off before chunk `next_sequence`: it
  /// counts at the positions below, and is no longer awaited from there on.
  void cut(uint64_t next_sequence) { cuts_.push_back(next_sequence); }

  /// The contributors cut off this round (they count in contributors()).
  uint32_t cut_count() const { return static_cast<uint32_t>(cuts_.size()); }

  /// Returns true iff every position of the round has been averaged; then
  /// starts the next round (the cuts are forgotten).
  bool finish_round();
  /// Forgets the round, settled or not, as if it had not begun (the
  /// awaited contributors stay).
  void abandon_round();

  /// Forgets the round's contributions, weights and trimmed counts and
  /// starts it again at position 0 with `contributors` clients (robust
  /// rules: at most as many as it was made for). REQUIRES: contributors > 0.
  void restart(uint32_t contributors);

  /// Changes how many contributions complete a position (clients left the
  /// round before sending anything), counting the contributors cut off
  /// (each is awaited up to its cut). REQUIRES: contributors > 0 and no
  /// open position holds more than that many.
  void set_contributors(uint32_t contributors) {
    contributors_ =
        rule_.robust() ? std::min(contributors, depth_) : contributors;
  }
  uint32_t contributors() const { return contributors_; }

private:
  window_accumulator(dtype type, chunk_plan plan, uint32_t window,
                     uint32_t contributors, position_rule rule);

  float* slot(uint64_t seq);
  int64_t* sums(uint64_t seq) { return reinterpret_cast<int64_t*>(slot(seq)); }
  uint64_t* bounds(uint64_t seq) {
    return bounds_.data() + (seq % window_) * blocks_per_slot_;
  }
  /// Checks that chunk x may be folded at `seq` now, against `global`
  /// (empty, or model-sized); returns g at the position (null: empty).
  result<const std::byte*> admits(uint64_t seq, std::span<const std::byte> x,
                                  std::span<const std::byte> global) const;
  /// Adds (add +1; `assign`: writes) or subtracts (-1) the grid units of
  /// x's elements [from, to) at `seq` (g: that position's global values),
  /// adding each segment's squares into `squares` (if not null) and
  /// raising its blocks' bounds. Returns false, what it added taken back
  /// out, iff a block fails max_abs or a unit passes 2^46 or a block's
  /// bound on |sum| would reach 2^62. REQUIRES: g not null; from, to at
  /// segment edges (or the chunk's end).
  bool apply(uint64_t seq, const std::byte* x, double weight, bool summed,
             const std::byte* g, int add, bool assign, uint64_t from,
             uint64_t to, std::optional<double> max_abs, double* squares);
  /// admits(); where `global` is empty (a window-mode relay's round given
  /// up) the contribution of `weight` is counted at `seq`, nothing folded,
  /// and null returned.
  result<const std::byte*> begin_fold(uint64_t seq,
                                      std::span<const std::byte> x,
                                      std::span<const std::byte> global,
                                      double weight);
  /// Writes the floats g + u S / W (`sums`: W g + u S) of position low()
  /// over [from, to), clamped to +-limit, to `out`.
  void settle_grid(const std::byte* g, float* out, uint64_t from, uint64_t to,
                   double weight, float limit);
  /// True iff position low()'s n sums all lie within int32.
  bool fits_int32(uint64_t n);
  /// Measures the grid of position `seq`'s runs from g (null: zeros), for
  /// the folds and settling of its round there.
  void measure_grid(uint64_t seq, const std::byte* g);
  /// Position `seq`'s grid exponents, one per run of 64 elements.
  int8_t* exponents(uint64_t seq) {
    return exponents_.data() + (seq % window_) * runs_per_slot_;
  }
  /// Robust rules: reduces the k contributions at `seq`'s slot into its
  /// first n floats.
  void reduce(uint64_t seq, size_t n, uint32_t k);
  /// Contributions that complete position `seq`.
  uint32_t needed(uint64_t seq) const;
  /// Calls f(from, to) over [0, n) elements: in parts of at least 32,768
  /// (whole multiples of 16 but the last) on split(), else once.
  template <class F> void in_parts(uint64_t n, F&& f);

  dtype type_;
  chunk_plan plan_;
  uint32_t window_;
  uint32_t contributors_;
  position_rule rule_;
  /// Floats per element a slot holds: 2 (mean: one int64 sum) or
  /// contributors (robust: each contribution as it came).
  uint32_t depth_;
  uint64_t slot_floats_;
  uint64_t low_ = 0;
  byte_buffer slots_;            ///< window x slot_floats_ floats
  std::vector<uint32_t> counts_; ///< per slot: contributions folded
  std::vector<double> weights_;  ///< per slot: their weights
  std::vector<uint64_t> cuts_;   ///< where cut-off updates stopped
  std::vector<uint64_t> tags_;   ///< robust: window x depth_ folders' tags
  std::map<uint64_t, uint64_t> trimmed_; ///< robust: per tag, values dropped
  float limit_ = std::numeric_limits<float>::max();
  bool sums_ = false;
  std::vector<double> position_weights_; ///< emit_sums: per position
  bool grid_out_ = false;                ///< emit_grid()
  std::vector<uint8_t> position_grid_;   ///< emit_grid: per position
  unsigned threads_ = 1;
  std::unique_ptr<work_pool> pool_; ///< threads_ in all, once needed
  int weight_bits_ = 0;
  /// Per chunk: the byte ranges outside the distance (update_check.hpp).
  std::vector<std::vector<std::pair<uint64_t, uint64_t>>> uncounted_;
  uint64_t blocks_per_slot_;
  /// Per slot, per block of 1,024 elements: a bound on |sum| (a
  /// model-sized sum's per block, so both refuse at the same fold).
  std::vector<uint64_t> bounds_;
  uint64_t runs_per_slot_;
  std::vector<int8_t> exponents_; ///< per slot: measure_grid()
  /// The last fold, for unfold: its slot's bounds and weight before, and
  /// whether it folded anything (not in a round given up).
  std::vector<uint64_t> undo_bounds_;
  double undo_weight_ = 0;
  bool undo_folded_ = false;
};

} // namespace fedcaf
