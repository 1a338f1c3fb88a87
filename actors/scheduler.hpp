#pragma once
// The scheduler decides rounds. SyncScheduler: round r starts when all
// expected clients are registered (r = 1) or round r-1 is published; it
// finalizes when the update of every client that can still deliver has
// closed, if at least min_clients did (clients are dropped after losing
// their connection for good, sit the round out when they have not delivered
// their update by the deadline, or leave it when the aggregator rejects
// their update). A registration deadline starts the run with fewer.
// Messages: see actors/messages.hpp.

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <caf/fwd.hpp>

#include "actors/interfaces.hpp"
#include "fedcaf/aggregation_plan.hpp"
#include "fedcaf/config.hpp"
#include "fedcaf/server_optimizer.hpp"
#include "protocol/population.hpp"
#include "protocol/refusal_log.hpp"

namespace fedcaf {

struct scheduler_options {
  uint32_t num_clients = 2;
  uint32_t num_rounds = 3;
  /// The first round run (a run resumed after round k: k + 1).
  uint32_t first_round = 1;
  /// Set by spawn_server_side from the aggregation plan, as are
  /// round_deadline, wait_after_deadline, keep_partial and rule.
  client_weighting weights = client_weighting::equal;
  /// The fewest updates a round may finalize with (0: num_clients).
  uint32_t min_clients = 0;
  /// How long a round may take: clients whose update has not arrived whole
  /// this long after the round started (not offered, or still uploading:
  /// the aggregator ends their streams) sit it out; zero: no deadline.
  std::chrono::milliseconds round_deadline{0};
  /// A relay's: its server arms the round deadline (deadline_atom) once the
  /// parent's model is in and the round opens, not the scheduler as it
  /// chooses the round's clients (the parent may take long to send it).
  bool deadline_from_server = false;
  /// A relay's: a round that cannot have min_clients is sat out (its
  /// group offers its parent nothing that round: sit_out_atom to the
  /// server, once the updates under way have closed) and the next one
  /// follows, instead of the run ending.
  bool relay = false;
  /// When the deadline passes with fewer than min_clients updates
  /// delivered: false, the round fails naming the missing clients; true, it
  /// waits until min_clients have delivered, then goes on without the rest.
  bool wait_after_deadline = false;
  /// How long to wait, from the scheduler's start, for num_clients to
  /// register: then the run starts with the registered ones if they are at
  /// least min_clients, else fails naming those of expected_clients that
  /// never came. Zero: no deadline.
  std::chrono::milliseconds registration_deadline{0};
  /// The client ids the server knows of before they come (its tokens);
  /// empty where any id may register.
  std::vector<std::string> expected_clients;
  /// Clients sampled per round (0: every registered client), drawn with
  /// sampling_seed.
  uint32_t clients_per_round = 0;
  uint64_t sampling_seed = 42;
  /// A simulation's population (see protocol/population.hpp; null: none):
  /// round 1 starts as the server connects, each round drawn from its ids.
  std::shared_ptr<const population> members;
  /// A client dropped mid-upload: keep what it delivered (true) or collect
  /// the round's updates again without it (false).
  bool keep_partial = false;
  /// A rejected update's chunks folded before its refusal stay in the sum
  /// (the aggregator cuts it there) and nobody uploads again: true except
  /// under secure aggregation (a masked prefix cannot stay).
  bool keep_rejected = true;
  /// A streaming relay (aggregation_plan::streams_sums): its sum goes up
  /// as its positions settle, so it never collects its children's updates
  /// again. A child that leaves mid-upload, dropped or refused, stays in
  /// the positions it delivered (keep, whatever partial_updates says) and
  /// counts towards min_clients; the round streams once position 0 holds
  /// min_clients updates, and is then never sat out.
  bool stream_sums = false;
  /// AsyncScheduler: FedAsync (one update per step, weighted alpha s(u)) or
  /// FedBuff (K updates per step, each weighted s(u)); see
  /// server_optimizer.hpp.
  server_rule rule = server_rule::fedavg;
  /// aggregator_kwargs: the AsyncScheduler's rule; max_sample_size (sync,
  /// sample_size weights: a claimed sample count is capped at it).
  rule_config rule_cfg;
  /// server_configs.relays: client id -> the most clients under it. Only
  /// these offer partial sums (and must), weighing at most that many
  /// clients (sample_size: that many times max_sample_size).
  std::map<std::string, uint64_t> relays;
  /// Counts refused offers; shared with the server for its report.
  refusal_counter refusals;
};

/// Spawns an AsyncScheduler (see actors/async_scheduler.cpp) that opens
/// streams on `aggregator`; num_rounds counts server steps.
scheduler_actor spawn_async_scheduler(caf::actor_system& sys,
                                      aggregator_actor aggregator,
                                      scheduler_options options);

/// Spawns a sync scheduler that opens streams on `aggregator`. The server
/// connects to it (connect_atom) before any client joins.
scheduler_actor spawn_scheduler(caf::actor_system& sys,
                                aggregator_actor aggregator,
                                scheduler_options options);

} // namespace fedcaf
