// The section reader: every yaml-cpp call that reads a value is here or in
// section.hpp's templates, and a wrong type becomes a recorded error.

#include "fedcaf/config/section.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <set>

#include "fedcaf/config/yaml_safety.hpp"

namespace fedcaf::config_reader {

namespace {

/// About 31 years: every duration converts to 64-bit milliseconds.
constexpr double max_seconds = 1e9;

std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i)
    if (i == s.size() || s[i] == sep) {
      parts.emplace_back(s.substr(start, i - start));
      start = i + 1;
    }
  return parts;
}

void set_path(YAML::Node node, const std::vector<std::string>& path, size_t i,
              const YAML::Node& value) {
  if (i + 1 == path.size()) {
    node[path[i]] = value;
    return;
  }
  if (!node[path[i]].IsMap())
    node[path[i]] = YAML::Node{YAML::NodeType::Map};
  set_path(node[path[i]], path, i + 1, value);
}

result<void> apply_override(YAML::Node& root, const std::string& item,
                            const std::string& source) {
  auto eq = item.find('=');
  if (eq == std::string::npos || eq == 0)
    return error{errc::bad_config,
                 "--set " + item + ": expected key.path=value"};
  auto path = split(item.substr(0, eq), '.');
  for (const auto& p : path)
    if (p.empty())
      return error{errc::bad_config, "--set " + item + ": empty key in path"};
  auto value = parse_yaml(item.substr(eq + 1), source);
  if (!value)
    return value.err();
  if (!root.IsMap())
    root = YAML::Node{YAML::NodeType::Map};
  set_path(root, path, 0, *value);
  return {};
}

/// Levenshtein distance between `a` and `b`.
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      row[j] = std::min({above + 1, row[j - 1] + 1,
                         diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

/// " (did you mean 'K'?)" for the known key K nearest to `key` (at most
/// a third of its letters apart, and at least 1 or 2), else "".
std::string did_you_mean(const std::string& key,
                         const std::set<std::string>& known) {
  const std::string* best = nullptr;
  size_t best_distance = std::max<size_t>(2, key.size() / 3) + 1;
  for (const auto& k : known)
    if (auto d = edit_distance(key, k); d < best_distance) {
      best = &k;
      best_distance = d;
    }
  return best ? " (did you mean '" + *best + "'?)" : "";
}

} // namespace

whole_number parse_whole(std::string_view s, uint64_t& out) {
  bool negative = !s.empty() && s.front() == '-';
  if (!s.empty() && (s.front() == '-' || s.front() == '+'))
    s.remove_prefix(1);
  int base = 10;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    base = 16;
    s.remove_prefix(2);
  }
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out, base);
  if (s.empty() ||
      (ec != std::errc{} && ec != std::errc::result_out_of_range) ||
      end != s.data() + s.size())
    return whole_number::not_whole;
  if (ec == std::errc::result_out_of_range || (negative && out != 0))
    return whole_number::out_of_range;
  return whole_number::ok;
}

std::string yaml_text(bool x) {
  return x ? "true" : "false";
}

std::string yaml_text(double x) {
  std::array<char, 32> text{};
  auto [end, ec] = std::to_chars(text.data(), text.data() + text.size(), x);
  return ec == std::errc{} ? std::string(text.data(), end) : "?";
}

std::string yaml_text(uint64_t x) {
  return std::to_string(x);
}

std::string yaml_text(const std::string& x) {
  return x;
}

std::string whole_type(uint64_t min, uint64_t max, uint64_t type_max) {
  if (max < type_max)
    return "whole number in [" + std::to_string(min) + ", " +
           std::to_string(max) + "]";
  return min == 0 ? "whole number" : "whole number >= " + std::to_string(min);
}

std::string shown(const YAML::Node& n) {
  return n.IsScalar() ? "'" + n.Scalar() + "'" : std::string{"a collection"};
}

section::section(YAML::Node node, std::string path,
                 std::vector<std::string>& errors,
                 std::vector<std::string>* ignored, config_schema* schema)
    : node_(std::move(node)), path_(std::move(path)), errors_(errors),
      ignored_(ignored), schema_(schema) {
  if (node_ && !node_.IsNull() && !node_.IsMap())
    fail("", "expected a mapping");
}

section::~section() {
  if (!node_ || !node_.IsMap())
    return;
  for (const auto& kv : node_) {
    auto key = kv.first.as<std::string>("");
    if (!seen_.count(key))
      fail(key, "unknown key" + did_you_mean(key, seen_));
  }
}

void section::note(const std::string& key, std::string type,
                   std::string default_yaml, key_use use) {
  auto path = named_.count(key) ? join(placeholder_) : join(key);
  schema_->record(
      {std::move(path), std::move(type), std::move(default_yaml), use});
}

bool section::has(const char* key) {
  seen_.insert(key);
  return node_ && node_.IsMap() && node_[key] && !node_[key].IsNull();
}

section section::child(const char* key) {
  if (schema_)
    note(key, "section", "");
  seen_.insert(key);
  YAML::Node sub = node_ && node_.IsMap() ? node_[key] : YAML::Node{};
  return section{sub, join(key), errors_, ignored_, schema_};
}

std::vector<std::string> section::keys(const char* placeholder) {
  std::vector<std::string> out;
  if (node_ && node_.IsMap())
    for (const auto& kv : node_)
      out.push_back(kv.first.as<std::string>(""));
  if (schema_) {
    named_.insert(out.begin(), out.end());
    placeholder_ = placeholder;
  }
  return out;
}

void section::get(const char* key, std::string& out) {
  if (schema_)
    note(key, "string", out);
  if (!has(key))
    return;
  auto n = node_[key];
  if (!n.IsScalar())
    return fail(key, "expected a string");
  out = n.Scalar();
}

void section::get(const char* key, bool& out) {
  if (schema_)
    note(key, "bool", yaml_text(out));
  if (!has(key))
    return;
  try {
    out = node_[key].as<bool>();
  } catch (const YAML::Exception&) {
    fail(key, "expected true or false, got " + text(key));
  }
}

void section::get(const char* key, double& out) {
  if (schema_)
    note(key, "number", yaml_text(out));
  if (!has(key))
    return;
  double value = 0;
  try {
    value = node_[key].as<double>();
  } catch (const YAML::Exception&) {
    return fail(key, "expected a number, got " + text(key));
  }
  if (!std::isfinite(value))
    return fail(key, "expected a finite number, got " + text(key));
  out = value;
}

void section::get_map(const char* key,
                      std::vector<std::pair<std::string, std::string>>& out) {
  if (schema_) {
    std::string pairs;
    for (const auto& [k, v] : out)
      pairs += (pairs.empty() ? "{" : ", ") + k + ": " + v;
    note(key, "mapping of string to string", pairs.empty() ? "" : pairs + "}");
  }
  if (!has(key))
    return;
  auto n = node_[key];
  if (!n.IsMap())
    return fail(key, "expected a mapping of names to strings");
  read_pairs(n, out, key);
}

void section::read_pairs(const YAML::Node& n,
                         std::vector<std::pair<std::string, std::string>>& out,
                         const std::string& key) {
  for (const auto& kv : n) {
    if (!kv.second.IsScalar() || kv.second.Scalar().empty())
      return fail(key, "the value of '" + kv.first.as<std::string>("") +
                           "' must be a non-empty string");
    out.emplace_back(kv.first.as<std::string>(""), kv.second.Scalar());
  }
}

void section::one_of(const char* key, std::string& out,
                     std::initializer_list<const char*> allowed) {
  if (schema_)
    note(key, one_of_type(allowed), out);
  get(key, out);
  std::string names;
  for (const auto* a : allowed) {
    if (out == a)
      return;
    names += names.empty() ? a : std::string{", "} + a;
  }
  fail(key, "must be one of " + names + ", got '" + out + "'");
}

void section::positive(const char* key, double& out) {
  if (schema_) // a value the key cannot be given means unset: no default
    note(key, "number > 0", out > 0 ? yaml_text(out) : "");
  get(key, out);
  if (!(out > 0))
    fail(key, "must be greater than 0");
}

void section::seconds(const char* key, double& out, bool zero_ok) {
  if (schema_)
    note(key, zero_ok ? "seconds, or 0" : "seconds", yaml_text(out));
  get(key, out);
  if (zero_ok ? !(out >= 0) : !(out > 0))
    fail(key,
         zero_ok ? "must be 0 (none) or positive" : "must be greater than 0");
  else if (out > max_seconds)
    fail(key, "must be at most 1e9 seconds");
}

bool section::holds(std::initializer_list<const char*> keys) const {
  YAML::Node at = node_;
  for (const auto* k : keys) {
    if (!at || !at.IsMap())
      return false;
    const YAML::Node next = std::as_const(at)[k]; // const: inserts nothing
    if (!next)
      return false;
    at.reset(next);
  }
  return true;
}

void section::accept(const char* key) {
  if (schema_)
    note(key, "", "", key_use::accepted);
  seen_.insert(key);
}

void section::refuse(const char* key, const std::string& why) {
  if (schema_)
    note(key, "", "", key_use::refused);
  if (has(key))
    fail(key, why);
}

void section::ignore(std::initializer_list<const char*> keys) {
  for (const auto* k : keys) {
    if (schema_)
      note(k, "", "", key_use::ignored);
    seen_.insert(k);
    if (ignored_ && node_ && node_.IsMap() && node_[k])
      ignored_->push_back(join(k));
  }
}

void section::fail(const std::string& key, const std::string& what) {
  errors_.push_back(join(key) + ": " + what);
}

std::string section::join(const std::string& key) const {
  if (key.empty())
    return path_;
  return path_.empty() ? key : path_ + "." + key;
}

std::optional<uint64_t> section::whole(const std::string& key,
                                       const YAML::Node& n, uint64_t min,
                                       uint64_t max) {
  uint64_t value = 0;
  auto parsed =
      n.IsScalar() ? parse_whole(n.Scalar(), value) : whole_number::not_whole;
  auto range = std::to_string(min) + " to " + std::to_string(max);
  if (parsed == whole_number::not_whole)
    fail(key, "expected a whole number from " + range + ", got " + shown(n));
  else if (parsed == whole_number::out_of_range || value < min || value > max)
    fail(key, "must be from " + range + ", got " + shown(n));
  else
    return value;
  return std::nullopt;
}

result<YAML::Node>
parse_with_overrides(const std::string& text, const std::string& source,
                     const std::vector<std::string>& overrides,
                     const std::string& base_dir) {
  auto root = parse_yaml(text, source);
  if (!root)
    return root;
  try {
    if (!base_dir.empty())
      resolve_paths(*root, base_dir);
    for (const auto& item : overrides)
      if (auto ok = apply_override(*root, item, source); !ok)
        return ok.err();
  } catch (const YAML::Exception& e) {
    return error{errc::bad_config, source + ": " + e.what()};
  }
  return root;
}

namespace {

/// (section, key) of every key that names a file or a folder.
constexpr std::pair<std::string_view, std::string_view> path_keys[] = {
    {"model_configs", "path"},
    {"data_configs", "dataset_path"},
    {"dataset_kwargs", "train_features"},
    {"dataset_kwargs", "train_labels"},
    {"dataset_kwargs", "test_features"},
    {"dataset_kwargs", "test_labels"},
    {"train_configs", "storage_dir"},
    {"server_configs", "storage_dir"},
    {"server_configs", "save_global_model"},
    {"checkpoint", "dir"},
    {"grpc_configs", "server_certificate"},
    {"grpc_configs", "server_certificate_key"},
    {"grpc_configs", "client_certificate"},
    {"grpc_configs", "client_certificate_key"},
    {"grpc_configs", "root_certificate"},
    {"authenticator_args", "tokens_file"},
    {"authenticator_args", "auth_token_file"},
};

bool names_a_path(std::string_view parent, std::string_view key) {
  return std::any_of(
      std::begin(path_keys), std::end(path_keys),
      [&](const auto& k) { return k.first == parent && k.second == key; });
}

void resolve_under(YAML::Node node, std::string_view parent,
                   const std::filesystem::path& base, int depth) {
  if (!node.IsMap() || depth > 16)
    return;
  for (auto it = node.begin(); it != node.end(); ++it) {
    if (!it->first.IsScalar())
      continue;
    auto key = it->first.Scalar();
    auto value = it->second;
    if (value.IsMap()) {
      resolve_under(value, key, base, depth + 1);
      continue;
    }
    if (!value.IsScalar() || !names_a_path(parent, key))
      continue;
    const auto& text = value.Scalar();
    if (text.empty() || std::filesystem::path{text}.is_absolute())
      continue;
    auto resolved = (base / text).lexically_normal();
    if (!resolved.has_filename()) // "." and "dir/": the folder itself
      resolved = resolved.parent_path();
    value = resolved.string();
  }
}

} // namespace

void resolve_paths(YAML::Node root, const std::string& base_dir) {
  resolve_under(root, "", std::filesystem::path{base_dir}, 0);
}

std::string config_folder(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    return "";
  auto abs = std::filesystem::absolute(path, ec);
  return ec ? "" : abs.parent_path().lexically_normal().string();
}

std::string join_errors(const std::string& source,
                        const std::vector<std::string>& errors,
                        const std::vector<std::string>& overrides) {
  auto blame = [&](const std::string& e) {
    for (const auto& o : overrides) {
      auto key = o.substr(0, o.find('='));
      if (e.rfind(key + ":", 0) == 0 || e.rfind(key + ".", 0) == 0)
        return "--set " + e;
    }
    return source + ": " + e;
  };
  if (errors.size() == 1)
    return blame(errors.front());
  std::string msg = std::to_string(errors.size()) + " problems in the "
                                                    "configuration:";
  for (const auto& e : errors)
    msg += "\n  " + blame(e);
  return msg;
}

result<void> read_section_file(const std::string& path,
                               const std::vector<std::string>& overrides,
                               const std::function<void(section&)>& read) {
  std::vector<std::string> errors;
  auto text = read_yaml_file(path, "config file");
  if (!text)
    return text.err();
  auto root = parse_with_overrides(*text, path, overrides, config_folder(path));
  if (!root)
    return root.err();
  try {
    section s{*root, "", errors};
    read(s);
  } catch (const YAML::Exception& e) {
    return error{errc::bad_config, path + ": " + e.what()};
  }
  if (!errors.empty())
    return error{errc::bad_config, join_errors(path, errors, overrides)};
  return {};
}

} // namespace fedcaf::config_reader
