#pragma once
// What an aggregator is made with: its options (the plan's part of them
// and the configuration's; see actors/server_side.cpp). Value types only.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "fedcaf/aggregation_plan.hpp"
#include "fedcaf/checkpoint.hpp"
#include "fedcaf/compression.hpp"
#include "fedcaf/server_optimizer.hpp"
#include "fedcaf/window_accumulator.hpp"
#include "protocol/refusal_log.hpp"

namespace fedcaf {

struct aggregator_options {
  uint64_t chunk_bytes = 1 << 20; ///< chunk size of upload streams
  uint32_t window = 4;            ///< credits granted per stream
  /// The accumulator (a model-sized sum, or `window` open positions of
  /// plan.position_contributors updates), in whose memory, the rule and its
  /// server optimizer, secure or not: see aggregation_plan.hpp. Open
  /// positions under a robust rule keep every contribution and reduce the
  /// position coordinate-wise (see window_accumulator.hpp).
  aggregation_plan plan;
  /// aggregator_kwargs.
  rule_config rule_cfg;
  /// Relays' int32 sums on the exact grid are folded (the Welcome's
  /// gridSums said so); off: an offer of them is refused.
  bool grid_sums = false;
  /// ... and a chunk of them flagged floatSums is folded as float32 sums
  /// (the Welcome's chunkFloatSums said so).
  bool chunk_float_sums = false;
  /// Test seam: time spent on every chunk before it is consumed (a slow
  /// aggregator). Zero in production.
  std::chrono::microseconds fold_delay{0};
  /// Counts refused frames; shared with the server for its report.
  refusal_counter refusals;
  /// Counts updates refused for their content (NaN, infinity, too far from
  /// the global model); shared with the server for its report.
  refusal_counter poisoned;
  /// An open upload that could send but sent no chunk this long is
  /// rejected (stream_configs.idle_timeout_s); zero: never.
  std::chrono::milliseconds idle_timeout{0};
  /// An open upload that moved fewer bytes per second than this over the
  /// last rate_window of the time it could send (credits the window held
  /// back left out) is rejected (stream_configs.min_rate_bytes_per_s and
  /// rate_window_s); zero: never.
  double min_rate_bytes_per_s = 0;
  std::chrono::milliseconds rate_window{0};
  /// plan.secure (SecAgg+): updates arrive masked and quantized (one
  /// uint32 per float32 element), are summed in Z_2^32, and are unmasked at
  /// finalize with the plan the server returns for (unmask_atom, round,
  /// in-sum ids); the server's handle comes in (connect_atom, server).
  /// Compressed uploads (compression.up): each chunk is a delta from the
  /// round's model, encoded; it is decoded and added to that model's values
  /// before anything else looks at it.
  compression_config compression;
  double secagg_clipping_range = 8.0;
  uint32_t secagg_quantization_bits = 22;
  /// server_configs.checkpoint: where (checkpoint_atom) writes.
  checkpoint_config checkpoint;
  /// A run resumed from this checkpoint: the server optimizer's moments
  /// and steps come from it (the initial model already did).
  std::shared_ptr<const stored_checkpoint> resume;
};

} // namespace fedcaf
