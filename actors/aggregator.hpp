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
// the position is overwritten with the new average); where a relay's int32
// sums on the grid (relative to the round's g) are in the round, the
// positions get g back first (accumulator::keep_originals,
// restore_originals). A stateful server optimizer (FedAvgM, FedAdagrad,
// FedAdam, FedYogi) steps those positions a second time (from the
// once-stepped model, or g where it came back; its moments advanced
// twice): ram mode has no such error.
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

#include <memory>

#include <caf/fwd.hpp>

#include "actors/aggregator_options.hpp"
#include "actors/interfaces.hpp"
#include "fedcaf/error.hpp"
#include "fedcaf/model_snapshot.hpp"

namespace fedcaf {

/// Spawns an aggregator for models laid out as `initial`, whose version it
/// continues. It reuses the memory of a global model once nobody else holds
/// it (initial included). Returns a handle that accepts open, chunk, end and
/// finalize, or an error iff the layout cannot be averaged or chunked.
result<aggregator_actor>
spawn_aggregator(caf::actor_system& sys,
                 std::shared_ptr<model_snapshot> initial,
                 aggregator_options options);

} // namespace fedcaf
