#pragma once
// The server: the front door. Registers clients, announces rounds, serves the
// global model to every client from one read-only snapshot, routes offers to
// the scheduler and chunks to the aggregator, reports each round, and ends the
// run. Messages: see actors/messages.hpp.

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

#include "actors/interfaces.hpp"
#include "actors/server_options.hpp"
#include "fedcaf/model_snapshot.hpp"
#include "fedcaf/report.hpp"

namespace fedcaf {

/// Spawns the server with the initial global model. `report` is written by
/// the server only and must be read only after the server has terminated.
server_actor spawn_server(caf::actor_system& sys, snapshot_ptr initial,
                          server_peers peers, server_options options,
                          run_report* report);

} // namespace fedcaf
