#pragma once
// `fedcaf relay -c relay.yaml`: an aggregator between a parent (the root
// server, or another relay) and its children (clients, or relays). Upstream
// it is one client (client_id, comm_configs: TLS, token, resume); its
// "training" is a round of its own children: the parent's model of the
// round is their global model, and what goes back upstream is their
// updates' weighted sum with its weight (Offer.partialSum). Downstream it is
// a server (server_configs: address, num_clients, memory_mode, deadlines,
// tokens) whose rounds wait for the parent's. Its two halves are
// actors/relay_upstream (the upstream client's trainer) and a server side
// in relay mode (protocol/relay_flow); this reads its file. See
// docs/design.md, "Trees of aggregators".

#include <cstdint>
#include <string>
#include <vector>

#include "actors/relay_upstream.hpp"
#include "fedcaf/config.hpp"

namespace fedcaf::cli {

/// The rounds a relay's children's side is made for: as many as its parent
/// runs; it ends when the parent's run does.
inline constexpr uint32_t relay_rounds = 1u << 30;

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

} // namespace fedcaf::cli
