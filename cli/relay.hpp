#pragma once
// `fedcaf relay -c relay.yaml`: an aggregator between a parent (the root
// server, or another relay) and its children (clients, or relays). Upstream
// it is one client (client_id, comm_configs: TLS, token, resume); its
// "training" is a round of its own children: the parent's model of the
// round is their global model, and what goes back upstream is their
// updates' weighted sum with its weight (Offer.partialSum). Downstream it is
// a server (server_configs: address, num_clients, memory_mode, deadlines,
// tokens) whose rounds wait for the parent's. See docs/design.md, "Trees of
// aggregators".

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "actors/client.hpp"
#include "fedcaf/config.hpp"
#include "fedcaf/model_snapshot.hpp"

namespace fedcaf::cli {

/// The rounds a relay's children's side is made for: as many as its parent
/// runs; it ends when the parent's run does.
inline constexpr uint32_t relay_rounds = 1u << 30;

/// What the children's side starts from: the parent's model of the first
/// round, and what the parent's Welcome told (forwarded to the children).
struct relay_upstream {
  model_snapshot initial;
  msg::client_terms terms;
  std::string client_configs_yaml;
};

/// The two halves of a relay's file: `client` (role python_client: its
/// client_id and comm_configs, for the parent) and `server` (role server:
/// its server_configs, for the children; client_configs come from the
/// parent). Returns an error naming the file and key iff either half is
/// refused, or the server half asks for what a relay cannot do (a rule
/// other than FedAvg, secure aggregation outside memory_mode ram, DP,
/// checkpoints, num_global_epochs).
struct relay_files {
  config client;
  config server;
  /// server_configs.simulated_clients: how many of num_clients run in the
  /// relay's own process, as `fedcaf simulate` runs clients (ids
  /// <client_id>-Client<i>, data partition i-1 of the file's data_configs);
  /// the others connect over the network. 0: none.
  uint32_t simulated_clients = 0;
};
result<relay_files> load_relay_file(const std::string& path,
                                    const std::vector<std::string>& overrides);

/// The children's side, once spawned: its server and the chunk size its
/// uploads are cut by (the positions a partial sum's weights refer to).
struct relay_side {
  server_actor server;
  manifest layout; ///< of the model it serves
  caf::actor_system* system = nullptr;
  uint64_t chunk_bytes = 0;
  /// memory_mode window: the download cache's chunks (the side's window),
  /// and the model's memory is held chunk by chunk (relay_residency); 0:
  /// other modes.
  uint32_t cache = 0;
};

/// Spawns the children's side from the parent's first model (called once).
using relay_spawner = std::function<result<relay_side>(relay_upstream)>;

/// Trainers for the relay's upstream client: each round hands the parent's
/// model to the children's side (spawning it the first time) and waits for
/// their partial sum. `storage_dir` (disk mode; "" otherwise): the parent's
/// model and the sums live in unlinked files there, their pages given back
/// chunk by chunk, so the relay's resident memory does not grow with the
/// model.
trainer_factory relay_trainers(relay_spawner spawn, std::string storage_dir);

} // namespace fedcaf::cli
