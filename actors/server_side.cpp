#include "actors/server_side.hpp"

#include <caf/all.hpp>

#include "actors/evaluator.hpp"
#include "actors/messages.hpp"

namespace fedcaf {

void server_side::shut_down(caf::actor_system& sys) const {
  caf::scoped_actor self{sys};
  auto end = [&self](const auto& a) {
    if (a)
      self->send_exit(a, caf::exit_reason::user_shutdown);
  };
  end(scheduler);
  end(aggregator);
  end(evaluator);
}

namespace {

/// The scheduler's and the server's part of the plan.
void take_plan(server_side_options& o, const aggregation_plan& plan) {
  auto& sched = o.scheduler;
  sched.rule = plan.rule;
  sched.rule_cfg = o.rule;
  sched.weights = plan.weights;
  sched.round_deadline = plan.scheduler_deadline;
  if (o.server.relay) { // counted from the parent's model, by the server
    sched.deadline_from_server = true;
    sched.relay = true;
    o.server.deadline_from_open = plan.scheduler_deadline;
    o.server.num_rounds = 0; // it runs its parent's: the report counts none
  }
  sched.wait_after_deadline = plan.on_deadline == deadline_action::wait;
  sched.keep_partial = plan.partial == partial_updates::keep;
  sched.keep_rejected = !plan.secure;
  sched.stream_sums = plan.streams_sums();
  auto& server = o.server;
  server.async = plan.async;
  server.robust = plan.robust.robust();
  server.secure_aggregation.enabled = plan.secure;
  server.secagg_by_samples = plan.weights == client_weighting::sample_size;
  server.secagg_keys_timeout = plan.secagg_keys_deadline;
}

} // namespace

result<server_side> spawn_server_side(caf::actor_system& sys,
                                      model_snapshot initial,
                                      server_side_options options,
                                      std::shared_ptr<evaluator> eval,
                                      run_report* report) {
  server_side side;
  auto refusals = make_refusal_counter();
  side.refusals = refusals;
  options.scheduler.refusals = refusals;
  options.server.refusals = refusals;
  if (options.server.live) // counted as they happen
    options.server.live->count_refusals(refusals);
  auto snapshot = std::make_shared<model_snapshot>(std::move(initial));
  const auto& plan = options.plan;
  aggregator_options ao;
  ao.chunk_bytes = options.server.chunk_bytes;
  ao.window = options.server.window;
  ao.plan = plan;
  ao.rule_cfg = options.rule;
  ao.fold_delay = options.fold_delay;
  ao.compression = options.server.compression;
  ao.grid_sums = options.server.terms.grid_sums;
  ao.chunk_float_sums = options.server.terms.chunk_float_sums;
  ao.refusals = refusals;
  ao.poisoned = make_refusal_counter();
  ao.idle_timeout = options.idle_timeout;
  ao.min_rate_bytes_per_s = options.min_rate_bytes_per_s;
  ao.rate_window = options.rate_window;
  options.server.poisoned = ao.poisoned;
  const auto& secure = options.server.secure_aggregation;
  ao.secagg_clipping_range = secure.clipping_range;
  ao.secagg_quantization_bits = secure.quantization_bits;
  ao.checkpoint = options.server.checkpoint;
  ao.resume = options.resume;
  take_plan(options, plan);
  auto aggregator = spawn_aggregator(sys, snapshot, ao);
  if (!aggregator)
    return aggregator.err();
  side.aggregator = *aggregator;
  side.evaluator = spawn_evaluator(sys, std::move(eval),
                                   std::move(options.save_global_model));
  side.scheduler =
      plan.async
          ? spawn_async_scheduler(sys, side.aggregator, options.scheduler)
          : spawn_scheduler(sys, side.aggregator, options.scheduler);
  side.server = spawn_server(sys, std::move(snapshot),
                             {side.scheduler, side.aggregator, side.evaluator},
                             std::move(options.server), report);
  return side;
}

} // namespace fedcaf
