#pragma once
// `simulate` of a tree (server_configs.simulated_relays R): the root sees
// R clients, Relay1..R, all in every round; relay r runs its block of
// consecutive clients (Client<i>, partition i-1, as in a flat run), and
// samples its share of clients_per_round. Each relay is what `fedcaf
// relay` runs, in this process: its upstream client on a thread of its
// own (its training waits for its children's round), its children's side
// spawned by the first round, its clients beside it.
// Thread-safety: spawn_side runs on the relays' threads, under `spawning_`;
// the rest on the thread that runs the simulation.

#include "crowd.hpp"
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "actors/client.hpp"
#include "actors/server_side.hpp"
#include "fedcaf/config.hpp"
#include "fedcaf/report.hpp"
#include "local_clients.hpp"
#include "options.hpp"
#include "relay.hpp"

namespace fedcaf::cli {

class simulated_tree {
public:
  /// A tree of `cfg` (server_configs.simulated_relays > 0); its clients'
  /// reports are added to `client_reports` (outliving the tree) as it
  /// ends, in the clients' order (a population's: those that failed).
  simulated_tree(const config& cfg, const options& opts,
                 std::shared_ptr<lazy_data> sets, stop_flag stop,
                 uint32_t threads_per_client,
                 std::vector<run_report>& client_reports);

  /// The root's config: R clients, the relays, each weighing its block.
  static config root_config(const config& cfg);

  /// Spawns the relays' upstream clients, registering with `root`.
  void spawn(caf::actor_system& sys, const server_actor& root);

  /// Once the root's run is over: ends every relay's children's side and
  /// waits for all of its actors. Returns the first failure, or "". The
  /// reports of a population's clients that failed go to client_reports.
  std::string finish(caf::actor_system& sys, const std::string& reason);

  /// What its populations' clients add to the run's report: the most
  /// chunks in flight on a stream, the clients summoned and alive at once.
  const run_report& drawn_figures() const { return drawn_figures_; }

private:
  struct relay {
    client_actor upstream;
    run_report upstream_report, side_report;
    std::optional<server_side> side;
    std::vector<client_actor> children;
    std::vector<run_report> child_reports; ///< one per child
    /// Its children as a population (drawn_as_population), else null.
    std::unique_ptr<crowd> drawn;
  };

  /// Relay r's config: FedAvg of its block, sums only, its share of the
  /// round's clients.
  config relay_config(uint32_t r) const;

  /// Relay r's children's side and its clients, from the parent's first
  /// model `up`.
  result<relay_side> spawn_side(caf::actor_system& sys, uint32_t r,
                                relay_upstream up);

  const config& cfg_;
  options opts_;
  std::shared_ptr<lazy_data> sets_;
  stop_flag stop_;
  uint32_t threads_;
  std::vector<run_report>* client_reports_;
  std::mutex spawning_; ///< spawn_side runs on the relays' threads
  bool closing_ = false;
  std::vector<relay> relays_;
  run_report drawn_figures_; ///< the populations' clients' figures
};

} // namespace fedcaf::cli
