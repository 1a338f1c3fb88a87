// Reads whole configuration files: a client's own, or a server's (and
// simulate's) with its client_configs and data_configs; the checks that
// span sections; what the server hands its clients, and what the reports
// show (secrets redacted).

#include "fedcaf/config/load.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <utility>

#include "fedcaf/client_id.hpp"
#include "fedcaf/config/yaml_safety.hpp"
#include "read_sections.hpp"

namespace fedcaf {

using config_reader::section;

namespace {

/// shard: {rank, ranks, slices: {tensor: [begin_row, end_row], ...}}.
void read_shard(section& root, shard_spec& out) {
  if (!root.has("shard"))
    return;
  auto shard = root.child("shard");
  shard.get("ranks", out.ranks, 1, max_shard_ranks);
  shard.get("rank", out.rank, 0, max_shard_ranks - 1);
  if (out.rank >= out.ranks)
    shard.fail("rank", "must be below shard.ranks (" +
                           std::to_string(out.ranks) + "), from 0");
  if (!shard.has("slices"))
    return;
  auto slices = shard.child("slices");
  for (const auto& name : slices.keys("<tensor>")) {
    std::vector<uint64_t> rows;
    slices.get_whole_list(name.c_str(), rows);
    if (rows.size() != 2 || rows[0] > rows[1]) {
      slices.fail(name.c_str(), "expected [begin_row, end_row]");
      continue;
    }
    out.slices.push_back({name, rows[0], rows[1]});
  }
}

/// A client's own file. `fedcaf client` (role client) reads its device and
/// its partition of the data set here; a Python client's device and
/// data_configs, if any, are its own code's, accepted unread.
void read_client_file(section& root, config& c, config_role role) {
  auto train = root.child("train_configs");
  c.client.client_id.clear(); // required: no default
  root.get("client_id", c.client.client_id);
  // APPFL takes train_configs.logging_id, its older name, where client_id
  // is absent; with client_id given, logging_id only names its logs.
  bool appfl_id = !root.has("client_id") && train.has("logging_id");
  if (appfl_id)
    train.get("logging_id", c.client.client_id);
  else
    train.ignore({"logging_id"});
  if (!root.has("client_id") && !appfl_id)
    root.fail("client_id", "is required");
  else if (auto ok = check_client_id(c.client.client_id); !ok)
    root.fail(appfl_id ? "train_configs.logging_id" : "client_id",
              ok.err().message);
  train.get("num_threads", c.client.num_threads, 0, config_reader::max_threads);
  train.get("storage_dir", c.client.storage_dir);
  // Unset: $TMPDIR where that is set. Taken after the read, so that the
  // reference shows the struct's default, the same on every machine.
  if (const char* tmp = std::getenv("TMPDIR");
      tmp && *tmp && !train.has("storage_dir"))
    c.client.storage_dir = tmp;
  if (!std::filesystem::is_directory(c.client.storage_dir))
    train.fail("storage_dir",
               "'" + c.client.storage_dir + "' is not a directory");
  train.ignore({"logging_output_dirname", "logging_output_filename"});
  if (role == config_role::python_client) {
    // Its own code picks the device (any torch) and reads the data.
    train.accept("device");
    root.accept("data_configs");
  } else {
    read_device(train, c.client.device);
    read(root.child("data_configs"), c.client.data, true);
  }
  read(root.child("comm_configs"), c.client.comm, false);
  read_shard(root, c.client.shard);
}

/// Refuses what compressed uploads cannot run with: the server adds each
/// decoded delta to the model the client received, which it must still
/// hold and which must be the round's. Errors name the key the file gave
/// (compression, or APPFL's compressor_configs).
void check_compression(section& root, const config& c) {
  const auto& z = c.clients.compression;
  if (!z.up)
    return;
  bool appfl =
      root.holds({"client_configs", "comm_configs", "compressor_configs"});
  auto fail = [&](const std::string& why) {
    root.fail(appfl ? "client_configs.comm_configs.compressor_configs"
                    : "client_configs.comm_configs.compression",
              why);
  };
  const auto& sc = c.server;
  if (sc.rule.norm_bound > 0)
    fail("aggregator_kwargs.norm_bound measures the update the client "
         "declared, which its encoding changes: use one or the other");
  if (sc.memory_mode != memory_mode::ram)
    fail("compressed uploads (deltas) need memory_mode ram: window and disk "
         "modes overwrite the model a delta is added to (use direction: "
         "down, or memory_mode ram)");
  if (sc.scheduler != scheduler_kind::sync)
    fail("compressed uploads need SyncScheduler: an async update's delta "
         "belongs to an older model");
  if (sc.secure_aggregation.enabled)
    fail("compressed uploads cannot be masked: secure aggregation quantizes "
         "updates itself");
  if (sc.rule.dp_noise_multiplier > 0 || sc.rule.dp_clip_norm > 0)
    fail("compressed uploads would move a clipped update past clip_norm: "
         "DP-FedAvg needs method: none");
}

void read_server_file(section& root, config& c) {
  if (!root.has("server_configs"))
    root.fail("server_configs", "is required");
  read(root.child("server_configs"), c.server);
  read(root.child("client_configs"), c.clients, true);
  check_compression(root, c);
  c.data.num_clients = c.server.num_clients;
  read(root.child("data_configs"), c.data, false);
  if (c.data.num_clients != c.server.num_clients)
    root.fail("data_configs.dataset_kwargs.num_clients",
              "must equal server_configs.num_clients (" +
                  std::to_string(c.server.num_clients) + ")");
}

/// Returns true iff an item of `overrides` sets the key path `key`.
bool overrides_key(const std::vector<std::string>& overrides,
                   std::string_view key) {
  return std::any_of(overrides.begin(), overrides.end(),
                     [key](const std::string& item) {
                       return item.substr(0, item.find('=')) == key;
                     });
}

/// --set server_configs.aggregator without --set server_configs.scheduler:
/// the file's scheduler was chosen for the file's aggregator, so it is
/// dropped and the scheduler follows the new aggregator (AsyncScheduler for
/// FedAsync and FedBuff, SyncScheduler for the others).
void follow_aggregator(YAML::Node& root,
                       const std::vector<std::string>& overrides) {
  if (!overrides_key(overrides, "server_configs.aggregator") ||
      overrides_key(overrides, "server_configs.scheduler"))
    return;
  auto server = root["server_configs"];
  if (server.IsMap() && server["scheduler"])
    server.remove("scheduler");
}

/// Replaces APPFL's compressor_configs in the client_configs that clients
/// receive by the compression it was read as, so that every client (fedcaf's,
/// or one written from docs/protocol.md) reads one key.
void send_compression_as_read(YAML::Node clients, const compression_config& z) {
  if (!clients.IsMap() || !clients["comm_configs"].IsMap() ||
      !clients["comm_configs"]["compressor_configs"])
    return;
  YAML::Node comm = clients["comm_configs"];
  comm.remove("compressor_configs");
  YAML::Node out{YAML::NodeType::Map};
  out["method"] = to_string(z.method);
  out["direction"] = z.down ? (z.up ? "both" : "down") : "up";
  out["zfp_tolerance"] = z.zfp_tolerance;
  out["error_feedback"] = z.error_feedback;
  comm["compression"] = out;
}

/// Replaces every secret (auth_token, tokens) below `node` by a marker, so
/// that reports never carry one.
void redact(YAML::Node node) {
  if (!node.IsMap())
    return;
  for (auto kv : node) {
    auto key = kv.first.as<std::string>("");
    if (key == "auth_token" || key == "tokens")
      kv.second = "<redacted>";
    else
      redact(kv.second);
  }
}

/// Reads the sections of `root` into `c`, as a file of c.role says;
/// records every problem in `errors`, and every key asked for in `schema`
/// where one is given.
void read_file(const YAML::Node& root, config& c,
               std::vector<std::string>& errors, config_schema* schema) {
  section top{root, "", errors};
  top.track_ignored(&c.ignored_keys);
  top.record_schema(schema);
  if (is_client_role(c.role))
    read_client_file(top, c, c.role);
  else
    read_server_file(top, c);
  if (c.role != config_role::simulate && c.server.simulated_relays > 0)
    top.fail("server_configs.simulated_relays",
             "simulate only: a tree of processes is fedcaf relay "
             "(server_configs.relays names them)");
  if (c.role == config_role::simulate &&
      c.clients.train.trainer == trainer_kind::python)
    top.fail("client_configs.train_configs.trainer",
             "python: Python clients train with their own code in their "
             "own processes; simulate runs fedcaf's trainers (run fedcaf "
             "server and the Python client, examples/python)");
}

/// Returns `root` as YAML with every secret redacted, for the reports.
std::string effective_yaml_of(const YAML::Node& root) {
  YAML::Emitter out;
  auto shown = YAML::Clone(root);
  redact(shown);
  out << shown;
  return out.c_str();
}

/// Writes into root's client_configs what the server decides for its
/// clients (federated evaluation, DP-FedAvg's clip norm, the norm they
/// declare, compression as read), sets it in `c` too, and returns that
/// section as YAML, as the server hands it out.
std::string client_configs_of(YAML::Node root, config& c) {
  if (!is_client_role(c.role)) { // clients evaluate when asked to
    auto train = root["client_configs"]["train_configs"];
    c.server.federated_evaluation = c.server.federated_evaluation.value_or(
        c.clients.train.trainer != trainer_kind::dummy &&
        (c.clients.model.model_name != model_kind::cnn ||
         c.data.dataset_name != "FashionMNIST"));
    train["federated_evaluation"] = *c.server.federated_evaluation;
    c.clients.train.federated_evaluation = *c.server.federated_evaluation;
  }
  if (c.server.rule.dp_clip_norm > 0) // clients clip for DP-FedAvg
    root["client_configs"]["train_configs"]["update_clip_norm"] =
        c.server.rule.dp_clip_norm;
  if (c.server.rule.norm_bound > 0) { // clients declare their norm
    root["client_configs"]["train_configs"]["declare_update_norm"] = true;
    c.clients.train.declare_update_norm = true;
  }
  if (!is_client_role(c.role))
    send_compression_as_read(root["client_configs"], c.clients.compression);
  YAML::Emitter clients;
  if (root.IsMap() && root["client_configs"])
    clients << root["client_configs"];
  else
    clients << YAML::BeginMap << YAML::EndMap;
  return clients.c_str();
}

} // namespace

result<config> load_config(std::string_view yaml_text, std::string source,
                           config_role role,
                           const std::vector<std::string>& overrides,
                           const std::string& base_dir, config_schema* schema) {
  config c;
  c.role = role;
  c.source = std::move(source);
  std::vector<std::string> errors;
  auto root = config_reader::parse_with_overrides(
      std::string{yaml_text}, c.source, overrides, base_dir);
  if (!root)
    return root.err();
  try {
    follow_aggregator(*root, overrides);
    read_file(*root, c, errors, schema);
    c.effective_yaml = effective_yaml_of(*root);
    c.client_configs_text = client_configs_of(*root, c);
  } catch (const YAML::Exception& e) {
    return error{errc::bad_config, c.source + ": " + e.what()};
  }
  if (!errors.empty())
    return error{errc::bad_config,
                 config_reader::join_errors(c.source, errors, overrides)};
  return c;
}

result<config> load_config_file(const std::string& path, config_role role,
                                const std::vector<std::string>& overrides) {
  auto text = read_yaml_file(path, "config file");
  if (!text)
    return text.err();
  return load_config(*text, path, role, overrides,
                     config_reader::config_folder(path));
}

std::string ignored_keys_text(const config& c) {
  std::string keys;
  for (const auto& k : c.ignored_keys)
    keys += (keys.empty() ? "" : ", ") + k;
  return keys;
}

std::string ignored_keys_warning(const config& c) {
  if (c.ignored_keys.empty())
    return {};
  return "warning: " + c.source + ": ignored " +
         std::to_string(c.ignored_keys.size()) +
         " keys fedcaf does not use: " + ignored_keys_text(c) +
         " (--strict refuses them)";
}

std::string client_configs_yaml(const config& c) {
  return c.client_configs_text;
}

result<client_configs> parse_client_configs(std::string_view yaml_text) {
  client_configs c;
  std::vector<std::string> errors;
  const std::string source = "client_configs from the server";
  auto root = parse_yaml(std::string{yaml_text}, source);
  if (!root)
    return root.err();
  try {
    read(section{*root, "client_configs", errors}, c, false);
  } catch (const YAML::Exception& e) {
    return error{errc::bad_config, source + ": " + e.what()};
  }
  if (!errors.empty())
    return error{errc::bad_config, config_reader::join_errors(source, errors)};
  return c;
}

} // namespace fedcaf
