#pragma once
// The messages between fedcaf's actors. Peer-facing messages are an atom
// plus one frame (messages/codec.hpp), and every reply to them is one
// frame, possibly an error frame. Messages inside the server process may
// carry a snapshot_ptr, which never crosses a process boundary.
//
//   client -> server     (hello_atom, frame) -> welcome
//   server -> client     (round_atom, frame)    round start, no reply
//   client -> server     (fetch_atom, frame) -> chunk of the global model
//   client -> server     (offer_atom, frame) -> accept (via the scheduler,
//                                               then the aggregator)
//   client -> server     (chunk_atom, frame) -> credit (via the aggregator)
//   client -> server     (end_atom, frame)   -> stream closed (via the
//                                               aggregator)
//   client -> server     (credit_atom, frame) -> credit: after a resumed
//                                               upload, one per credit owed
//                                               (via the aggregator)
//   client -> server     (evaluated_atom, frame) -> the evaluation, echoed:
//                                               the client's figures for a
//                                               published model
//   local -> client      (evaluated_atom, frame): an evaluation made outside
//                        the trainer (the Python client), for the client to
//                        send as its evaluation of the model it holds
//   client -> server     (secagg_atom, frame) -> SecAgg+: keys -> roster
//                                               (when every chosen client
//                                               advertised), shares -> the
//                                               shares relayed to it (when
//                                               the share phase ended),
//                                               unmask -> unmask echoed
//   server -> client     (secagg_atom, frame)   SecAgg+: the shares to
//                                               reveal (unmask), no reply
//   aggr. -> server      (secagg_atom, round, in-sum ids) -> unmask_plan:
//                        run the unmask phase for the round's ring sum
//   server -> client     (done_atom, frame)     the run ended, no reply
//   server -> client     (idle_atom, round)     round published, no reply
//
//   server -> scheduler  (join_atom, id), (leave_atom, id, reason)
//   server -> scheduler  (drop_atom, id): a lost client did not come back
//   scheduler -> server  (start_atom, round, ids): open the round for them;
//                        (stop_atom, reason)
//   scheduler -> server  (resend_atom, round, ids): collect their updates
//                        again
//   server -> aggr.      (chunk_atom | end_atom | credit_atom, client id,
//                        frame): the client's frame, delegated with the
//                        registered id of its sender; a stream takes them
//                        only from the client that opened it
//   scheduler -> aggr.   (reset_atom, contributors): forget the round's
//                        uploads; (expect_atom, contributors): fewer clients
//                        will contribute to the open round;
//                        (abandon_atom, id, round) -> chunks: close a
//                        dropped client's stream, keeping what it delivered
//                        (partial_updates: keep) or learning whether it
//                        delivered anything (discard); await no more of it
//   scheduler -> aggr.   (open_atom, notify, id, round, weight, digest,
//                         bytes, chunks, declared update norm) -> accept
//   aggr. -> scheduler   (update_atom, id, round)
//   aggr. -> scheduler   (reject_atom, id, round, chunks folded, errc, why): the
//                        client's update was refused for its content (NaN,
//                        too far from the global model, changed when sent
//                        again) or its silence; it leaves the round
//   AsyncScheduler -> aggr. (reset_atom, 1): forget the step's sum (its only
//                        update was rejected)
//   scheduler -> server  (reject_atom, id, errc, why); server -> client
//                        (reject_atom, error frame): told so
//   aggr. -> aggr.       (tick_atom): look for silent uploads
//   scheduler -> aggr.   (finalize_atom, round) -> snapshot_ptr
//   scheduler -> server  (task_atom, id, round): AsyncScheduler, the client's
//                        next task on the current model
//   scheduler -> server  (publish_atom, round, snapshot_ptr, clients, loss,
//                         DP-SGD epsilon (largest of the clients, 0: none),
//                         missing ids, contributor ids, their staleness)
//                        -> go on (false: the server stopped the run)
//   server -> evaluator  (eval_atom, snapshot_ptr)
//                        -> (evaluated, loss, accuracy, failure)

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/atom.hpp>

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
using leave_atom = caf::atom_constant<caf::atom("leave")>;
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
using deadline_atom = caf::atom_constant<caf::atom("deadline")>;
using reject_atom = caf::atom_constant<caf::atom("reject")>;
using evaluated_atom = caf::atom_constant<caf::atom("evaluated")>;
using secagg_atom = caf::atom_constant<caf::atom("secagg")>;

using msg::frame;

} // namespace fedcaf

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(fedcaf::snapshot_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(fedcaf::secagg::unmask_plan)
