#include "relay.hpp"

#include <string_view>

#include <yaml-cpp/yaml.h>

#include "fedcaf/config/section.hpp"
#include "fedcaf/config/yaml_safety.hpp"

namespace fedcaf::cli {

namespace {

/// Emits `node` under the single key `key`, as a file of its own.
std::string yaml_under(const char* key, const YAML::Node& node) {
  YAML::Node root;
  root[key] = node;
  YAML::Emitter out;
  out << root;
  return out.c_str();
}

/// What a relay's children's side cannot do, or "" where it can.
std::string relay_refusal(bool epochs, const server_config& sc) {
  if (epochs)
    return "num_global_epochs: a relay runs its parent's rounds";
  if (sc.aggregator != server_rule::fedavg)
    return "aggregator: a relay sums its children's updates, and the "
           "parent's rule (" +
           std::string{aggregator_name(sc.aggregator)} +
           " here) runs once, at the root: use FedAvgAggregator (the default)";
  if (sc.rule.client_weights_mode != client_weighting::equal)
    return "aggregator_kwargs.client_weights_mode: a relay weighs each of "
           "its clients 1 (sample_size through relays is not built)";
  if (sc.secure_aggregation.enabled && sc.memory_mode != memory_mode::ram)
    return "secure_aggregation: within a relay's group in memory_mode ram "
           "only (the group's unmasked sum goes up, not its mean)";
  if (sc.rule.dp_noise_multiplier > 0 || sc.rule.dp_clip_norm > 0)
    return "aggregator_kwargs: DP-FedAvg's noise is added at the root";
  if (sc.rule.partial_updates == partial_updates::keep &&
      sc.rule.partial_updates_given)
    return "aggregator_kwargs.partial_updates: a relay decides it by its "
           "memory_mode (window and disk: its sum streams up, and a child "
           "cut mid-upload stays where it delivered; ram: its updates are "
           "collected again without it): leave it at discard (the default)";
  if (sc.rule.norm_bound > 0 || !sc.rule.tensor_rules.empty())
    return "aggregator_kwargs: norm_bound and tensor_rules belong to the root";
  if (!sc.checkpoint.dir.empty())
    return "checkpoint: a relay keeps no state between rounds; its parent "
           "checkpoints the run";
  return {};
}

} // namespace

result<relay_files> load_relay_file(const std::string& path,
                                    const std::vector<std::string>& overrides) {
  // Through the loader every config goes through: its size and alias
  // guards apply to a relay's file too.
  auto text = read_yaml_file(path, "relay file");
  if (!text)
    return text.err();
  auto parsed = parse_yaml(*text, path);
  if (!parsed)
    return parsed.err();
  auto root = std::move(*parsed);
  if (!root.IsMap() || !root["server_configs"] ||
      !root["server_configs"].IsMap())
    return error{errc::bad_config,
                 path + ": server_configs: is required (the relay's side "
                        "towards its children)"};
  auto server_node = YAML::Clone(root["server_configs"]);
  root.remove("server_configs");
  std::vector<std::string> up, down;
  bool epochs = false; // given in the file or by --set
  constexpr std::string_view simulated = "server_configs.simulated_clients=";
  for (const auto& o : overrides)
    if (o.starts_with(simulated))
      server_node["simulated_clients"] = o.substr(simulated.size());
    else
      (o.starts_with("server_configs.") ? down : up).push_back(o);
  int64_t simulated_clients = 0;
  if (auto n = server_node["simulated_clients"]) {
    try {
      simulated_clients = n.as<int64_t>();
    } catch (const YAML::Exception&) {
      simulated_clients = -1;
    }
    server_node.remove("simulated_clients");
  }
  for (const auto& o : down)
    epochs = epochs || o.starts_with("server_configs.num_global_epochs=");
  YAML::Emitter client_text;
  client_text << root;
  auto client =
      load_config(client_text.c_str(), path, config_role::python_client, up,
                  config_reader::config_folder(path));
  if (!client)
    return client.err();
  auto server = load_config(yaml_under("server_configs", server_node), path,
                            config_role::server, down,
                            config_reader::config_folder(path));
  if (!server)
    return server.err();
  if (auto why = relay_refusal(epochs || server_node["num_global_epochs"],
                               server->server);
      !why.empty())
    return error{errc::bad_config, path + ": server_configs." + why};
  server->server.rule.partial_updates = partial_updates::discard; // by mode
  if (simulated_clients < 0 ||
      simulated_clients > static_cast<int64_t>(server->server.num_clients))
    return error{errc::bad_config,
                 path +
                     ": server_configs.simulated_clients: a number from 0 "
                     "to num_clients (" +
                     std::to_string(server->server.num_clients) +
                     ") of the children to run in this process"};
  return relay_files{std::move(*client), std::move(*server),
                     static_cast<uint32_t>(simulated_clients)};
}

} // namespace fedcaf::cli
