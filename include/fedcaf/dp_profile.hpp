#pragma once
// One measurement of `fedcaf dp-profile`: DP-SGD steps of a small
// transformer sequence classifier on synthetic tokens, in one training mode
// at one sequence length, without LibTorch in this header.
// Thread-safety: one measurement per process (it replaces LibTorch's CPU
// allocator with a counting one).

#include <cstdint>
#include <string>
#include <vector>

#include "fedcaf/error.hpp"

namespace fedcaf {

/// What `fedcaf dp-profile` measures (its file, read by
/// cli/dp_profile_config.hpp): DP-SGD's memory and time on a small
/// transformer sequence classifier over synthetic tokens, for every mode and
/// sequence length, each run in a process of its own.
struct dp_profile_config {
  // The model: token and position embeddings, num_layers pre-LayerNorm
  // blocks (multi-head self-attention, a GELU feed-forward of d_ff), a final
  // LayerNorm, the mean over tokens, a linear head of num_labels.
  uint32_t vocab_size = 8192;
  uint32_t d_model = 256;
  uint32_t num_heads = 4;
  uint32_t num_layers = 2;
  uint32_t d_ff = 1024;
  uint32_t num_labels = 3;
  uint32_t batch_size = 4;
  std::vector<uint32_t> seq_lengths{128, 256, 512, 1024};
  /// none | per_sample | ghost | fused; none is the baseline of overheads.
  std::vector<std::string> modes{"none", "ghost", "fused", "per_sample"};
  uint32_t warmup_iter = 1;
  uint32_t num_iter = 3;
  /// Each (mode, length) is measured this often, the modes of a length
  /// taking turns; its time is the median of the repeats' means (shared
  /// machines drift).
  uint32_t repeats = 1;
  double noise_multiplier = 1.0;
  double max_grad_norm = 1.0;
  double learning_rate = 1e-3; ///< SGD
  uint32_t num_threads = 0;    ///< LibTorch threads; 0: all cores
  uint64_t seed = 0;
  uint32_t timeout_s = 600; ///< per run; a run past it is recorded as failed
};

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
