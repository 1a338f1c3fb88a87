#pragma once
// The aggregator: owns the FedAvg accumulator, consumes upload streams chunk
// by chunk and grants one credit per consumed chunk, and publishes each new
// global model as an immutable snapshot. Messages: see actors/messages.hpp.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

#include "actors/refusal_log.hpp"
#include "fedcaf/error.hpp"
#include "fedcaf/model_snapshot.hpp"
#include "fedcaf/server_optimizer.hpp"
#include "fedcaf/window_accumulator.hpp"

namespace fedcaf {

struct aggregator_options {
  uint64_t chunk_bytes = 1 << 20; ///< chunk size of upload streams
  uint32_t window = 4;            ///< credits granted per stream
  /// 0: ram mode (a model-sized sum). N > 0: sync rounds of at most N
  /// clients with `window` open positions: window and disk modes (in_place:
  /// averaged into the model's own memory), or a robust rule in ram mode
  /// (into the next model's).
  uint32_t window_contributors = 0;
  bool in_place = false;
  /// TrimmedMeanAggregator, MedianAggregator: every contribution at an open
  /// position is kept and the position reduced coordinate-wise (see
  /// window_accumulator.hpp). REQUIRES window_contributors > 0.
  position_rule robust;
  /// The most updates folded into one chunk position in a round (the
  /// server's num_clients): bounds every element an update may carry, so
  /// that the weighted sum stays finite (see aggregator.cpp).
  uint32_t max_contributors = 1;
  /// The server optimizer applied per chunk at finalization (FedAvg: none)
  /// and its aggregator_kwargs.
  server_rule rule = server_rule::fedavg;
  rule_config rule_cfg;
  /// Non-empty: the optimizer's state lives in files there (disk mode).
  std::string state_dir;
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
  /// SecAgg+: updates arrive masked and quantized (one uint32 per float32
  /// element), are summed in Z_2^32, and are unmasked at finalize with the
  /// plan the server returns for (secagg_atom, round, in-sum ids); the
  /// server's handle comes in (secagg_atom, server). ram mode only.
  bool secure_aggregation = false;
  /// Compressed uploads (compression.up): each chunk is a delta from the
  /// round's model, encoded; it is decoded and added to that model's values
  /// before anything else looks at it.
  compression_config compression;
  double secagg_clipping_range = 8.0;
  uint32_t secagg_quantization_bits = 22;
};

/// Spawns an aggregator for models laid out as `initial`, whose version it
/// continues. It reuses the memory of a global model once nobody else holds
/// it (initial included). Returns a handle that accepts open, chunk, end and
/// finalize, or an error iff the layout cannot be averaged or chunked.
result<caf::actor> spawn_aggregator(caf::actor_system& sys,
                                    std::shared_ptr<model_snapshot> initial,
                                    aggregator_options options);

} // namespace fedcaf
