// Reads server_configs.aggregator_kwargs: each rule's defaults, and the
// keys that do not apply to the rule named.

#include "read_sections.hpp"

namespace fedcaf::config_reader {

namespace {

/// eta when aggregator_kwargs names none: the step that reaches 0.85 or more
/// in the default 3-round run (configs/simulate.yaml), on the grid of the
/// papers (see rule_config::server_learning_rate).
double default_server_learning_rate(server_rule rule) {
  if (rule == server_rule::fedadam || rule == server_rule::fedyogi)
    return 0.1;
  return 1.0; // FedAdagrad, FedAvgM, FedBuff (FedAvg, FedAsync: no eta)
}

} // namespace

void read(section s, rule_config& r, server_rule rule) {
  const std::string aggregator = aggregator_name(rule);
  s.one_of("client_weights_mode", r.client_weights_mode);
  r.server_learning_rate = default_server_learning_rate(rule);
  s.positive("server_learning_rate", r.server_learning_rate);
  s.positive("server_adapt_param", r.server_adapt_param);
  s.get("server_momentum_param_1", r.server_momentum_param_1);
  s.get("server_momentum_param_2", r.server_momentum_param_2);
  for (auto [key, value] :
       {std::pair{"server_momentum_param_1", r.server_momentum_param_1},
        std::pair{"server_momentum_param_2", r.server_momentum_param_2}})
    if (!(value >= 0 && value < 1))
      s.fail(key, "must be in [0, 1)");
  s.get("alpha", r.alpha);
  if (!(r.alpha > 0 && r.alpha <= 1))
    s.fail("alpha", "must be in (0, 1]");
  s.one_of("staleness_fn", r.staleness_fn);
  auto kw = s.child("staleness_fn_kwargs");
  kw.get("a", r.staleness_a);
  kw.get("b", r.staleness_b);
  if (r.staleness_fn != staleness_kind::constant && !(r.staleness_a > 0))
    kw.fail("a", "must be greater than 0");
  if (r.staleness_fn == staleness_kind::hinge && !(r.staleness_b >= 0))
    kw.fail("b", "must be 0 or more");
  s.get("K", r.buffer_k, 1, max_clients);
  bool async = is_async(rule);
  if (async)
    r.partial_updates = partial_updates::keep;
  // Unset, the server decides it (resolve_partial_updates).
  std::optional<partial_updates> given;
  s.one_of("partial_updates", given);
  r.partial_updates_given = given.has_value();
  r.partial_updates = given.value_or(r.partial_updates);
  if (async && r.partial_updates == partial_updates::discard)
    s.fail("partial_updates",
           aggregator + " keeps what a cut-off update delivered: its chunks "
                        "share a sum with updates whose clients have moved on");
  s.get("max_update_norm", r.max_update_norm);
  s.get("norm_bound", r.norm_bound);
  if (!(r.norm_bound >= 0))
    s.fail("norm_bound", "must be 0 (off) or positive");
  if (r.norm_bound > 0 && (is_robust(rule) || is_async(rule)))
    s.fail("norm_bound", "bounds the updates of the sync averaging rules: " +
                             aggregator + " is not one");
  if (!(r.max_update_norm >= 0))
    s.fail("max_update_norm", "must be 0 (off) or positive");
  s.get("max_update_ratio", r.max_update_ratio);
  if (!(r.max_update_ratio >= 0))
    s.fail("max_update_ratio", "must be 0 (off) or positive");
  s.get("update_norm_floor", r.update_norm_floor);
  if (!(r.update_norm_floor > 0))
    s.fail("update_norm_floor", "must be positive");
  s.get("max_norm_growth", r.max_norm_growth);
  if (!(r.max_norm_growth == 0 || r.max_norm_growth >= 1))
    s.fail("max_norm_growth",
           "must be 0 (off) or at least 1 (the factor by which the norm the "
           "update bound is taken of may grow per round)");
  s.get("max_sample_size", r.max_sample_size);
  if (r.max_sample_size == 0)
    s.fail("max_sample_size", "must be positive (a claimed sample count is "
                              "always capped)");
  if (is_robust(rule) && r.client_weights_mode != client_weighting::equal)
    s.fail("client_weights_mode",
           aggregator + " orders each coordinate's values: it does not "
                        "weight them (use equal)");
  if (s.has("trim_ratio") && rule != server_rule::trimmed_mean)
    s.fail("trim_ratio", "applies to TrimmedMeanAggregator only");
  s.get("trim_ratio", r.trim_ratio);
  if (!(r.trim_ratio >= 0 && r.trim_ratio < 0.5))
    s.fail("trim_ratio", "must be in [0, 0.5)");
  auto rules = s.child("tensor_rules");
  for (const auto& pattern : rules.keys("<pattern>")) {
    auto rule = tensor_rule::average;
    rules.one_of(pattern.c_str(), rule);
    r.tensor_rules.emplace_back(pattern, rule);
  }
  s.ignore({"optimize_memory", "gradient_based"});
  if (s.has("dp_fedavg")) {
    auto dp = s.child("dp_fedavg");
    dp.positive("clip_norm", r.dp_clip_norm);
    dp.get("noise_multiplier", r.dp_noise_multiplier);
    if (!(r.dp_noise_multiplier >= 0))
      dp.fail("noise_multiplier", "must be 0 or more");
    dp.get("delta", r.dp_delta);
    if (!(r.dp_delta > 0 && r.dp_delta < 1))
      dp.fail("delta", "must be in (0, 1)");
    dp.get("seed", r.dp_seed);
    if (rule != server_rule::fedavg)
      dp.fail("", "DP-FedAvg needs FedAvgAggregator");
    if (r.client_weights_mode != client_weighting::equal)
      dp.fail("", "DP-FedAvg needs client_weights_mode: equal");
  }
}

} // namespace fedcaf::config_reader
