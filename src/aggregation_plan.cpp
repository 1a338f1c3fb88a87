#include "fedcaf/aggregation_plan.hpp"

#include <algorithm>
#include <array>
#include <thread>
#include <utility>

namespace fedcaf {

namespace {

position_rule robust_rule(server_rule rule, double trim_ratio) {
  position_rule r;
  if (rule == server_rule::median)
    r.rule = position_rule::median;
  else if (rule == server_rule::trimmed_mean) {
    r.rule = position_rule::trimmed_mean;
    r.trim_ratio = trim_ratio;
  }
  return r;
}

/// The updates an open position waits for: every client in window and disk
/// modes (sync rounds of exactly num_clients), the round's sample under a
/// robust rule in ram mode (it keeps every value to order them), none for a
/// model-sized sum.
uint32_t contributors_per_position(const aggregation_plan& p,
                                   const server_config& s) {
  if (p.in_place)
    return s.num_clients;
  if (p.robust.robust())
    return s.clients_per_round ? s.clients_per_round : s.num_clients;
  return 0;
}

error refuse(std::string why) {
  return error{errc::bad_config, std::move(why)};
}

} // namespace

std::optional<server_rule> parse_server_rule(std::string_view aggregator) {
  for (const auto& r : rule_names)
    if (aggregator == r.name)
      return r.value;
  return std::nullopt;
}

server_rule rule_of(std::string_view aggregator) {
  return parse_server_rule(aggregator).value_or(server_rule::fedavg);
}

const char* aggregator_name(server_rule rule) {
  for (const auto& r : rule_names)
    if (r.value == rule)
      return r.name;
  return "FedAvgAggregator";
}

result<aggregation_plan> plan_aggregation(const server_config& s) {
  aggregation_plan p;
  p.rule = s.aggregator;
  p.memory_mode = s.memory_mode;
  p.fold_threads =
      s.fold_threads > 0
          ? s.fold_threads
          : std::max(1u,
                     std::min(16u, std::thread::hardware_concurrency() / 4));
  p.in_place = s.memory_mode != memory_mode::ram;
  if (s.memory_mode == memory_mode::disk)
    p.storage_dir = s.storage_dir;
  if (s.memory_mode == memory_mode::window)
    p.relay_cache_chunks = s.comm.stream.window;
  p.robust = robust_rule(p.rule, s.rule.trim_ratio);
  p.position_contributors = contributors_per_position(p, s);
  p.accumulator = p.position_contributors ? accumulator_kind::open_positions
                                          : accumulator_kind::model_sum;
  p.max_contributors = std::max<uint32_t>(s.num_clients, 1);
  p.async = is_async(p.rule);
  p.server_optimizer = (p.rule != server_rule::fedavg && !is_robust(p.rule)) ||
                       s.rule.dp_noise_multiplier > 0;
  p.secure = s.secure_aggregation.enabled;
  p.weights = s.rule.client_weights_mode;
  p.on_deadline = s.on_deadline;
  p.partial = s.rule.partial_updates;
  p.secagg_keys_deadline = millis_of(s.round_deadline_s);
  p.scheduler_deadline =
      p.secure ? std::chrono::milliseconds{0} : p.secagg_keys_deadline;
  if (s.num_clients == 0)
    return refuse("server_configs.num_clients: at least 1 client is needed");
  if (p.async && p.in_place)
    return refuse("AsyncScheduler runs in ram mode only (window and disk "
                  "modes average sync rounds in place)");
  if (p.robust.robust() && p.secure)
    return refuse("robust rules need plain (unmasked) updates");
  if (p.secure && p.in_place && p.rule != server_rule::fedavg)
    return refuse("secure aggregation in window and disk modes averages "
                  "with FedAvg only");
  return p;
}

std::string global_model_file(const aggregation_plan& plan, int pid) {
  if (plan.storage_dir.empty())
    return {};
  return plan.storage_dir + "/fedcaf-global-" + std::to_string(pid) + ".bin";
}

} // namespace fedcaf
