#pragma once
// The network side of a process: its actor system, the gateways' limits and
// TLS from comm_configs, and a client of a remote server run to its end (as
// `fedcaf client` and the Python client run it).

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>

#include <caf/actor.hpp>
#include <caf/actor_system_config.hpp>

#include "actors/client.hpp"
#include "actors/gateway.hpp"
#include "fedcaf/config.hpp"
#include "fedcaf/report.hpp"
#include "fedcaf/tls.hpp"

namespace fedcaf {

/// Returns an actor system config with `threads` workers; `network` loads
/// the multiplexer the gateways run on (no BASP port is opened).
caf::actor_system_config make_system_config(size_t threads, bool network);

/// The gateways' limits from comm_configs.
gateway_limits limits_of(const comm_config& comm);

/// The TLS context of one end, or null without use_ssl. Returns an error
/// iff a certificate or key cannot be read.
result<std::shared_ptr<tls_context>> tls_of(const comm_config& comm,
                                            bool server);

/// Called once the client runs, with its actor system and handle; until
/// run_remote_client returns, another thread may stop the client with
/// caf::anon_send_exit.
using client_started =
    std::function<void(caf::actor_system&, const client_actor&)>;

/// Runs client `cc.client_id` of the server at cc.comm.server_uri (TLS,
/// token, resume after a lost connection, as configured) with trainers from
/// `factory`, until the run ends or the client is stopped. Blocks. Fills
/// `report`; its `failure` says why iff the run failed for this client
/// (the server unreachable, a refusal, a trainer error). Setting `*stop`
/// ends the attempts to connect (a running client is stopped through the
/// handle `started` gave). `progress`, if given, counts the transfers.
/// `leaving`, if given, is noted by the program when it leaves: the
/// client's goodbye says why, even where its trainer stopped first.
/// `done`, if given, is set as soon as the server's Done arrives (the
/// run's end): passed as the trainers' stop flag, it stops a local epoch
/// at its next step, and the client ends as the run does.
void run_remote_client(const client_config& cc, trainer_factory factory,
                       run_report& report, const client_started& started = {},
                       const std::atomic<bool>* stop = nullptr,
                       std::shared_ptr<transfer_progress> progress = nullptr,
                       std::shared_ptr<const departure> leaving = {},
                       std::shared_ptr<std::atomic<bool>> done = nullptr);

} // namespace fedcaf
