// The keys the readers ask for, recorded, and the runs that find them all:
// the readers over the empty document, documents that take the branches it
// does not, and the shipped configs.

#include "fedcaf/config/schema.hpp"

#include <algorithm>
#include <filesystem>

#include "fedcaf/config/load.hpp"
#include "fedcaf/config/section.hpp"
#include "fedcaf/config/yaml_safety.hpp"

namespace fedcaf {

namespace {

/// A server's file that takes the branches the empty document does not:
/// sampling by fraction, federated evaluation named, checkpoints,
/// DP-FedAvg, tensor rules, the model named by `name`, APPFL's DP-SGD
/// switch and its compressor with an absolute bound.
constexpr std::string_view server_branches = R"(
server_configs:
  federated_evaluation: true
  checkpoint: {dir: checkpoints}
  scheduler_kwargs: {client_fraction: 0.5}
  aggregator_kwargs:
    dp_fedavg: {clip_norm: 1.0}
    tensor_rules: {"*.bias": keep}
client_configs:
  model_configs: {name: CNN}
  train_configs:
    use_dp: true
    dp_mechanism: opacus
    dp_config: {noise_multiplier: 1.0, max_grad_norm: 1.0}
  comm_configs:
    compressor_configs:
      enable_compression: true
      lossy_compressor: ZFP
      error_bounding_mode: ABS
      error_bound: 0.001
)";

/// A client's file that takes the branches the empty document does not:
/// APPFL's logging_id as its id, one rank of a sharded client.
constexpr std::string_view client_branches = R"(
train_configs: {logging_id: Client1}
shard: {ranks: 2, rank: 0, slices: {weight: [0, 1]}}
)";

constexpr config_role every_role[] = {config_role::simulate,
                                      config_role::server, config_role::client,
                                      config_role::python_client};

/// Runs the readers over `text` in every role, recording into `schema`.
void record_runs(std::string_view text, const std::string& source,
                 const std::string& base_dir, config_schema& schema) {
  for (auto role : every_role)
    (void)load_config(text, source, role, {}, base_dir, &schema);
}

} // namespace

void config_schema::record(schema_key key) {
  auto at = index_.find(key.path);
  if (at == index_.end()) {
    index_.emplace(key.path, keys_.size());
    keys_.push_back(std::move(key));
  } else if (key.use > keys_[at->second].use) {
    keys_[at->second] = std::move(key);
  }
}

const schema_key* config_schema::find(std::string_view path) const {
  auto at = index_.find(path);
  return at == index_.end() ? nullptr : &keys_[at->second];
}

config_schema
collect_config_schema(const std::vector<std::string>& config_files) {
  config_schema schema;
  record_runs("", "<empty>", "", schema);
  // fedcaf relay takes this key out of its file's server_configs before
  // the server's sections are read (cli/relay.cpp), and checks it against
  // num_clients itself.
  schema.record({"server_configs.simulated_clients",
                 "whole number in [0, server_configs.num_clients]", "0"});
  record_runs(server_branches, "<server branches>", "", schema);
  record_runs(client_branches, "<client branches>", "", schema);
  for (const auto& path : config_files)
    if (auto text = read_yaml_file(path, "config file"))
      record_runs(*text, path, config_reader::config_folder(path), schema);
  return schema;
}

std::vector<std::string> yaml_files_in(const std::string& dir) {
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator{dir, ec})
    if (entry.path().extension() == ".yaml")
      files.push_back(entry.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

} // namespace fedcaf
