#pragma once
// The aggregator: owns the FedAvg accumulator, consumes upload streams chunk
// by chunk and grants one credit per consumed chunk, and publishes each new
// global model as an immutable snapshot. Messages: see actors/messages.hpp.
//
// State machine: collecting (streams open and close) -> finalize_atom ->
// collecting the next round. A chunk is validated in full (its place in the
// stream, then its content: chunk_checker) before it touches the
// accumulator, so a refused chunk leaves it unchanged, and only a chunk that
// is folded counts towards the update's distance.
//
// Per stream (upload_ledger): open -(chunks from its own client only)->
// closed | rejected. A chunk, end or credit from another client than the
// one that opened the stream is refused (not_authorized) without touching
// it. A chunk with NaN or infinite values, or one that takes the update's
// distance from the global model past aggregator_kwargs.max_update_norm,
// rejects the whole update (poisoned_update); so does silence: nothing for
// idle_timeout (idle_timeout_s + reconnect_grace_s) while the stream could
// send (it holds a credit: for its next chunk, or all of them for its end),
// counted from its last chunk or the last credit the window returned to it.
// A stream waiting for the window (for slower clients) is never silent. So
// does slowness: fewer than min_rate_bytes_per_s over rate_window of the
// time it could send (protocol/send_rate.hpp), and the round deadline
// (expire_atom from the scheduler: upload_ledger::past_deadline). The
// stream is closed for good (later frames: unknown_stream; its end:
// poisoned_update), the scheduler is told (reject_atom with the chunks
// already folded), and the client leaves the round: with nothing folded the
// round expects one update fewer; otherwise its share cannot be taken out
// of the sum, and the round's updates are collected again from the others
// (as for a client dropped mid-upload, whatever partial_updates says: a
// rejected update never stays in the model; the honest clients' uploads
// sent again count in their bytes_resent and the server says why). Under
// the AsyncScheduler see async_scheduler.cpp.
// The bound on an update's distance is max_update_ratio x the global
// model's norm (measured once per published model) or max_update_norm,
// the lesser (chunk_checker).
//
// The distance is measured against the global model's bytes at the chunk's
// place. ram mode: the global model changes only at finalize, so they are
// the round's old model. window mode: position k is averaged into the model
// in place only once every expected client folded chunk k, so a chunk that
// arrives finds the old model at its place; except after a reset, when the
// positions below the accumulator's overwritten_below() already hold that
// first average (see chunk_checker.hpp for what a resend must match).
//
// A reset in window mode re-averages the positions below overwritten_below()
// from the chunks sent again: exact for FedAvg (with or without DP noise:
// the position is overwritten with the new average). A stateful server
// optimizer (FedAvgM, FedAdagrad, FedAdam, FedYogi) steps those positions a
// second time (from the once-stepped model, its moments advanced twice):
// ram mode has no such error.
//
// Resuming: a client that reconnects offers again; the offer of a client
// whose stream of that round exists answers with where the stream stands
// (next chunk, first credit owed), so nothing that arrived is sent twice.
// reset_atom forgets every upload of the round (a client was dropped after
// folding chunks: its share cannot be taken out of a sum), and the
// scheduler has the survivors send again.
//
// Memory modes (the accumulator the plan names, see accumulator.hpp). ram:
// a model-sized sum; a chunk's credit returns as soon as it is folded.
// window: only `window` positions are open; the credit for chunk k returns
// when position k has been settled into the global model, so no client runs
// ahead of the window. The global model is then written in place: safe
// because a position completes only after every expected client opened its
// stream, that is, after every client finished downloading this round's
// model, and the next round's downloads start only after finalize.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include <caf/fwd.hpp>

#include "actors/interfaces.hpp"
#include "fedcaf/aggregation_plan.hpp"
#include "fedcaf/checkpoint.hpp"
#include "fedcaf/compression.hpp"
#include "fedcaf/error.hpp"
#include "fedcaf/model_snapshot.hpp"
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

/// Spawns an aggregator for models laid out as `initial`, whose version it
/// continues. It reuses the memory of a global model once nobody else holds
/// it (initial included). Returns a handle that accepts open, chunk, end and
/// finalize, or an error iff the layout cannot be averaged or chunked.
result<aggregator_actor>
spawn_aggregator(caf::actor_system& sys,
                 std::shared_ptr<model_snapshot> initial,
                 aggregator_options options);

} // namespace fedcaf
