#pragma once
// Incremental FedAvg: every arriving chunk is folded into a running sum and
// released; finalize() turns each chunk into the mean of what was folded
// into it (so an update that was cut off counts exactly where it arrived),
// then applies the server optimizer, if any, per chunk.
//
// The sum does not depend on the order the chunks arrive in, to the bit: it
// is a sum of integers. Each update x of weight w adds, per element,
// q = round(w (x - g) / u) (a relay's partial sum X of weight W adds
// round((X - W g) / u)), g the global model's value there, u the grid of
// the element's run of 64: 2^-27 of its largest |g| rounded up to a power
// of two (at least 2^-34). The products and the rounding are one
// update's own; the additions are exact, in any order. The sums are int32
// in the model-sized buffer (as many bytes as a float32 sum: the memory of
// ram mode is unchanged); a block whose sums could outgrow int32 (updates
// far from g, many updates, large sample-size weights) moves to int64 of
// its own (8 KiB), so it never wraps. The mean is g + u S / W, rounded to
// float once. Precision: u / 2 per update, below float32's half ulp of the
// run's largest value. A delta beyond 2^46 u (2^19 times the run's
// magnitude: never honest, the update bound refuses far less) turns its
// block into float64 sums for the round, in arrival order.
//
// The same pass measures the update's distance from g (fold_measured), and
// a fold is taken back out exactly (unfold) when that distance refuses it.
// It is never zeroed: the first chunk folded at a position writes, later
// ones add. So a recycled buffer needs no memset and a fresh one is faulted
// in once, by a write. For F32 models the sum becomes the new model in
// place; for 16-bit models it is converted into a model-sized buffer and
// kept for the next round. Secure aggregation's ring sums (Z_2^32) use the
// same storage and become float32 sums of their chunk (mark_folded).
// Thread-safety: none; owned by the aggregator actor.

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "fedcaf/byte_buffer.hpp"
#include "fedcaf/chunk_plan.hpp"
#include "fedcaf/error.hpp"
#include "fedcaf/manifest.hpp"
#include "fedcaf/server_optimizer.hpp"
#include "fedcaf/work_pool.hpp"

namespace fedcaf {

class fedavg_accumulator {
public:
  /// Returns an accumulator for models laid out as `m` and cut by `plan`, or
  /// an error iff the tensors do not all have one floating dtype.
  static result<fedavg_accumulator> make(const manifest& m, chunk_plan plan);

  /// The plan that chunk sequence numbers refer to.
  const chunk_plan& plan() const { return plan_; }

  /// Adds weight * (x - g) to the sum over chunk `seq` of the plan, g the
  /// global model `global` (all tensors back to back) there. Returns an
  /// error, leaving the sum unchanged, iff seq is outside the plan, x is not
  /// exactly that chunk's size, or global is not model-sized.
  result<void> fold(uint64_t seq, std::span<const std::byte> x, double weight,
                    std::span<const std::byte> global) {
    auto d = fold_measured(seq, x, weight, false, global);
    return d ? result<void>{} : result<void>{d.err()};
  }
  /// Adds x, a relay's partial sum of updates of total weight `weight`, as
  /// x - weight g. Fails as fold() does.
  result<void> fold_sum(uint64_t seq, std::span<const std::byte> x,
                        double weight, std::span<const std::byte> global) {
    auto d = fold_measured(seq, x, weight, true, global);
    return d ? result<void>{} : result<void>{d.err()};
  }
  /// Folds as fold() (`summed`: as fold_sum()) and returns the sum of
  /// (x - k g)^2, k = weight if summed else 1, over the elements of
  /// tensors the update's distance counts (update_check.hpp), in float32
  /// per block: the pass that folds measures. Fails as fold() does. With
  /// `max_abs`, it also fails (poisoned_update, nothing changed) iff x
  /// holds a NaN, an infinity or a value beyond +-max_abs: check_finite's
  /// test, made of each block as the fold reaches it (then in the caches),
  /// what was folded before taken back out.
  result<double> fold_measured(uint64_t seq, std::span<const std::byte> x,
                               double weight, bool summed,
                               std::span<const std::byte> global,
                               std::optional<double> max_abs = std::nullopt);
  /// Takes the last fold_measured() back out, exactly (the sums are
  /// integers): called with its arguments, before any other fold.
  void unfold(uint64_t seq, std::span<const std::byte> x, double weight,
              bool summed, std::span<const std::byte> global);

  /// Adds x, a relay's partial sum of total weight `weight` given as its
  /// int32 sums S on this accumulator's grid (Offer.gridSums: one
  /// little-endian int32 per element of a float32 model; its x is
  /// weight g + u S), to the sums as they are: exact, the same integers a
  /// flat round would have added. Returns the sum of (u S)^2 over the
  /// elements the update's distance counts: the distance of x from
  /// weight g, as fold_measured(summed) measures it. Fails, changing
  /// nothing: poisoned_update iff a sum lies beyond weight x 2^46 grid
  /// steps (beyond the exact range of `weight` updates); out_of_range iff
  /// x is not 4 bytes per element of the chunk or the model not float32.
  result<double> fold_grid(uint64_t seq, std::span<const std::byte> x,
                           double weight, std::span<const std::byte> global);
  /// True iff fold_grid() takes sums: a float32 model.
  bool takes_grid() const { return type_ == dtype::float32; }
  /// Takes the last fold_grid() back out, exactly: called with its chunk
  /// before any other fold.
  void unfold_grid(uint64_t seq, std::span<const std::byte> x);

  /// finalize() leaves each position's weighted sum, not its mean (a
  /// relay's partial sum), and position_weights() its weight.
  void emit_sums() { sums_ = true; }
  /// A relay's (emit_sums): the next finalize() leaves its integer sums as
  /// they are, int32 on the grid (sums_on_grid(): the bytes its parent
  /// folds with fold_grid, so that a tree sums what a flat round does),
  /// iff `weight` > 0, every chunk summed exactly that weight, every sum
  /// fits in int32, the model is float32 and no chunk is a secure sum;
  /// else float sums, as ever.
  void grid_sums_of(double weight) { grid_weight_ = weight; }
  /// True iff the last finalize() left int32 sums on the grid.
  bool sums_on_grid() const { return on_grid_; }
  /// The weight summed at each position by the last finalize() (emit_sums).
  std::vector<double> take_position_weights() {
    return std::move(position_weights_);
  }

  /// The weights folded into chunk `seq` so far. REQUIRES: seq < chunks.
  double weight_sum(uint64_t seq) const {
    return weights_.empty() ? 0.0 : weights_[seq];
  }

  /// Hands in a model-sized buffer nobody reads any more (an old global
  /// model): it holds the next F32 sum, or the next 16-bit result. Ignored if
  /// not needed or of another size.
  void recycle(byte_buffer&& buffer);

  /// Forgets every contribution of the round (their weights too): the next
  /// chunk folded at each position writes, as in a fresh accumulator.
  void discard() {
    weights_.clear();
    ring_started_.clear();
    forget_round();
  }

  /// Secure aggregation keeps its sum in Z_2^32 (one uint32 per element of
  /// an F32 model) in this sum's own storage, so that it costs no more
  /// memory than a plain round. Adds the masked chunk x (little-endian
  /// words) to chunk `seq`'s ring sum (the first one is written, not
  /// added). Fails, changing nothing, as fold() does.
  result<void> fold_ring(uint64_t seq, std::span<const std::byte> x);

  /// The bytes of chunk `seq`'s ring sum, zeroed if nothing was folded
  /// there this round. REQUIRES: seq < chunks, F32 model.
  std::span<std::byte> ring(uint64_t seq);

  /// Declares that chunk `seq`'s storage now holds a float32 sum of total
  /// weight `weight` (the secure sum, unmasked and dequantized in place).
  void mark_folded(uint64_t seq, double weight);

  /// Divides every chunk of the sum by its weight sum in place, applies
  /// `opt` (null: FedAvg) against `global` (the current model's bytes), and
  /// hands the storage out as the new model; the accumulator starts over. A
  /// chunk nobody folded keeps its value in `global`. Returns an error iff
  /// no chunk was folded or `global` is not model-sized.
  result<byte_buffer> finalize(std::span<const std::byte> global,
                               server_optimizer* opt);

  /// Hands out a copy of `global` (the current model's bytes) as the new
  /// model, in the sum's storage, and starts over: a round that averaged
  /// nothing. REQUIRES: F32 model, global model-sized.
  result<byte_buffer> keep(std::span<const std::byte> global);

  /// Every finalize() from now on calls f(seq, new model's bytes) as each
  /// chunk of the new model is final (while it is in the caches), on
  /// whichever thread settles that chunk (f must be safe to call at once
  /// for other chunks), and keeps what it returns per chunk for
  /// take_measured().
  void observe_results(
      std::function<double(uint64_t, std::span<const std::byte>)> f) {
    observer_ = std::move(f);
  }
  /// What the last finalize()'s observer returned, per chunk in order.
  std::vector<double> take_measured() { return std::move(measured_); }

  /// finalize() settles FedAvg's chunks (no optimizer) on up to `n`
  /// threads, ranges of chunks each (a pool of threads of its own, started
  /// at the first use); the result is the same bits for any n.
  void set_threads(unsigned n) { threads_ = std::max(1u, n); }
  /// fold_measured() folds a chunk of 4 segments of 16,384 elements or more
  /// in parts of at least 2 segments on up to `n` threads (the same pool);
  /// the sums and distances are the same bits for any n. Off (1) by
  /// default: it pays where cores are idle while chunks arrive, not where
  /// the clients or the connections need them.
  void set_fold_threads(unsigned n) { fold_threads_ = std::max(1u, n); }
  /// The fold's threads (set_fold_threads), for other work on a chunk.
  work_split fold_split() {
    return fold_threads_ > 1 ? work_split{pool(), fold_threads_} : work_split{};
  }

  /// A fold adds each value to the sum as it makes it (one pass, on by
  /// default), or makes the chunk's values first and adds them after (two
  /// passes: the same bits; for tests and benchmarks).
  void set_fused_fold(bool on) { fused_ = on; }

  /// Every averaged (and optimizer-stepped) value is clamped to +-limit
  /// before it is published (also to the element type's finite range).
  void set_value_limit(float limit) { limit_ = limit; }

  /// Sample-size weights (up to 2^20): each delta is scaled by w / 2^bits
  /// rather than w, so that the sums of a few hundred samples' weights
  /// stay in int32 (the grid then 2^bits coarser for weight 1).
  void set_weight_bits(int bits) { weight_bits_ = bits; }

  /// Blocks whose sums moved to int64 this round (for tests and figures).
  size_t wide_blocks() const { return wide_.size(); }

private:
  /// A part of a chunk's fold that runs beside others (apply_in_parts).
  struct fold_part {
    double* squares = nullptr; ///< per segment of the chunk: its distance
    bool off_path = false;     ///< stopped where a block left the plain path
  };

  /// Adds (add = +1) or takes out (-1) chunk `seq`'s contribution; `assign`:
  /// the first at its position, written. Returns the distance, or nothing,
  /// changing nothing, iff a delta lies beyond the exact range (add > 0),
  /// or a block of x is out of bounds by any_out_of_bounds(max_abs).
  /// Elements [from, upto) of the chunk only (`from` a segment's first).
  /// `part`: a part beside others, which stops (changing nothing, nothing
  /// returned, off_path set) at a block off the plain path (not int32, or
  /// values too large or out of bounds), and writes its segments'
  /// distances into part->squares.
  std::optional<double> apply(uint64_t seq, const std::byte* x, double weight,
                              bool summed, const std::byte* global, int add,
                              bool assign, uint64_t upto = UINT64_MAX,
                              std::optional<double> max_abs = std::nullopt,
                              uint64_t from = 0, fold_part* part = nullptr);
  /// apply(+1) of a whole chunk, its segments in parts on the pool's
  /// threads where there is a pool: the same sums and distance, to the bit,
  /// as on one thread (which folds a chunk that a part stopped in).
  std::optional<double> apply_in_parts(uint64_t seq, const std::byte* x,
                                       double weight, bool summed,
                                       const std::byte* global, bool assign,
                                       std::optional<double> max_abs);
  /// The grid exponent of run `r` of 64 elements (first element `first`,
  /// `n` elements).
  int grid_exponent(uint64_t r, uint64_t first, uint64_t n,
                    const std::byte* global);
  /// Turns chunk `seq`'s integer sums into means (or sums) in place,
  /// clamped to +-limit.
  void settle_chunk(uint64_t seq, const std::byte* global, float limit);
  /// Adds (add = +1) or takes out (-1) int32 sums x of chunk `seq`;
  /// `assign`: the first at its position, written. Returns the distance,
  /// or nothing, changing nothing, iff a sum lies beyond the exact range
  /// of `weight` updates (add > 0).
  std::optional<double> apply_grid(uint64_t seq, const std::byte* x,
                                   double weight, const std::byte* global,
                                   int add, bool assign);
  /// The checks and the set-up of a fold of `bytes` into chunk `seq`: its
  /// storage, and what unfold() puts back.
  result<void> begin_fold(uint64_t seq, uint64_t bytes, double weight,
                          std::span<const std::byte> global);
  /// Whether finalize() may leave the round's sums on the grid (see
  /// grid_sums_of()).
  bool grid_output() const;
  /// Writes chunk `seq`'s int64 sums into its int32 storage (each fits).
  void narrow_chunk(uint64_t seq);
  void forget_round();
  bool sums_ = false;
  bool fused_ = true;
  double grid_weight_ = 0; ///< grid_sums_of()
  bool on_grid_ = false;   ///< the last finalize() left int32 sums
  std::vector<double> position_weights_;
  fedavg_accumulator(uint64_t total_bytes, dtype type, chunk_plan plan)
      : total_bytes_(total_bytes), type_(type), plan_(std::move(plan)) {}

  /// Chunk `seq`'s ring storage; `fresh` iff nothing was folded there yet.
  std::span<std::byte> ring_bytes(uint64_t seq, bool& fresh);

  uint64_t sum_bytes() const {
    return total_bytes_ / dtype_bytes(type_) * sizeof(float);
  }

  uint64_t total_bytes_ = 0;
  dtype type_;
  chunk_plan plan_;
  byte_buffer sum_;                ///< float32 sums
  std::vector<bool> ring_started_; ///< per chunk: holds this round's ring sum
  byte_buffer spare_; ///< 16-bit models: where the next result goes
  /// Per chunk: the weights folded (0: holds no sum yet; empty: none).
  std::vector<double> weights_;
  /// Per chunk: true iff its storage holds a float32 sum (secure
  /// aggregation's, unmasked), not integer sums.
  std::vector<bool> float_sum_;
  /// Per chunk: the index of its first block; per chunk, the byte ranges
  /// outside the distance.
  std::vector<uint64_t> first_block_;
  std::vector<std::vector<std::pair<uint64_t, uint64_t>>> uncounted_;
  /// Per run of 64 elements this round, the grid exponent (INT8_MIN: not
  /// yet); per block of 1024, a bound on |sum| of its int32 sums, and its
  /// int64 sums' index + 1 in wide_ (0: int32).
  std::vector<int8_t> exponent_;
  std::vector<uint32_t> bound_;
  std::vector<uint32_t> wide_index_;
  std::vector<std::unique_ptr<int64_t[]>> wide_;
  std::vector<uint64_t> wide_bound_; ///< per wide block: bound on |sum|
  /// Weights are divided by 2^weight_bits_ before they scale a delta.
  int weight_bits_ = 0;
  std::function<double(uint64_t, std::span<const std::byte>)> observer_;
  std::vector<double> measured_;
  unsigned threads_ = 1;
  unsigned fold_threads_ = 1;
  /// max(threads_, fold_threads_) in all, once needed
  std::unique_ptr<work_pool> pool_;
  /// The pool, started if not yet. REQUIRES: threads_ or fold_threads_ > 1.
  work_pool* pool();
  double undo_weight_ = 0; ///< weights_[seq] before the last fold_measured
  /// The bounds of its blocks' int32 sums before the last fold_measured,
  /// put back where it is refused or taken back out (else an update never
  /// counted would send blocks to int64 sooner: memory, not bits).
  std::vector<uint32_t> undo_bounds_;
  void save_bounds(uint64_t seq);
  void restore_bounds(uint64_t seq);
  float limit_ = std::numeric_limits<float>::max();
};

} // namespace fedcaf
