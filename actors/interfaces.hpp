#pragma once
// The typed interfaces of the server side's actors: every message one of
// them may receive, with its reply, so that the compiler refuses a send the
// receiver does not declare. Each role an actor plays for another is an
// interface of its own (the server is a round_host to the scheduler and an
// aggregator_host to the aggregator); an actor's handle extends the roles it
// plays. The messages that carry several values are named structs.
//
//   evaluator_actor    the server asks it to evaluate and save a model
//   upload_listener    the aggregator tells it how an upload it opened ended
//   scheduler_actor    a scheduler (sync or async): connect, join, drop,
//                      offer, and upload_listener
//   aggregator_actor   uploads, rounds, finalize, a relay's parent's model
//   relay_courier_actor  a relay's upstream half to its children's side
//   round_host         what a scheduler asks of the server
//   aggregator_host    what the aggregator asks or tells the server
//   server_gate        what a gateway asks of the server: the peer frames
//   server_link        what a client asks of its server (or its gateway)
//   client_inbox       what the server tells a client (or its gateway)
//   client_actor       a client: client_inbox, its timers and wake-ups
//   server_actor       all of the server: both of those, round_host,
//                      aggregator_host, a relay's upstream half's
//                      messages, its own timers
//
// Late bindings are one typed step: the server, when it starts, sends
// (connect_atom, round_host) to its scheduler and (connect_atom,
// aggregator_host) to its aggregator, before any client can reach it.
// These messages never leave the process (gateways carry frames only), so
// their structs are allowed as unsafe (unserialized) message types.

#include <cstdint>
#include <string>
#include <vector>

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "actors/messages.hpp"
#include "fedcaf/error.hpp"
#include "fedcaf/model_snapshot.hpp"
#include "fedcaf/secagg_masking.hpp"
#include "protocol/relay_model.hpp"

namespace fedcaf {

/// An evaluator's answer: the model's loss and accuracy iff evaluated, and
/// why saving it failed (empty: saved, or nothing to save).
struct evaluation_result {
  bool evaluated = false;
  double loss = 0;
  double accuracy = 0;
  std::string save_failure;
};

/// A scheduler opens a client's upload at the aggregator with these.
struct upload_request {
  std::string client_id;
  uint32_t round = 0;
  double weight = 1;        ///< the client's share of the average, unnormalized
  uint64_t digest = 0;      ///< of the update, from the offer
  uint64_t bytes = 0;       ///< the update's bytes on the wire
  uint64_t chunks = 0;      ///< the update's chunks
  double declared_norm = 0; ///< norm_bound: the norm the client declared
  /// A relay's partial sum: the chunks carry sum w_i x_i, `weight` is
  /// sum w_i; folded as they are.
  bool summed = false;
  uint64_t update_id = 0; ///< from the offer: a repeat resumes
  bool grid = false;      ///< summed, as int32 on the exact grid
};

/// A scheduler hands a finished round (or async step) to the server.
struct round_result {
  uint32_t round = 0;
  snapshot_ptr model;                    ///< the new global model
  uint32_t clients = 0;                  ///< updates averaged into it
  double loss = 0;                       ///< the clients' mean training loss
  double dp_sgd_epsilon = 0;             ///< largest of the clients' (0: none)
  std::vector<std::string> missing;      ///< known clients not in it
  std::vector<std::string> contributors; ///< clients in it
  std::vector<uint32_t> staleness;       ///< per contributor (async)
  double weight = 0;                     ///< the weights in it, summed
  /// The relays in it (server_configs.relays) and their sums' weights.
  std::vector<std::pair<std::string, double>> relay_weights;
};

using connect_atom = caf::atom_constant<caf::atom("connect")>;
/// The aggregator asks the server to run SecAgg+'s unmask phase.
using unmask_atom = caf::atom_constant<caf::atom("unmask")>;
/// The aggregator tells the server whether a round's unmasked sum was in
/// range (SecAgg+'s trace of an upload out of range).
using unmasked_atom = caf::atom_constant<caf::atom("unmasked")>;
/// A SecAgg+ phase's deadline passed (the server's own timer).
using phase_end_atom = caf::atom_constant<caf::atom("phase_end")>;

using evaluator_actor = caf::typed_actor<
    caf::replies_to<eval_atom, snapshot_ptr>::with<evaluation_result>>;

/// Hears how each upload stream ends; a streaming relay's (see
/// aggregation_plan::streams_sums) also hears, as each position settles,
/// (settled_atom, round, bytes of the sum settled from the start, the
/// weight of position 0).
using upload_listener = caf::typed_actor<
    caf::reacts_to<update_atom, std::string, uint32_t>,
    caf::reacts_to<reject_atom, std::string, uint32_t, uint64_t, error>,
    caf::reacts_to<settled_atom, uint32_t, uint64_t, double>>;

using round_host = caf::typed_actor<
    caf::reacts_to<start_atom, uint32_t, std::vector<std::string>>,
    caf::reacts_to<resend_atom, uint32_t, std::vector<std::string>>,
    caf::reacts_to<task_atom, std::string, uint32_t>,
    caf::reacts_to<stop_atom, std::string>,
    caf::reacts_to<reject_atom, std::string, error>,
    caf::replies_to<publish_atom, round_result>::with<bool>,
    caf::replies_to<sit_out_atom, uint32_t>::with<uint32_t>,
    caf::reacts_to<settled_atom, uint32_t, relay_step>>;

/// What the aggregator asks or tells the server: SecAgg+'s unmask plan,
/// and (window and disk modes, sync rounds) that the model of version v
/// holds the round's sums, not the model, up to byte b, which it is then
/// no longer to serve: (overwrite_atom, v, b), sent before the credits of
/// the positions settled go out.
using aggregator_host = caf::typed_actor<
    caf::replies_to<unmask_atom, uint32_t,
                    std::vector<std::string>>::with<secagg::unmask_plan>,
    caf::reacts_to<unmasked_atom, uint32_t, bool>,
    caf::reacts_to<overwrite_atom, uint64_t, uint64_t>>;

/// A scheduler's own timer: (deadline_atom, 0) the registration deadline,
/// (deadline_atom, r) round r's deadline (the SyncScheduler's). A relay's
/// server: (sit_out_atom, r), round r's parent's model never comes whole.
using scheduler_actor =
    upload_listener::extend<caf::reacts_to<connect_atom, round_host>,
                            caf::reacts_to<join_atom, std::string, std::string>,
                            caf::reacts_to<drop_atom, std::string>,
                            caf::replies_to<offer_atom, frame>::with<frame>,
                            caf::reacts_to<deadline_atom, uint32_t>,
                            caf::reacts_to<sit_out_atom, uint32_t>>;

using sync_scheduler_actor = scheduler_actor;

using aggregator_actor = caf::typed_actor<
    caf::reacts_to<connect_atom, aggregator_host>,
    caf::replies_to<open_atom, upload_listener, upload_request>::with<frame>,
    caf::replies_to<chunk_atom, std::string, frame>::with<frame>,
    caf::replies_to<end_atom, std::string, frame>::with<frame>,
    caf::replies_to<credit_atom, std::string, frame>::with<frame>,
    caf::reacts_to<tick_atom>, caf::reacts_to<reset_atom, uint32_t>,
    caf::replies_to<abandon_atom, std::string, uint32_t>::with<uint64_t>,
    caf::reacts_to<expect_atom, uint32_t>,
    caf::replies_to<expire_atom, uint32_t, std::vector<std::string>,
                    error>::with<std::vector<std::string>>,
    caf::replies_to<finalize_atom, uint32_t, double>::with<snapshot_ptr>,
    caf::replies_to<checkpoint_atom, checkpoint_state>::with<std::string>,
    caf::replies_to<adopt_atom, relay_model>::with<snapshot_ptr>,
    caf::reacts_to<arrived_atom, uint64_t>,
    caf::reacts_to<resident_atom, uint64_t>, caf::reacts_to<sent_up_atom>>;

/// A relay's courier: carries its upstream half's messages to its
/// children's side in the order they are made (each parent's model with
/// its number, the bytes of it that arrived) and the side's steps of a
/// streaming round's sum back (see actors/relay_courier.hpp).
using relay_courier_actor =
    caf::typed_actor<caf::reacts_to<relay_atom, relay_model, uint64_t>,
                     caf::reacts_to<eval_atom, relay_model, uint64_t>,
                     caf::reacts_to<arrived_atom, uint64_t, uint64_t>,
                     caf::reacts_to<settled_atom, relay_step>>;

/// The peer frame kinds a client sends after its Hello, each answered
/// with one frame.
using peer_frames =
    caf::typed_actor<caf::replies_to<fetch_atom, frame>::with<frame>,
                     caf::replies_to<offer_atom, frame>::with<frame>,
                     caf::replies_to<chunk_atom, frame>::with<frame>,
                     caf::replies_to<end_atom, frame>::with<frame>,
                     caf::replies_to<credit_atom, frame>::with<frame>,
                     caf::replies_to<evaluated_atom, frame>::with<frame>,
                     caf::replies_to<secagg_atom, frame>::with<frame>,
                     caf::reacts_to<goodbye_atom, frame>>;

/// What a gateway may ask of the server: the nine peer frame kinds. Hello
/// carries the peer's address and the common name of its verified client
/// certificate ("" without TLS).
using server_gate = peer_frames::extend<
    caf::replies_to<hello_atom, frame, std::string, std::string>::with<frame>>;

/// What a client asks of its server: the server itself in one process, or
/// the gateway that carries its frames to a remote one (gateway.hpp).
using server_link =
    peer_frames::extend<caf::replies_to<hello_atom, frame>::with<frame>>;

/// What the server tells a client (an in-process client actor, or the
/// server-side gateway of a remote one), none with a reply: a round or task
/// starts, the run ended, the round was published, its update was refused
/// (an error frame), the SecAgg+ shares to reveal, its session taken over by
/// another connection (the error frame its peer is told before the close).
using client_inbox = caf::typed_actor<
    caf::reacts_to<round_atom, frame>, caf::reacts_to<done_atom, frame>,
    caf::reacts_to<idle_atom, uint32_t>, caf::reacts_to<reject_atom, frame>,
    caf::reacts_to<secagg_atom, frame>, caf::reacts_to<replaced_atom, frame>>;

/// A client actor: what its server tells it, the evaluation its embedding
/// program (the Python module) hands it to send, and its timers (the idle
/// tick, a reconnection attempt of one generation).
using client_actor =
    client_inbox::extend<caf::reacts_to<evaluated_atom, frame>,
                         caf::reacts_to<tick_atom>, caf::reacts_to<ready_atom>,
                         caf::reacts_to<caf::connect_atom, uint64_t>,
                         caf::reacts_to<refetch_atom, uint64_t, uint64_t>,
                         caf::reacts_to<goodbye_atom, frame>>;

/// The whole server: the peer frames from a gateway or an in-process
/// client, what its scheduler and aggregator ask of it, and its timers (a
/// client's round announcement, a lost client's grace, a SecAgg+ phase's
/// deadline, an overdue evaluation, its linger before quitting).
using server_actor =
    server_gate::extend_with<round_host, aggregator_host>::extend<
        caf::replies_to<hello_atom, frame>::with<frame>,
        caf::reacts_to<round_atom, std::string>,
        caf::reacts_to<drop_atom, std::string, uint64_t>,
        caf::reacts_to<phase_end_atom, uint32_t, uint32_t>,
        caf::reacts_to<evaluated_atom>, caf::reacts_to<tick_atom>,
        caf::replies_to<relay_atom, relay_model>::with<relay_result>,
        caf::replies_to<eval_atom, relay_model>::with<relay_result>,
        caf::reacts_to<arrived_atom, uint64_t, uint64_t>,
        caf::reacts_to<resident_atom, uint64_t>, caf::reacts_to<pace_atom>>;

} // namespace fedcaf

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(fedcaf::evaluation_result)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(fedcaf::upload_request)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(fedcaf::round_result)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(fedcaf::relay_result)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(fedcaf::relay_model)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(fedcaf::relay_step)
