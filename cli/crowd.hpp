#pragma once
// A simulation's clients drawn from a population (protocol/population.hpp):
// `fedcaf simulate` with clients_per_round below num_clients, flat or under
// a simulated relay. A member is spawned when its server summons it (the
// round that drew it opens) and ends when the server sends it away (a
// round opens without it) or the run ends; between, it is an id. What the
// ended clients' reports say is summed here, so that the simulation's
// memory follows the clients drawn per round, not the population.
// Thread-safety: summon() runs on the server's actor thread, a client's
// end on its own; both under `mtx_`. The rest on the simulation's thread.

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <caf/fwd.hpp>

#include "actors/client.hpp"
#include "fedcaf/report.hpp"
#include "protocol/population.hpp"
#include "server_wiring.hpp"

namespace fedcaf::cli {

/// Whether `cfg`'s simulated clients (flat, a relay's block, or `fedcaf
/// relay`'s when all its children are simulated) come as a population: a SyncScheduler that samples clients_per_round of
/// num_clients, without secure aggregation (its keys are agreed by the
/// round's clients before it opens) and without federated evaluation (it
/// asks every client).
bool drawn_as_population(const config& cfg);

class crowd {
public:
  /// How a member is made: its client options (its id set by the crowd,
  /// and hold_model false) and its trainer, from its partition (its index
  /// in the whole run).
  using maker =
      std::function<std::pair<client_options, trainer_factory>(uint32_t)>;

  /// The population <prefix><first + 1> .. <prefix><first + count>, each
  /// member made by `make` from its partition.
  crowd(caf::actor_system& sys, uint32_t first, uint32_t count, maker make,
        std::string prefix = "Client");
  crowd(const crowd&) = delete;
  crowd& operator=(const crowd&) = delete;

  /// The population and its summoning, for spawn_from_config. REQUIRES:
  /// this crowd outlives the server side it is given to.
  summoning hook();

  /// Blocks until every member summoned has ended.
  void await_all();

  /// Adds what the ended members' reports say to `into` (the run's): the
  /// largest peak of chunks in flight, the first failure, the members
  /// summoned and the most alive at once (added to its figures); and
  /// appends the reports of those that failed to `clients`.
  void report_into(run_report& into, std::vector<run_report>& clients);

private:
  void summon(const server_actor& server, uint32_t index);
  void ended(const run_report& r);

  caf::actor_system& sys_;
  std::shared_ptr<const population> members_;
  maker make_;
  mutable std::mutex mtx_;
  std::condition_variable none_alive_;
  uint64_t alive_ = 0;
  uint64_t summoned_ = 0;
  uint64_t peak_alive_ = 0;
  uint32_t peak_in_flight_ = 0;
  std::vector<run_report> failed_;
};

} // namespace fedcaf::cli
