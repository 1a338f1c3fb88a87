#pragma once
// The configuration's keys as the readers themselves ask for them: the
// section reader (config/section.hpp) records into a config_schema, where
// one is given, every key it is asked to read, with its type and default.
// Running the readers over several documents and taking the union finds
// the keys read only in some branches; the reference (config/reference.hpp)
// is printed from it. Value types only.

#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace fedcaf {

/// What the readers do with a key, weakest first: a stronger record of a
/// key replaces a weaker one (a key ignored in one branch and read in
/// another is read).
enum class key_use {
  ignored,  ///< APPFL's, unused by fedcaf: accepted, listed in one warning
  accepted, ///< the user's own code's (a Python client's): accepted unread
  refused,  ///< APPFL's naming a Python file: refused where present
  read,     ///< read and checked
};

/// One key of the configuration.
struct schema_key {
  /// The whole dotted path, as --set names it ("server_configs.num_clients");
  /// a key whose name the user chooses is "<name>"
  /// ("server_configs.aggregator_kwargs.tensor_rules.<pattern>").
  std::string path;
  /// As a user reads it: "string", "bool", "number", "seconds", "whole
  /// number in [1, 1048576]", "one of: a, b", "list of ...", "mapping of
  /// string to string", "section"; "" for a key that is not read.
  std::string type;
  /// The value the reader's output held before the read, as YAML text; ""
  /// where it has none (an empty string, list or section).
  std::string default_yaml;
  key_use use = key_use::read;
};

/// The keys recorded by the readers, in the order first recorded.
class config_schema {
public:
  /// Records `key`, or replaces the record of its path iff `key`'s use is
  /// stronger (see key_use); otherwise the first record stays (the outer
  /// reader's type: one_of's "one of: ..." over the string it reads).
  void record(schema_key key);

  /// Every key recorded, in the order first recorded.
  const std::vector<schema_key>& keys() const { return keys_; }

  /// Returns the key recorded at `path`, or null iff none is.
  const schema_key* find(std::string_view path) const;

private:
  std::vector<schema_key> keys_;
  std::map<std::string, size_t, std::less<>> index_;
};

/// Runs the config readers over the empty document, documents written to
/// reach the keys read only in some branches (APPFL's DP and compressor
/// switches, dp_fedavg, checkpoints, a shard, tensor rules, ...), and each
/// file of `config_files`, in every role (simulate, server, client, Python
/// client), and returns the union of what they recorded. Refusals are
/// expected (a client's file read as a server's) and dropped. Defaults are
/// the first run's that saw a key, the empty document's where it did.
config_schema
collect_config_schema(const std::vector<std::string>& config_files);

/// The YAML files (*.yaml) in `dir`, sorted by name; empty iff there are
/// none or `dir` cannot be read.
std::vector<std::string> yaml_files_in(const std::string& dir);

} // namespace fedcaf
