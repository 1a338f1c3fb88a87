#pragma once
// Incremental FedAvg: every arriving chunk is folded as weight * chunk into a
// running sum and released; finalize() divides by the weight sum. Exact up to
// float rounding regardless of chunk size or the order of streams.
//
// The sum is float32 whatever the model's dtype (F32, BF16 or F16). It is
// never zeroed: the first chunk folded at a position writes weight * x, later
// ones add (a bitmap per chunk of the plan records which). So a recycled
// buffer needs no memset and a fresh one is faulted in once, by a write. For
// F32 models the sum becomes the new model in place; for 16-bit models it is
// converted into a model-sized buffer and kept for the next round.
// Thread-safety: none; owned by the aggregator actor.

#include <cstdint>
#include <span>
#include <vector>

#include "fedcaf/byte_buffer.hpp"
#include "fedcaf/chunk_plan.hpp"
#include "fedcaf/error.hpp"
#include "fedcaf/manifest.hpp"

namespace fedcaf {

class fedavg_accumulator {
public:
  /// Returns an accumulator for models laid out as `m` and cut by `plan`, or
  /// an error iff the tensors do not all have one floating dtype.
  static result<fedavg_accumulator> make(const manifest& m, chunk_plan plan);

  /// The plan that chunk sequence numbers refer to.
  const chunk_plan& plan() const { return plan_; }

  /// Counts one contribution of weight `w` into the divisor.
  void add_weight(double w) { weight_sum_ += w; }

  /// Adds weight * x to the sum over chunk `seq` of the plan. Returns an
  /// error, leaving the sum unchanged, iff seq is outside the plan or x is
  /// not exactly that chunk's size.
  result<void> fold(uint64_t seq, std::span<const std::byte> x, double weight);

  double weight_sum() const { return weight_sum_; }

  /// Hands in a model-sized buffer nobody reads any more (an old global
  /// model): it holds the next F32 sum, or the next 16-bit result. Ignored if
  /// not needed or of another size.
  void recycle(byte_buffer&& buffer);

  /// Forgets every contribution of the round (their weights too): the next
  /// chunk folded at each position writes, as in a fresh accumulator.
  void discard() {
    weight_sum_ = 0;
    written_.clear();
  }

  /// Divides the sum by the weight sum in place and hands its storage out as
  /// the new model bytes; the accumulator starts over. Chunks nobody folded
  /// are 0. Returns an error iff no weight was added.
  result<byte_buffer> finalize();

private:
  fedavg_accumulator(uint64_t total_bytes, dtype type, chunk_plan plan)
      : total_bytes_(total_bytes), type_(type), plan_(std::move(plan)) {}

  uint64_t sum_bytes() const {
    return total_bytes_ / dtype_bytes(type_) * sizeof(float);
  }

  uint64_t total_bytes_ = 0;
  dtype type_;
  chunk_plan plan_;
  double weight_sum_ = 0;
  byte_buffer sum_;           ///< float32 sums
  byte_buffer spare_;         ///< 16-bit models: where the next result goes
  std::vector<bool> written_; ///< per chunk: holds a sum already
};

} // namespace fedcaf
