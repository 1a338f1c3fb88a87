#pragma once
// One measurement of `fedcaf dp-profile`: DP-SGD steps of a small
// transformer sequence classifier on synthetic tokens, in one training mode
// at one sequence length, without LibTorch in this header.
// Thread-safety: one measurement per process (it replaces LibTorch's CPU
// allocator with a counting one).

#include <cstdint>
#include <string>

#include "fedcaf/config.hpp"
#include "fedcaf/error.hpp"

namespace fedcaf {

struct dp_profile_result {
  std::string mode; ///< none | per_sample | ghost | fused
  uint32_t seq_length = 0;
  uint32_t batch_size = 0;
  /// The most bytes LibTorch's tensors held at once during the measured
  /// iterations (parameters, gradients, activations, DP buffers), as
  /// max_memory_allocated counts on a GPU.
  double peak_memory_mb = 0;
  double avg_time_ms = 0; ///< mean wall time of a measured iteration
  double min_time_ms = 0;
  uint64_t parameters = 0; ///< trainable parameters of the model
  double final_loss = 0;   ///< mean loss of the last iteration
};

/// Builds the model of `cfg`, runs warmup_iter then num_iter training steps
/// in `mode` at `seq_length` (noise noise_multiplier * max_grad_norm, SGD)
/// and returns what they cost. Returns an error iff `mode` is unknown or
/// LibTorch fails (e.g. out of memory).
result<dp_profile_result> profile_dp_step(const dp_profile_config& cfg,
                                          const std::string& mode,
                                          uint32_t seq_length);

} // namespace fedcaf
