#pragma once
// A whole configuration file in APPFL's layout (server_configs,
// client_configs, data_configs, comm_configs), read from YAML with the
// command's --set overrides and validated before anything starts: each
// section by its part (client_sections, comm_sections, server_sections),
// then what one section says about another. Value types only.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fedcaf/config/client_sections.hpp"
#include "fedcaf/config/comm_sections.hpp"
#include "fedcaf/config/schema.hpp"
#include "fedcaf/config/server_sections.hpp"
#include "fedcaf/error.hpp"
#include "fedcaf/shard.hpp"

namespace fedcaf {

/// The keys of a client's own file.
struct client_config {
  std::string client_id = "Client1";
  std::string device = "cpu";
  uint32_t num_threads = 0;
  /// train_configs.storage_dir of the client's own file: where its model
  /// lives when the server asks for train_configs.storage: disk (never the
  /// server's storage_dir, which names a folder on the server's host).
  std::string storage_dir = "/tmp";
  data_config data;
  comm_config comm;
  /// shard: which rank of a sharded client this process is (ranks 1: the
  /// whole model), and the rows it holds (slices; empty: torch.chunk's
  /// dim-0 chunk).
  shard_spec shard;
};

/// Which command a config file is for; decides the allowed top-level keys.
/// client is `fedcaf client`, whose trainer reads its partition of the data
/// set (data_configs.dataset_kwargs.num_clients is required);
/// python_client is `fedcaf.Client` in Python, whose own code brings the
/// data: its data_configs is optional and accepted unread.
enum class config_role { simulate, server, client, python_client };

/// Returns true iff `r` is a client's own file (client or python_client).
constexpr bool is_client_role(config_role r) {
  return r == config_role::client || r == config_role::python_client;
}

/// A validated configuration.
struct config {
  config_role role = config_role::simulate;
  server_config server;
  client_configs clients;
  data_config data;
  client_config client;
  std::string source;              ///< file name, or "<embedded simulate.yaml>"
  std::string client_configs_text; ///< client_configs as YAML, after --set
  std::string effective_yaml;      ///< the YAML after --set, for reports
  /// Keys of APPFL's layout that fedcaf does not use and accepted (for the
  /// one warning that lists them; --strict refuses them).
  std::vector<std::string> ignored_keys;
};

/// Parses and validates `yaml_text` after applying each `--set` override
/// ("a.b.c=value"). Returns an error naming the source and the key path iff a
/// key is unknown, a value has the wrong type or range, a required key is
/// missing, or a named file does not exist. A relative path in the text
/// is read from `base_dir` where given (the file's folder), else from the
/// working directory; an override's, from the working directory. With
/// `schema`, every key the readers are asked for is recorded there
/// (collect_config_schema); without, nothing is.
result<config> load_config(std::string_view yaml_text, std::string source,
                           config_role role,
                           const std::vector<std::string>& overrides = {},
                           const std::string& base_dir = "",
                           config_schema* schema = nullptr);

/// Reads a file and calls load_config on it, its relative paths read from
/// the file's folder.
result<config> load_config_file(const std::string& path, config_role role,
                                const std::vector<std::string>& overrides = {});

/// Returns the keys of c.ignored_keys joined by ", " ("" if none).
std::string ignored_keys_text(const config& c);

/// Returns the one warning that lists the keys of APPFL's layout the config
/// gave and fedcaf does not use: "warning: SOURCE: ignored N keys fedcaf does
/// not use: K1, K2 (--strict refuses them)"; "" iff there are none.
std::string ignored_keys_warning(const config& c);

/// Returns the client_configs section as YAML (sent to clients in Welcome).
std::string client_configs_yaml(const config& c);

/// Parses the client_configs YAML received from a server.
result<client_configs> parse_client_configs(std::string_view yaml_text);

/// The default configuration that `fedcaf simulate` runs without -c.
std::string_view embedded_simulate_yaml();

} // namespace fedcaf
