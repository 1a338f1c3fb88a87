#pragma once
// Incremental FedAvg: every arriving chunk is folded as weight * chunk into a
// running sum and released; finalize() divides by the weight sum. Exact up to
// float rounding regardless of chunk size or arrival order of streams.
// Thread-safety: none; owned by the aggregator actor.

#include <cstdint>
#include <span>

#include "fedcaf/byte_buffer.hpp"
#include "fedcaf/error.hpp"
#include "fedcaf/manifest.hpp"

namespace fedcaf {

class fedavg_accumulator {
public:
  /// Returns an accumulator for models laid out as `m`, or an error iff a
  /// tensor is not float32 (the only dtype averaged in this version).
  static result<fedavg_accumulator> make(const manifest& m);

  /// Counts one contribution of weight `w` into the divisor.
  void add_weight(double w) { weight_sum_ += w; }

  /// Adds weight * x to the sum over model bytes [model_offset, +x.size()).
  /// Returns an error, leaving the sum unchanged, iff the range is outside
  /// the model or not aligned to whole float32 elements.
  result<void> fold(uint64_t model_offset, std::span<const std::byte> x,
                    double weight);

  double weight_sum() const { return weight_sum_; }

  /// Divides the sum by the weight sum in place and hands its storage out as
  /// the new model bytes; the accumulator starts over at zero (lazily).
  /// Returns an error iff no weight was added.
  result<byte_buffer> finalize();

private:
  explicit fedavg_accumulator(uint64_t total_bytes)
    : total_bytes_(total_bytes) {
  }

  uint64_t total_bytes_ = 0;
  double weight_sum_ = 0;
  byte_buffer sum_; ///< float32 sums; allocated at the first fold
};

} // namespace fedcaf
