#pragma once
// The client: registers with the server, and each round receives the global
// model straight into its parameters, trains, and streams its update under
// the credit window. Messages: see actors/messages.hpp.

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

#include "actors/interfaces.hpp"
#include "fedcaf/config.hpp"
#include "fedcaf/progress.hpp"
#include "fedcaf/report.hpp"
#include "fedcaf/shard.hpp"
#include "fedcaf/trainer.hpp"
#include "messages/codec.hpp"
#include "protocol/departure.hpp"

namespace fedcaf {

/// Builds the client's trainer once the server's Welcome (with the
/// client_configs) has arrived.
using trainer_factory = std::function<result<std::unique_ptr<trainer>>(
    const client_configs&, const msg::welcome&)>;

struct client_options {
  client_options(std::string id = "Client1",
                 std::chrono::milliseconds idle = std::chrono::seconds{60})
      : client_id(std::move(id)), idle_timeout(idle) {}

  std::string client_id;
  /// A transfer fails only when no chunk or credit has moved this long.
  std::chrono::milliseconds idle_timeout;
  /// How long to keep trying to get back to a lost server.
  std::chrono::milliseconds reconnect_for{30000};
  /// false: build the trainer (and its model) when chosen for a round and
  /// give it up once that round is published, so that a client waiting to be
  /// sampled holds no model (simulations of many clients).
  bool hold_model = true;
  /// Sent in Hello when the server asks for tokens.
  std::string token;
  /// Remote runs: after losing the server, ask `connector` (a dialer, see
  /// gateway.hpp) for a new gateway to host:port and resume. Null: a lost
  /// server ends the client.
  caf::actor connector;
  std::string host;
  uint16_t port = 0;
  /// Counts this client's transfer bytes for the console; null: not kept.
  std::shared_ptr<transfer_progress> progress;
  /// Runs on a thread of its own (a relay's upstream client, whose
  /// training waits for its children's round), not the scheduler's.
  bool own_thread = false;
  /// Its per-round lines at debug level: an inner node of a simulated
  /// tree (a relay's upstream client), whose root speaks for the run.
  bool quiet = false;
  /// Set by the gateway when the server's Done arrives (remote clients; may
  /// be null): a trainer stopped by it (cancelled) is no failure, and the
  /// Done that follows ends the client as the run's end does.
  std::shared_ptr<const std::atomic<bool>> done_heard;
  /// Which rank of a sharded client this is (ranks 1: the whole model).
  shard_spec shard;
  /// A remote client's own train_configs.storage_dir: where its model
  /// lives if the server asks for storage: disk. Unset (in-process
  /// clients): the server's client_configs say, as the operator's own.
  std::optional<std::string> storage_dir;
  /// Noted by the program when it leaves (a signal, an exception in its
  /// own code): the client ends with that goodbye, even where its trainer
  /// stopped first (on the same stop).
  std::shared_ptr<const departure> leaving;
};

/// Spawns a client of `server`. `report` is written by the client only and
/// must be read only after the client has terminated; on failure its
/// `failure` names the reason.
client_actor spawn_client(caf::actor_system& sys, server_link server,
                          client_options options, trainer_factory factory,
                          run_report* report);

} // namespace fedcaf
