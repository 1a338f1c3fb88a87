#pragma once
// Internal to the config readers (src/config/, and the profiling tools'
// configs in cli/): a YAML document read as sections, with `--set`
// overrides, every problem recorded as "path.to.key: what is wrong". Not
// for other code: it brings in yaml-cpp, and yaml-cpp throws (catch
// YAML::Exception around a read, as load_config does). Where a
// config_schema is given (fedcaf config-reference), every key a section
// is asked to read is recorded in it; in every other run the pointer is
// null and the readers record nothing.
// Thread-safety: a section belongs to one reader.

#include <algorithm>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "fedcaf/config/schema.hpp"
#include "fedcaf/config/words.hpp"
#include "fedcaf/error.hpp"

namespace fedcaf::config_reader {

/// Sane upper bounds for keys whose type allows far more than makes sense.
inline constexpr uint64_t max_clients = 1 << 20;
inline constexpr uint64_t max_threads = 1024;
inline constexpr uint64_t max_model_bytes = 1ull << 48;

/// How a scalar reads as a whole number.
enum class whole_number { ok, not_whole, out_of_range };

/// Parses "[-+]?[0-9]+" (or "0x" and hex digits) into `out`, in 64 bits:
/// a negative number, or one past 2^64 - 1, is out_of_range.
whole_number parse_whole(std::string_view s, uint64_t& out);

/// Returns "'value'" for a scalar, "a collection" otherwise.
std::string shown(const YAML::Node& n);

/// Returns `x` as a config reference shows a default: YAML text, "" for
/// an empty string or list (no default).
std::string yaml_text(bool x);
std::string yaml_text(double x);
std::string yaml_text(uint64_t x);
std::string yaml_text(const std::string& x);
std::string yaml_text(const char* x) = delete; // would read as a bool
template <class T> std::string yaml_text(const std::vector<T>& xs) {
  std::string out;
  for (const auto& x : xs) {
    if constexpr (std::is_unsigned_v<T> && !std::is_same_v<T, bool>)
      out += (out.empty() ? "[" : ", ") + yaml_text(uint64_t{x});
    else
      out += (out.empty() ? "[" : ", ") + yaml_text(x);
  }
  return out.empty() ? out : out + "]";
}

/// Returns "one of: a, b, c" for `words`: names (const char*), or elements
/// with .name (config_word, rule_name).
template <class Words> std::string one_of_type(const Words& words) {
  std::string out;
  for (const auto& w : words) {
    if constexpr (std::is_pointer_v<std::decay_t<decltype(w)>>)
      out += (out.empty() ? "one of: " : ", ") + std::string{w};
    else
      out += (out.empty() ? "one of: " : ", ") + std::string{w.name};
  }
  return out;
}

/// Returns how the reference names a whole number in [min, max], where
/// `type_max` is the most its type holds: "whole number", "whole number
/// >= 1", "whole number in [1, 4096]".
std::string whole_type(uint64_t min, uint64_t max, uint64_t type_max);

/// Returns the name of `value` in `words` (elements with .value and .name:
/// config_word, rule_name), "?" where it has none.
template <class E, class Words>
std::string_view name_in(const Words& words, E value) {
  for (const auto& w : words)
    if (w.value == value)
      return w.name;
  return "?";
}

/// Reads one YAML mapping, records what was read, and reports unknown keys,
/// wrong types and bad values as "path.to.key: what is wrong" into `errors`.
/// Its destructor reports the keys never read as unknown.
class section {
public:
  section(YAML::Node node, std::string path, std::vector<std::string>& errors,
          std::vector<std::string>* ignored = nullptr,
          config_schema* schema = nullptr);
  section(const section&) = delete;
  ~section();

  /// Returns true iff the key is present and not null (it is then known).
  bool has(const char* key);

  /// The mapping at `key`, with its path (an absent key reads as empty).
  section child(const char* key);

  /// The keys of this mapping, in order (each is known once read): names
  /// the user chooses, which a schema records as `placeholder`
  /// ("tensor_rules.<pattern>").
  std::vector<std::string> keys(const char* placeholder = "<name>");

  /// Where ignore() records the keys it found (null: nowhere).
  void track_ignored(std::vector<std::string>* ignored) { ignored_ = ignored; }

  /// Where every key this section and the children it hands out are asked
  /// to read is recorded, with its type and default (null: nowhere).
  void record_schema(config_schema* schema) { schema_ = schema; }

  void get(const char* key, std::string& out);
  void get(const char* key, bool& out);
  /// Reads a finite number (.inf and .nan are refused).
  void get(const char* key, double& out);

  /// As get for a bool or a number whose default other keys decide: unset
  /// stays nullopt (the reference shows no default), and so does a value
  /// refused.
  template <class T> void get(const char* key, std::optional<T>& out) {
    static_assert(std::is_same_v<T, bool> || std::is_same_v<T, double>);
    if (schema_)
      note(key, std::is_same_v<T, bool> ? "bool" : "number",
           out ? yaml_text(*out) : "");
    read_optional(key, out, [this, key](T& value) { get(key, value); });
  }

  /// Reads a whole number in [min, max] (max at most what Unsigned holds).
  /// The text is read into 64 bits and range-checked before it is narrowed,
  /// so no value wraps.
  template <class Unsigned>
  void get(const char* key, Unsigned& out, uint64_t min = 0,
           uint64_t max = std::numeric_limits<Unsigned>::max()) {
    static_assert(std::is_unsigned_v<Unsigned>);
    constexpr uint64_t type_max = std::numeric_limits<Unsigned>::max();
    if (schema_) // a value the key cannot be given means unset: no default
      note(key, whole_type(min, max, type_max),
           out >= min && out <= max ? yaml_text(uint64_t{out}) : "");
    if (!has(key))
      return;
    max = std::min<uint64_t>(max, type_max);
    if (auto value = whole(key, node_[key], min, max))
      out = static_cast<Unsigned>(*value);
  }

  /// Reads a non-empty list of strings or booleans.
  template <class T> void get_list(const char* key, std::vector<T>& out) {
    if (schema_)
      note(key, std::is_same_v<T, bool> ? "list of bool" : "list of string",
           yaml_text(out));
    if (!has(key))
      return;
    auto n = node_[key];
    if (!n.IsSequence() || n.size() == 0)
      return fail(key, "expected a non-empty list");
    try {
      out.clear();
      for (const auto& x : n)
        out.push_back(x.as<T>());
    } catch (const YAML::Exception&) {
      fail(key, "a list element has the wrong type");
    }
  }

  /// Reads a non-empty list of whole numbers, each in [min, max].
  template <class Unsigned>
  void get_whole_list(const char* key, std::vector<Unsigned>& out,
                      uint64_t min = 0,
                      uint64_t max = std::numeric_limits<Unsigned>::max()) {
    static_assert(std::is_unsigned_v<Unsigned>);
    constexpr uint64_t type_max = std::numeric_limits<Unsigned>::max();
    if (schema_)
      note(key, "list of " + whole_type(min, max, type_max), yaml_text(out));
    if (!has(key))
      return;
    auto n = node_[key];
    if (!n.IsSequence() || n.size() == 0)
      return fail(key, "expected a non-empty list");
    max = std::min<uint64_t>(max, type_max);
    std::vector<Unsigned> values;
    for (size_t i = 0; i < n.size(); ++i) {
      auto name = std::string{key} + "[" + std::to_string(i) + "]";
      auto value = whole(name, n[i], min, max);
      if (!value)
        return;
      values.push_back(static_cast<Unsigned>(*value));
    }
    out = std::move(values);
  }

  /// A mapping of string to string, e.g. client id -> token.
  void get_map(const char* key,
               std::vector<std::pair<std::string, std::string>>& out);

  /// Appends the pairs of the mapping `n` to `out`; a value that is not a
  /// non-empty string is an error of `key`.
  void read_pairs(const YAML::Node& n,
                  std::vector<std::pair<std::string, std::string>>& out,
                  const std::string& key);

  /// Reads a string that must be one of `allowed`.
  void one_of(const char* key, std::string& out,
              std::initializer_list<const char*> allowed);

  /// As one_of for a word of `words` (config_word or rule_name elements),
  /// parsed into its enum (`out` keeps its default where the key is absent
  /// or wrong).
  template <class E, class Words>
  void one_of(const char* key, E& out, const Words& words) {
    std::string name{name_in(words, out)};
    if (schema_)
      note(key, one_of_type(words), name);
    get(key, name);
    std::string names;
    for (const auto& w : words) {
      if (name == w.name) {
        out = w.value;
        return;
      }
      names += names.empty() ? w.name : std::string{", "} + w.name;
    }
    fail(key, "must be one of " + names + ", got '" + name + "'");
  }

  /// As one_of for a config word, with its enum's table (words.hpp).
  template <config_word_enum E> void one_of(const char* key, E& out) {
    one_of(key, out, words_of(out));
  }

  /// As one_of for a config word whose default other keys decide: unset
  /// stays nullopt (the reference shows no default), and so does a word
  /// refused.
  template <config_word_enum E>
  void one_of(const char* key, std::optional<E>& out) {
    if (schema_)
      note(key, one_of_type(words_of(E{})),
           out ? std::string{name_of(*out)} : "");
    read_optional(key, out, [this, key](E& value) { one_of(key, value); });
  }

  void positive(const char* key, double& out);

  /// Reads a duration in seconds: above 0 (or 0 too when `zero_ok`) and at
  /// most 1e9 (about 31 years: every duration converts to 64-bit
  /// milliseconds).
  void seconds(const char* key, double& out, bool zero_ok = false);

  /// Marks `key` as belonging to the user's own code (a Python client's
  /// data_configs): accepted unread, and not warned about.
  void accept(const char* key);

  /// Refuses `key` where present, with `why`: APPFL's keys that name a
  /// Python file, which fedcaf does not run (refused, never ignored).
  void refuse(const char* key, const std::string& why);

  /// Returns true iff the mapping holds the key path `keys` (no key is
  /// marked as read).
  bool holds(std::initializer_list<const char*> keys) const;

  /// Marks keys accepted for compatibility with APPFL configs but unused.
  /// Keys of APPFL's that fedcaf does not use: accepted, and recorded for
  /// the warning that lists them.
  void ignore(std::initializer_list<const char*> keys);

  /// Records "path.key: what".
  void fail(const std::string& key, const std::string& what);

  /// Returns the whole key path of `key` ("a.b.key"), as --set names it.
  std::string key_path(const std::string& key) const { return join(key); }

private:
  std::string join(const std::string& key) const;

  /// Reads `key` into `out` with `read` (a reader of T) iff it is present;
  /// `out` is set iff `read` recorded no error.
  template <class T, class Read>
  void read_optional(const char* key, std::optional<T>& out, Read read) {
    if (!has(key))
      return;
    T value = out.value_or(T{});
    auto errors_before = errors_.size();
    read(value);
    if (errors_.size() == errors_before)
      out = value;
  }

  /// Records `key` in the schema as `type` with `default_yaml` (REQUIRES:
  /// a schema); a key named by keys() is recorded as its placeholder. Each
  /// reader notes before it calls another (one_of before the get it reads
  /// with), and a schema keeps a key's first record: the outer type stands.
  void note(const std::string& key, std::string type, std::string default_yaml,
            key_use use = key_use::read);
  std::string text(const char* key) const { return shown(node_[key]); }

  /// Returns the whole number `n` holds iff it lies in [min, max]; records
  /// an error naming `key` and the range otherwise.
  std::optional<uint64_t> whole(const std::string& key, const YAML::Node& n,
                                uint64_t min, uint64_t max);

  YAML::Node node_;
  std::string path_;
  std::vector<std::string>& errors_;
  std::vector<std::string>* ignored_;
  std::set<std::string> seen_;
  config_schema* schema_ = nullptr;
  /// The keys keys() returned (only where a schema is recorded), and what
  /// the schema names them.
  std::set<std::string, std::less<>> named_;
  std::string placeholder_;
};

/// Parses `text` (from `source`, as parse_yaml does) and applies each
/// `--set` override ("a.b.c=value", the value parsed as YAML) to it.
/// Returns an error iff the text or a value is refused by parse_yaml
/// ("SOURCE: <reason>"), or an override is not key.path=value.
///
/// With `base_dir` (the config file's folder), each relative file path the
/// text holds (model files, data, TLS and token files, storage and
/// checkpoint folders, saved models: see resolve_paths) is read from
/// there, as compose and Hydra do; an override's path stays as given
/// (relative to the working directory).
result<YAML::Node>
parse_with_overrides(const std::string& text, const std::string& source,
                     const std::vector<std::string>& overrides,
                     const std::string& base_dir = "");

/// Makes each relative, non-empty file path in `root` absolute against
/// `base_dir`: the keys that name files or folders, wherever their
/// section sits (a server's client_configs, a client's own, a relay's):
/// model_configs.path, data_configs' dataset_path and dataset_kwargs'
/// tensor files, train_configs' and server_configs' storage_dir,
/// checkpoint.dir, server_configs.save_global_model, grpc_configs'
/// certificates and keys, authenticator_args' tokens_file and
/// auth_token_file.
void resolve_paths(YAML::Node root, const std::string& base_dir);

/// The folder relative paths in config file `path` are read from (its
/// own, absolute), or "" for what is not a regular file (/dev/null, a
/// pipe): its paths stay relative to the working directory.
std::string config_folder(const std::string& path);

/// Returns every error at once, one per line, each prefixed by `source`;
/// an error in a key a --set gave is blamed on that --set instead.
std::string join_errors(const std::string& source,
                        const std::vector<std::string>& errors,
                        const std::vector<std::string>& overrides = {});

/// Reads the YAML file `path`, after each `--set` override, as one section
/// with `read`. Returns an error naming the file (or the --set) and the key
/// path iff the file cannot be read or parsed, or `read` (or the section,
/// for keys never read) recorded an error.
result<void> read_section_file(const std::string& path,
                               const std::vector<std::string>& overrides,
                               const std::function<void(section&)>& read);

/// As read_section_file, into a T that `read(section&, T&)` fills from its
/// defaults; returns it iff there was no error.
template <class T, class Read>
result<T> load_section_file(const std::string& path,
                            const std::vector<std::string>& overrides,
                            Read read) {
  T out;
  auto ok = read_section_file(path, overrides,
                              [&out, &read](section& s) { read(s, out); });
  if (!ok)
    return ok.err();
  return out;
}

} // namespace fedcaf::config_reader
