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
#include "fedcaf/aggregation_plan.hpp"
#include "fedcaf/model_snapshot.hpp"
#include "fedcaf/report.hpp"
#include "fedcaf/trainer.hpp"

namespace fedcaf {

/// The actors of the server side.
struct server_side {
  server_actor server;
  scheduler_actor scheduler;
  aggregator_actor aggregator;
  evaluator_actor evaluator;
  /// Counts refused frames of the whole server side (gateways too).
  refusal_counter refusals;

  /// Ends the helpers; call after the server has terminated.
  void shut_down(caf::actor_system& sys) const;
};

struct server_side_options {
  scheduler_options scheduler;
  server_options server;
  /// What plan_aggregation decided (accumulator, memory, rule, secure
  /// aggregation, deadlines); the scheduler's, the server's and the
  /// aggregator's options take their part of it here, and nowhere else. In
  /// disk mode the caller puts the initial model in a file mapping
  /// (global_model_file), and every actor gives its pages back after use.
  aggregation_plan plan;
  /// aggregator_kwargs.
  rule_config rule;
  /// Where each global model is written (see spawn_evaluator); empty: none.
  std::string save_global_model;
  /// A resumed run: the checkpoint its initial model came from (the
  /// server optimizer's state comes from it too).
  std::shared_ptr<const stored_checkpoint> resume;
  /// Test seam: a slow consumer (see aggregator_options).
  std::chrono::microseconds fold_delay{0};
  /// An upload that could send but sent nothing this long is rejected
  /// (stream_configs.idle_timeout_s + reconnect_grace_s: a client that
  /// lost its connection may still resume); zero: never.
  std::chrono::milliseconds idle_timeout{0};
  /// The slowest an upload may be (see aggregator_options); zero: any.
  double min_rate_bytes_per_s = 0;
  std::chrono::milliseconds rate_window{0};
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
