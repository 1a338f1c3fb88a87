#pragma once
// The atoms of fedcaf's actor messages, and the frame type peer-facing
// messages carry. Which actor takes which message, with which reply, is
// declared once, as typed interfaces, in actors/interfaces.hpp (and listed
// in docs/design.md, "Actor messages", checked against them by a test); the
// client, not typed yet, takes round, done, idle, reject and secagg frames
// from its server. Peer-facing messages are an atom plus one frame
// (messages/codec.hpp), and every reply to them is one frame, possibly an
// error frame.

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/atom.hpp>

#include "fedcaf/checkpoint.hpp"
#include "fedcaf/error.hpp"
#include "fedcaf/model_snapshot.hpp"
#include "fedcaf/secagg_masking.hpp"
#include "messages/codec.hpp"

namespace fedcaf {

using hello_atom = caf::atom_constant<caf::atom("hello")>;
using round_atom = caf::atom_constant<caf::atom("round")>;
using fetch_atom = caf::atom_constant<caf::atom("fetch")>;
using offer_atom = caf::atom_constant<caf::atom("offer")>;
using chunk_atom = caf::atom_constant<caf::atom("chunk")>;
using end_atom = caf::atom_constant<caf::atom("end")>;
using done_atom = caf::atom_constant<caf::atom("done")>;
using join_atom = caf::atom_constant<caf::atom("join")>;
using start_atom = caf::atom_constant<caf::atom("start")>;
using stop_atom = caf::atom_constant<caf::atom("stop")>;
using open_atom = caf::atom_constant<caf::atom("open")>;
using update_atom = caf::atom_constant<caf::atom("update")>;
using finalize_atom = caf::atom_constant<caf::atom("finalize")>;
using publish_atom = caf::atom_constant<caf::atom("publish")>;
using eval_atom = caf::atom_constant<caf::atom("eval")>;
using tick_atom = caf::atom_constant<caf::atom("tick")>;
using credit_atom = caf::atom_constant<caf::atom("credit")>;
using drop_atom = caf::atom_constant<caf::atom("drop")>;
using resend_atom = caf::atom_constant<caf::atom("resend")>;
using reset_atom = caf::atom_constant<caf::atom("reset")>;
using expect_atom = caf::atom_constant<caf::atom("expect")>;
using task_atom = caf::atom_constant<caf::atom("task")>;
using idle_atom = caf::atom_constant<caf::atom("idle")>;
using abandon_atom = caf::atom_constant<caf::atom("abandon")>;
/// The round deadline passed: the aggregator ends the streams still owed.
using expire_atom = caf::atom_constant<caf::atom("expire")>;
using deadline_atom = caf::atom_constant<caf::atom("deadline")>;
using reject_atom = caf::atom_constant<caf::atom("reject")>;
/// Another connection of the same client took its session over: close
/// this one (not a refusal).
using replaced_atom = caf::atom_constant<caf::atom("replaced")>;
/// Write a run checkpoint (server_configs.checkpoint).
using checkpoint_atom = caf::atom_constant<caf::atom("checkpoint")>;
/// A relay: the round's model from upstream, served to its children.
using relay_atom = caf::atom_constant<caf::atom("relay")>;
using sit_out_atom = caf::atom_constant<caf::atom("sit_out")>;
using adopt_atom = caf::atom_constant<caf::atom("adopt")>;
/// A relay: its parent's model arrived: bytes (offset, size) of it, from
/// its upstream half to its server; or up to a byte, from its server to its
/// aggregator (which measures g as it comes; all of them: it is whole).
using arrived_atom = caf::atom_constant<caf::atom("arrived")>;
/// A streaming relay: more of its children's sum is settled and may go up,
/// from the aggregator to the scheduler, the server and its upstream half.
using settled_atom = caf::atom_constant<caf::atom("settled")>;
/// Window and disk modes: the model of a version holds the round's sums,
/// not the model, up to a byte (from the aggregator to the server, which
/// serves it no more there).
using overwrite_atom = caf::atom_constant<caf::atom("overwrite")>;
/// A window-mode relay: sums went up; more may settle (to its aggregator).
using sent_up_atom = caf::atom_constant<caf::atom("sent_up")>;
/// A client's trainer may go on: more of its update may go up, or its
/// paced download may fetch further (a relay's upstream client).
using ready_atom = caf::atom_constant<caf::atom("ready")>;
using evaluated_atom = caf::atom_constant<caf::atom("evaluated")>;
/// A window-mode relay's upstream client: fetch model bytes (offset, size)
/// of the round's model again from the parent.
using refetch_atom = caf::atom_constant<caf::atom("refetch")>;
/// A window-mode relay: a position of its children's plan fetched again is
/// resident, for its server and its aggregator.
using resident_atom = caf::atom_constant<caf::atom("resident")>;
/// A window-mode relay's server: time to see whether a child that paces
/// its download has gone silent (fetch_pacing).
using pace_atom = caf::atom_constant<caf::atom("pace")>;
using secagg_atom = caf::atom_constant<caf::atom("secagg")>;
/// A client leaves the run, and says why (a Goodbye frame).
using goodbye_atom = caf::atom_constant<caf::atom("goodbye")>;

using msg::frame;

} // namespace fedcaf

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(fedcaf::error)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(fedcaf::checkpoint_state)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(fedcaf::snapshot_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(fedcaf::secagg::unmask_plan)
