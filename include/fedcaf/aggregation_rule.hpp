#pragma once
// The aggregation rules (server_configs.aggregator) as one enum, and the
// questions the rest of the code asks of a rule. Pure values: no state.

#include <optional>
#include <string_view>

namespace fedcaf {

enum class server_rule {
  fedavg,
  fedavgm,
  fedadagrad,
  fedadam,
  fedyogi,
  fedasync,
  fedbuff,
  trimmed_mean, ///< coordinate-wise, not an optimizer (window_accumulator)
  median
};

/// A rule and the name server_configs.aggregator gives it.
struct rule_name {
  server_rule value;
  const char* name;
};

/// Every rule with its name, in the order config errors list them.
inline constexpr rule_name rule_names[] = {
    {server_rule::fedavg, "FedAvgAggregator"},
    {server_rule::fedavgm, "FedAvgMAggregator"},
    {server_rule::fedadam, "FedAdamAggregator"},
    {server_rule::fedyogi, "FedYogiAggregator"},
    {server_rule::fedadagrad, "FedAdagradAggregator"},
    {server_rule::fedasync, "FedAsyncAggregator"},
    {server_rule::fedbuff, "FedBuffAggregator"},
    {server_rule::trimmed_mean, "TrimmedMeanAggregator"},
    {server_rule::median, "MedianAggregator"},
};

/// Returns the rule that server_configs.aggregator names ("FedAvgAggregator",
/// ..., "MedianAggregator"), or nullopt for a name that is none of them.
std::optional<server_rule> parse_server_rule(std::string_view aggregator);

/// Returns the rule that server_configs.aggregator names; FedAvg for a name
/// that is no rule (load_config refuses those first).
server_rule rule_of(std::string_view aggregator);

/// The name server_configs.aggregator gives `rule` ("FedAvgAggregator", ...).
const char* aggregator_name(server_rule rule);

/// Returns true iff `rule` runs under the AsyncScheduler.
inline bool is_async(server_rule rule) {
  return rule == server_rule::fedasync || rule == server_rule::fedbuff;
}

/// Returns true iff `rule` reduces each coordinate robustly (sync rounds,
/// no server optimizer).
inline bool is_robust(server_rule rule) {
  return rule == server_rule::trimmed_mean || rule == server_rule::median;
}

} // namespace fedcaf
