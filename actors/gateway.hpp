#pragma once
// The trust boundary. Remote peers speak only fedcaf's frames
// (docs/protocol.md) over TCP or TLS; each connection is owned by one
// gateway, a caf::io broker, on each side. No actor handle crosses the
// network and nothing of CAF's cluster protocol (BASP) listens on a port.
//
// Server side (actors/server_gateway.cpp): the acceptor hands every
// accepted connection to a new gateway, which authenticates the peer (TLS
// handshake, then Hello) before anything else, enforces the limits of
// gateway_limits (protocol/gateway_limits.hpp; what may pass, and when, is
// decided by protocol/connection_admission.hpp), and passes only the eight
// peer frame kinds (hello, fetch, offer, chunk, end, credit, evaluation,
// and secagg for the secure aggregation phases) to the server, as a local
// stand-in for that client: it holds the server only as a server_gate,
// whose type admits nothing else.
//
// Client side (actors/client_gateway.cpp): a gateway connects, and stands
// in for the server towards the client actor: the client's requests become
// frames with request ids, the replies with the same id answer them, and
// frames the server sends unasked (round start, round over, done) reach the
// client as messages.
//
// On both sides the connection's bytes (framing, TLS, output accounting)
// are a wire_link's (actors/wire_link.hpp), internal to the gateways.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include <caf/actor.hpp>
#include <caf/fwd.hpp>
#include <caf/typed_actor.hpp>

#include "actors/interfaces.hpp"
#include "actors/messages.hpp"
#include "fedcaf/error.hpp"
#include "protocol/gateway_limits.hpp"
#include "protocol/network.hpp"
#include "protocol/refusal_log.hpp"

namespace fedcaf {

class tls_context;

/// A listening acceptor and the port it is bound to.
struct listening {
  caf::actor acceptor;
  uint16_t port = 0;
};

/// Listens at `at` and gives every connection a gateway to `server`. `tls`
/// null: plain TCP. Refusals are counted in `refusals` and logged with the
/// peer's address. Returns an error iff the address cannot be bound.
/// Sending the acceptor an exit closes the port; its gateways end with the
/// server.
result<listening> listen(caf::actor_system& sys, server_gate server,
                         const endpoint& at, gateway_limits limits,
                         std::shared_ptr<tls_context> tls,
                         refusal_counter refusals);

/// Set by a client's gateway when the server's Done arrives, on the
/// multiplexer's thread, before the client actor reads it: a trainer whose
/// stop flag it is stops at its next step (see client_options::done_heard).
using done_flag = std::shared_ptr<std::atomic<bool>>;

/// Connects to the server at `at` (within `timeout`) and returns a gateway
/// that stands in for the server: send it what you would send the server.
/// It ends when the connection ends. `tls` null: plain TCP. `done`, if
/// set, is set when the server's Done arrives.
result<server_link> dial(caf::actor_system& sys, const endpoint& at,
                         const gateway_limits& limits,
                         std::shared_ptr<tls_context> tls,
                         std::chrono::milliseconds timeout,
                         done_flag done = nullptr);

/// An actor on a thread of its own that answers (connect_atom) with a newly
/// dialed gateway (server_link) to `at`, or an error: for clients that
/// reconnect without blocking their own thread.
caf::actor spawn_dialer(caf::actor_system& sys, endpoint at,
                        gateway_limits limits, std::shared_ptr<tls_context> tls,
                        done_flag done = nullptr);

} // namespace fedcaf
