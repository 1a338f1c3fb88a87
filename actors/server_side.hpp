#pragma once
// Spawns and wires the server side (aggregator, scheduler, evaluator, server)
// in one actor system: what `fedcaf simulate` and `fedcaf server` run, and
// what the integration tests drive.

#include <memory>

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

#include "actors/aggregator.hpp"
#include "actors/scheduler.hpp"
#include "actors/server.hpp"
#include "fedcaf/model_snapshot.hpp"
#include "fedcaf/report.hpp"
#include "fedcaf/trainer.hpp"

namespace fedcaf {

/// The actors of the server side.
struct server_side {
  caf::actor server;
  caf::actor scheduler;
  caf::actor aggregator;
  caf::actor evaluator;
  /// Counts refused frames of the whole server side (gateways too).
  refusal_counter refusals;

  /// Ends the helpers; call after the server has terminated.
  void shut_down(caf::actor_system& sys) const;
};

struct server_side_options {
  scheduler_options scheduler;
  server_options server;
  /// ram: a model-sized sum. window: bounded open positions, averaged in
  /// place (sync rounds of exactly scheduler.num_clients clients). disk: as
  /// window; the caller puts the initial model in a file mapping, and every
  /// actor gives its pages back after use.
  fedcaf::memory_mode memory_mode = fedcaf::memory_mode::ram;
  /// server_configs.aggregator and aggregator_kwargs.
  std::string aggregator = "FedAvgAggregator";
  rule_config rule;
  /// disk mode: where the server optimizer's state files live.
  std::string storage_dir = "/tmp";
  /// Where each global model is written (see spawn_evaluator); empty: none.
  std::string save_global_model;
  /// Test seam: a slow consumer (see aggregator_options).
  std::chrono::microseconds fold_delay{0};
  /// An upload that could send but sent nothing this long is rejected
  /// (stream_configs.idle_timeout_s + reconnect_grace_s: a client that
  /// lost its connection may still resume); zero: never.
  std::chrono::milliseconds idle_timeout{0};
};

/// Spawns the server side around the initial model. Chunk size and window
/// come from options.server. `eval` may be null (no evaluation). Returns an
/// error, with nothing left running, iff the model cannot be chunked or
/// averaged.
result<server_side> spawn_server_side(caf::actor_system& sys,
                                      model_snapshot initial,
                                      server_side_options options,
                                      std::shared_ptr<evaluator> eval,
                                      run_report* report);

} // namespace fedcaf
