#include "actors/server_side.hpp"

#include <caf/all.hpp>

#include "actors/evaluator.hpp"
#include "actors/messages.hpp"

namespace fedcaf {

void server_side::shut_down(caf::actor_system& sys) const {
  caf::scoped_actor self{sys};
  for (const auto& a : {scheduler, aggregator, evaluator})
    if (a)
      self->send_exit(a, caf::exit_reason::user_shutdown);
}

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
  auto snapshot = std::make_shared<model_snapshot>(std::move(initial));
  aggregator_options ao;
  ao.chunk_bytes = options.server.chunk_bytes;
  ao.window = options.server.window;
  ao.rule = rule_of(options.aggregator);
  ao.rule_cfg = options.rule;
  ao.in_place = options.memory_mode != memory_mode::ram;
  if (is_robust(ao.rule)) {
    ao.robust.rule = ao.rule == server_rule::median
                         ? position_rule::median
                         : position_rule::trimmed_mean;
    ao.robust.trim_ratio = options.rule.trim_ratio;
  }
  // Robust rules hold every chosen client's chunks at an open position.
  const auto& sched = options.scheduler;
  ao.window_contributors =
      ao.in_place          ? sched.num_clients
      : ao.robust.robust() ? (sched.clients_per_round ? sched.clients_per_round
                                                      : sched.num_clients)
                           : 0;
  ao.max_contributors = std::max<uint32_t>(options.scheduler.num_clients, 1);
  if (options.memory_mode == memory_mode::disk)
    ao.state_dir = options.storage_dir;
  ao.fold_delay = options.fold_delay;
  ao.compression = options.server.compression;
  ao.refusals = refusals;
  ao.poisoned = make_refusal_counter();
  ao.idle_timeout = options.idle_timeout;
  options.server.poisoned = ao.poisoned;
  const auto& secure = options.server.secure_aggregation;
  ao.secure_aggregation = secure.enabled;
  ao.secagg_clipping_range = secure.clipping_range;
  ao.secagg_quantization_bits = secure.quantization_bits;
  auto aggregator = spawn_aggregator(sys, snapshot, ao);
  if (!aggregator)
    return aggregator.err();
  side.aggregator = *aggregator;
  side.evaluator = spawn_evaluator(sys, std::move(eval),
                                   std::move(options.save_global_model));
  if (is_async(ao.rule)) {
    options.scheduler.rule = ao.rule;
    options.scheduler.rule_cfg = options.rule;
    options.server.async = true;
    side.scheduler =
        spawn_async_scheduler(sys, side.aggregator, options.scheduler);
  } else {
    options.scheduler.rule_cfg = options.rule; // max_sample_size
    side.scheduler = spawn_scheduler(sys, side.aggregator, options.scheduler);
  }
  side.server = spawn_server(sys, std::move(snapshot),
                             {side.scheduler, side.aggregator, side.evaluator},
                             std::move(options.server), report);
  if (ao.secure_aggregation) // where it asks for the unmask plan
    caf::anon_send(side.aggregator, secagg_atom::value, side.server);
  return side;
}

} // namespace fedcaf
