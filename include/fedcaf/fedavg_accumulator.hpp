#pragma once
// Incremental FedAvg: every arriving chunk is folded as weight * chunk into a
// running sum and released; finalize() divides each chunk by the sum of the
// weights folded into it (so an update that was cut off counts exactly where
// it arrived), then applies the server optimizer, if any, per chunk. Exact up
// to float rounding regardless of chunk size or the order of streams.
//
// The sum is float32 whatever the model's dtype (F32, BF16 or F16). It is
// never zeroed: the first chunk folded at a position writes weight * x, later
// ones add (a bitmap per chunk of the plan records which). So a recycled
// buffer needs no memset and a fresh one is faulted in once, by a write. For
// F32 models the sum becomes the new model in place; for 16-bit models it is
// converted into a model-sized buffer and kept for the next round.
// Thread-safety: none; owned by the aggregator actor.

#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "fedcaf/byte_buffer.hpp"
#include "fedcaf/chunk_plan.hpp"
#include "fedcaf/error.hpp"
#include "fedcaf/manifest.hpp"
#include "fedcaf/server_optimizer.hpp"

namespace fedcaf {

class fedavg_accumulator {
public:
  /// Returns an accumulator for models laid out as `m` and cut by `plan`, or
  /// an error iff the tensors do not all have one floating dtype.
  static result<fedavg_accumulator> make(const manifest& m, chunk_plan plan);

  /// The plan that chunk sequence numbers refer to.
  const chunk_plan& plan() const { return plan_; }

  /// Adds weight * x to the sum over chunk `seq` of the plan. Returns an
  /// error, leaving the sum unchanged, iff seq is outside the plan or x is
  /// not exactly that chunk's size.
  result<void> fold(uint64_t seq, std::span<const std::byte> x, double weight) {
    return fold_scaled(seq, x, weight, weight);
  }
  /// Adds x, a relay's partial sum of updates of total weight `weight`, to
  /// chunk `seq` as it is. Fails as fold() does.
  result<void> fold_sum(uint64_t seq, std::span<const std::byte> x,
                        double weight) {
    return fold_scaled(seq, x, weight, 1.0);
  }

  /// finalize() leaves each position's weighted sum, not its mean (a
  /// relay's partial sum), and position_weights() its weight.
  void emit_sums() { sums_ = true; }
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

  /// Every averaged (and optimizer-stepped) value is clamped to +-limit
  /// before it is published (also to the element type's finite range).
  void set_value_limit(float limit) { limit_ = limit; }

private:
  result<void> fold_scaled(uint64_t seq, std::span<const std::byte> x,
                           double weight, double scale);
  bool sums_ = false;
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
  float limit_ = std::numeric_limits<float>::max();
};

} // namespace fedcaf
