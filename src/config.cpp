// The yaml-cpp adapter: every YAML::Exception is caught here and becomes an
// error naming the file and the key path.

#include "fedcaf/config.hpp"

#include "fedcaf/aggregation_rule.hpp"
#include "fedcaf/client_id.hpp"
#include "fedcaf/install_layout.hpp"
#include "fedcaf/manifest.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <optional>
#include <set>
#include <sstream>
#include <type_traits>
#include <utility>

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

namespace fedcaf {

namespace {

/// A config word and the enum value it is parsed into.
template <class E> struct word {
  E value;
  const char* name;
};

constexpr word<model_kind> model_words[] = {
    {model_kind::cnn, "CNN"},
    {model_kind::torchscript, "torchscript"},
    {model_kind::safetensors, "safetensors"},
    {model_kind::synthetic, "synthetic"},
    {model_kind::llama, "llama"}};
constexpr word<trainer_kind> trainer_words[] = {
    {trainer_kind::vanilla, "VanillaTrainer"},
    {trainer_kind::dummy, "dummy"},
    {trainer_kind::python, "python"}};
constexpr word<model_storage> storage_words[] = {{model_storage::ram, "ram"},
                                                 {model_storage::disk, "disk"}};
constexpr word<dp_sgd_mode> dp_mode_words[] = {
    {dp_sgd_mode::none, "none"},
    {dp_sgd_mode::per_sample, "per_sample"},
    {dp_sgd_mode::ghost, "ghost"},
    {dp_sgd_mode::fused, "fused"}};
constexpr word<client_weighting> weighting_words[] = {
    {client_weighting::equal, "equal"},
    {client_weighting::sample_size, "sample_size"}};
constexpr word<staleness_kind> staleness_words[] = {
    {staleness_kind::constant, "constant"},
    {staleness_kind::polynomial, "polynomial"},
    {staleness_kind::hinge, "hinge"}};
constexpr word<partial_updates> partial_words[] = {
    {partial_updates::discard, "discard"}, {partial_updates::keep, "keep"}};
constexpr word<tensor_rule> tensor_rule_words[] = {
    {tensor_rule::average, "average"}, {tensor_rule::keep, "keep"}};
constexpr word<checkpoint_failure> checkpoint_failure_words[] = {
    {checkpoint_failure::stop, "stop"},
    {checkpoint_failure::go_on, "continue"}};
constexpr word<deadline_action> deadline_words[] = {
    {deadline_action::fail, "fail"}, {deadline_action::wait, "wait"}};

/// The name of `value` in `words` (elements with .value and .name).
template <class E, class W, size_t N>
std::string_view name_in(const W (&words)[N], E value) {
  for (const auto& w : words)
    if (w.value == value)
      return w.name;
  return "?";
}

} // namespace

std::string_view name_of(model_kind k) {
  return name_in(model_words, k);
}
std::string_view name_of(trainer_kind k) {
  return name_in(trainer_words, k);
}
std::string_view name_of(model_storage k) {
  return name_in(storage_words, k);
}
std::string_view name_of(dp_sgd_mode k) {
  return name_in(dp_mode_words, k);
}
std::string_view name_of(client_weighting k) {
  return name_in(weighting_words, k);
}
std::string_view name_of(staleness_kind k) {
  return name_in(staleness_words, k);
}
std::string_view name_of(partial_updates k) {
  return name_in(partial_words, k);
}
std::string_view name_of(deadline_action k) {
  return name_in(deadline_words, k);
}

std::chrono::milliseconds millis_of(double seconds) {
  return std::chrono::milliseconds{static_cast<int64_t>(seconds * 1000)};
}

namespace {

/// A YAML text larger than this is refused before it is parsed.
constexpr size_t max_yaml_bytes = 16 << 20;
/// Cap'n Proto's Data field holds under 512 MiB: the largest chunk, and the
/// largest model that travels as one message.
constexpr uint64_t capnp_data_limit = (1ull << 29) - 1;
/// Sane upper bounds for keys whose type allows far more than makes sense.
constexpr uint64_t max_clients = 1 << 20;
constexpr uint64_t max_threads = 1024;
constexpr uint64_t max_model_bytes = 1ull << 48;
constexpr uint64_t max_message_bytes = (1ull << 32) - 1;
constexpr uint64_t max_window = 1024;
/// dp_profile's model: each dimension at most 2^16, at most 256 layers (a
/// 2^16 x 2^16 float32 tensor is 16 GiB).
constexpr uint64_t max_dp_profile_dim = 1 << 16;
constexpr uint64_t max_dp_profile_layers = 256;
/// About 31 years: every duration converts to 64-bit milliseconds.
constexpr double max_seconds = 1e9;

/// Throws on the first anchor or alias of a YAML event stream. yaml-cpp
/// shares the node an alias names, so a few lines of nested aliases ("billion
/// laughs") become more nodes than any memory holds once walked or emitted.
class alias_refuser : public YAML::EventHandler {
public:
  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& at, YAML::anchor_t anchor) override {
    check(at, anchor);
  }
  void OnAlias(const YAML::Mark& at, YAML::anchor_t) override { refuse(at); }
  void OnScalar(const YAML::Mark& at, const std::string&, YAML::anchor_t anchor,
                const std::string&) override {
    check(at, anchor);
  }
  void OnSequenceStart(const YAML::Mark& at, const std::string&,
                       YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    check(at, anchor);
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& at, const std::string&,
                  YAML::anchor_t anchor, YAML::EmitterStyle::value) override {
    check(at, anchor);
  }
  void OnMapEnd() override {}
  void OnAnchor(const YAML::Mark& at, const std::string&) override {
    refuse(at);
  }

private:
  static void check(const YAML::Mark& at, YAML::anchor_t anchor) {
    if (anchor != YAML::NullAnchor)
      refuse(at);
  }
  [[noreturn]] static void refuse(const YAML::Mark& at) {
    throw YAML::ParserException(
        at, "YAML anchors and aliases (&name, *name, <<: *name) are not "
            "allowed in fedcaf configs: write the values out");
  }
};

/// Parses the first document of `text`. Throws YAML::Exception iff it is not
/// YAML, is larger than max_yaml_bytes, or uses an anchor or an alias (those
/// are refused from the event stream, before any node is built).
YAML::Node load_yaml(const std::string& text) {
  if (text.size() > max_yaml_bytes)
    throw YAML::Exception(YAML::Mark::null_mark(),
                          "larger than " + std::to_string(max_yaml_bytes) +
                              " bytes (" + std::to_string(text.size()) + ")");
  std::istringstream in{text};
  YAML::Parser parser{in};
  alias_refuser refuser;
  parser.HandleNextDocument(refuser);
  return YAML::Load(text);
}

/// Returns the text of the file `path` (a `what`, e.g. "config file"), or an
/// error naming it iff it cannot be opened or holds more than max_yaml_bytes.
/// Reads at most max_yaml_bytes + 64 KiB, whatever the file's size.
result<std::string> read_yaml_file(const std::string& path, const char* what) {
  std::ifstream in{path, std::ios::binary};
  if (!in)
    return error{errc::bad_config, path + ": cannot open the " + what};
  std::string text;
  std::array<char, 64 << 10> block;
  while (in.read(block.data(), block.size()) || in.gcount() > 0) {
    text.append(block.data(), static_cast<size_t>(in.gcount()));
    if (text.size() > max_yaml_bytes)
      return error{errc::bad_config,
                   path + ": the " + what + " is larger than " +
                       std::to_string(max_yaml_bytes) + " bytes"};
  }
  return text;
}

/// How a scalar reads as a whole number.
enum class whole_number { ok, not_whole, out_of_range };

/// Parses "[-+]?[0-9]+" (or "0x" and hex digits) into `out`, in 64 bits:
/// a negative number, or one past 2^64 - 1, is out_of_range.
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

/// Returns "'value'" for a scalar, "a collection" otherwise.
std::string shown(const YAML::Node& n) {
  return n.IsScalar() ? "'" + n.Scalar() + "'" : std::string{"a collection"};
}

/// Reads one YAML mapping, records what was read, and reports unknown keys,
/// wrong types and bad values as "path.to.key: what is wrong".
class section {
public:
  section(YAML::Node node, std::string path, std::vector<std::string>& errors,
          std::vector<std::string>* ignored = nullptr)
      : node_(std::move(node)), path_(std::move(path)), errors_(errors),
        ignored_(ignored) {
    if (node_ && !node_.IsNull() && !node_.IsMap())
      fail("", "expected a mapping");
  }

  section(const section&) = delete;

  ~section() {
    if (!node_ || !node_.IsMap())
      return;
    for (const auto& kv : node_) {
      auto key = kv.first.as<std::string>("");
      if (!seen_.count(key))
        fail(key, "unknown key");
    }
  }

  bool has(const char* key) {
    seen_.insert(key);
    return node_ && node_.IsMap() && node_[key] && !node_[key].IsNull();
  }

  section child(const char* key) {
    seen_.insert(key);
    YAML::Node sub = node_ && node_.IsMap() ? node_[key] : YAML::Node{};
    return section{sub, join(key), errors_, ignored_};
  }

  /// The keys of this mapping, in order (each is known once read).
  std::vector<std::string> keys() const {
    std::vector<std::string> out;
    if (node_ && node_.IsMap())
      for (const auto& kv : node_)
        out.push_back(kv.first.as<std::string>(""));
    return out;
  }

  /// Where ignore() records the keys it found (null: nowhere).
  void track_ignored(std::vector<std::string>* ignored) { ignored_ = ignored; }

  void get(const char* key, std::string& out) {
    if (!has(key))
      return;
    auto n = node_[key];
    if (!n.IsScalar())
      return fail(key, "expected a string");
    out = n.Scalar();
  }

  void get(const char* key, bool& out) {
    if (!has(key))
      return;
    try {
      out = node_[key].as<bool>();
    } catch (const YAML::Exception&) {
      fail(key, "expected true or false, got " + text(key));
    }
  }

  /// Reads a finite number (.inf and .nan are refused).
  void get(const char* key, double& out) {
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

  /// Reads a whole number in [min, max] (max at most what Unsigned holds).
  /// The text is read into 64 bits and range-checked before it is narrowed,
  /// so no value wraps.
  template <class Unsigned>
  void get(const char* key, Unsigned& out, uint64_t min = 0,
           uint64_t max = std::numeric_limits<Unsigned>::max()) {
    static_assert(std::is_unsigned_v<Unsigned>);
    if (!has(key))
      return;
    max = std::min<uint64_t>(max, std::numeric_limits<Unsigned>::max());
    if (auto value = whole(key, node_[key], min, max))
      out = static_cast<Unsigned>(*value);
  }

  /// Reads a non-empty list of strings or booleans.
  template <class T> void get_list(const char* key, std::vector<T>& out) {
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
    if (!has(key))
      return;
    auto n = node_[key];
    if (!n.IsSequence() || n.size() == 0)
      return fail(key, "expected a non-empty list");
    max = std::min<uint64_t>(max, std::numeric_limits<Unsigned>::max());
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
               std::vector<std::pair<std::string, std::string>>& out) {
    if (!has(key))
      return;
    auto n = node_[key];
    if (!n.IsMap())
      return fail(key, "expected a mapping of names to strings");
    read_pairs(n, out, key);
  }

  void read_pairs(const YAML::Node& n,
                  std::vector<std::pair<std::string, std::string>>& out,
                  const std::string& key) {
    for (const auto& kv : n) {
      if (!kv.second.IsScalar() || kv.second.Scalar().empty())
        return fail(key, "the value of '" + kv.first.as<std::string>("") +
                             "' must be a non-empty string");
      out.emplace_back(kv.first.as<std::string>(""), kv.second.Scalar());
    }
  }

  void one_of(const char* key, std::string& out,
              std::initializer_list<const char*> allowed) {
    get(key, out);
    std::string names;
    for (const auto* a : allowed) {
      if (out == a)
        return;
      names += names.empty() ? a : std::string{", "} + a;
    }
    fail(key, "must be one of " + names + ", got '" + out + "'");
  }

  /// As one_of for a word, parsed into its enum (`out` keeps its default
  /// where the key is absent or wrong).
  template <class E, class W, size_t N>
  void one_of(const char* key, E& out, const W (&words)[N]) {
    std::string name{name_in(words, out)};
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

  void positive(const char* key, double& out) {
    get(key, out);
    if (!(out > 0))
      fail(key, "must be greater than 0");
  }

  /// Reads a duration in seconds: above 0 (or 0 too when `zero_ok`) and at
  /// most max_seconds.
  void seconds(const char* key, double& out, bool zero_ok = false) {
    get(key, out);
    if (zero_ok ? !(out >= 0) : !(out > 0))
      fail(key,
           zero_ok ? "must be 0 (none) or positive" : "must be greater than 0");
    else if (out > max_seconds)
      fail(key, "must be at most 1e9 seconds");
  }

  /// Marks `key` as belonging to the user's own code (a Python client's
  /// data_configs): accepted unread, and not warned about.
  void accept(const char* key) { seen_.insert(key); }

  /// Returns true iff the mapping holds the key path `keys` (no key is
  /// marked as read).
  bool holds(std::initializer_list<const char*> keys) const {
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

  /// Marks keys accepted for compatibility with APPFL configs but unused.
  /// Keys of APPFL's that fedcaf does not use: accepted, and recorded for
  /// the warning that lists them.
  void ignore(std::initializer_list<const char*> keys) {
    for (const auto* k : keys) {
      seen_.insert(k);
      if (ignored_ && node_ && node_.IsMap() && node_[k])
        ignored_->push_back(join(k));
    }
  }

  void fail(const std::string& key, const std::string& what) {
    errors_.push_back(join(key) + ": " + what);
  }

  /// Returns the whole key path of `key` ("a.b.key"), as --set names it.
  std::string key_path(const std::string& key) const { return join(key); }

private:
  std::string join(const std::string& key) const {
    if (key.empty())
      return path_;
    return path_.empty() ? key : path_ + "." + key;
  }

  std::string text(const char* key) const { return shown(node_[key]); }

  /// Returns the whole number `n` holds iff it lies in [min, max]; records
  /// an error naming `key` and the range otherwise.
  std::optional<uint64_t> whole(const std::string& key, const YAML::Node& n,
                                uint64_t min, uint64_t max) {
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

  YAML::Node node_;
  std::string path_;
  std::vector<std::string>& errors_;
  std::vector<std::string>* ignored_;
  std::set<std::string> seen_;
};

void read(section s, optim_config& o) {
  s.get("lr", o.lr);
  s.get("momentum", o.momentum);
  s.get("weight_decay", o.weight_decay);
  if (!(o.lr > 0))
    s.fail("lr", "must be greater than 0");
}

void read(section s, dp_sgd_config& d) {
  s.one_of("mode", d.mode, dp_mode_words);
  s.get("noise_multiplier", d.noise_multiplier);
  if (!(d.noise_multiplier >= 0))
    s.fail("noise_multiplier", "must be 0 (no noise) or positive");
  s.positive("max_grad_norm", d.max_grad_norm);
  s.get("poisson_sampling", d.poisson_sampling);
  s.get("delta", d.delta);
  if (!(d.delta > 0 && d.delta < 1))
    s.fail("delta", "must lie strictly between 0 and 1");
}

constexpr const char* python_file_refusal =
    "names a Python file, which fedcaf's C++ trainer does not run: for a "
    "model, loss or dataset in Python use the Python client (`import "
    "fedcaf`, see examples/python/fashion_mnist.py); for no Python on "
    "clients export the model with torch.jit.script "
    "(examples/python/export_torchscript.py) and set model_configs.name: "
    "torchscript, data_configs.dataset_name: tensors and "
    "train_configs.loss_fn";

#ifdef FEDCAF_TORCH_HAS_CUDA
constexpr bool torch_has_cuda = true;
#else
constexpr bool torch_has_cuda = false;
#endif

/// Reads a device key: cpu, or cuda iff this build's LibTorch has CUDA.
void read_device(section& s, std::string& device) {
  s.one_of("device", device, {"cpu", "cuda"});
  if (device == "cuda" && !torch_has_cuda)
    s.fail("device",
           "cuda: the LibTorch this fedcaf was built with has no CUDA "
           "(Debian's has none); use cpu, or the Python client with a "
           "PyTorch that has CUDA (`import fedcaf`, see "
           "examples/python/fashion_mnist.py)");
}

/// Reads train_configs.loss_fn; APPFL's class names become fedcaf's.
void read_loss(section& s, std::string& loss) {
  constexpr std::pair<const char*, const char*> appfl_names[] = {
      {"CrossEntropyLoss", "cross_entropy"},
      {"NLLLoss", "nll"},
      {"MSELoss", "mse"},
      {"BCEWithLogitsLoss", "bce_with_logits"}};
  s.one_of("loss_fn", loss,
           {"cross_entropy", "nll", "mse", "bce_with_logits",
            "CrossEntropyLoss", "NLLLoss", "MSELoss", "BCEWithLogitsLoss"});
  for (auto [appfl, name] : appfl_names)
    if (loss == appfl)
      loss = name;
}

/// APPFL's keys that name Python files (a model, a loss, a metric, a
/// dataset loader): fedcaf's trainer runs no Python, so each is refused
/// rather than ignored.
void refuse_python_file(section& s, const char* key) {
  if (!s.has(key))
    return;
  s.fail(key, python_file_refusal);
}

/// `path` made absolute against the working directory, as it is opened.
std::string absolute_of(const std::string& path) {
  std::error_code ec;
  auto abs = std::filesystem::absolute(path, ec);
  return ec ? path : abs.lexically_normal().string();
}

/// Records that `key` names `path`, which is not a file: the message gives
/// the absolute path tried and `how` to write it ("" where no example
/// does), or to name another file with --set.
void fail_missing_file(section& s, const char* key, const std::string& path,
                       const std::string& how = "") {
  auto abs = absolute_of(path);
  std::string why = "'" + abs + "' is not a file";
  if (abs != path)
    why += " (a relative path is read from the working directory)";
  auto other = "name another with --set " + s.key_path(key) + "=FILE";
  s.fail(key, why + "; " + (how.empty() ? other : how + ", or " + other));
}

/// How the examples write a model file of `kind` at `path`; "" where none
/// does (the built-in CNN's weights come from fedcaf itself).
std::string model_writer(model_kind kind, const std::string& path) {
  if (kind == model_kind::torchscript)
    return "write it with '" +
           example_command("export_torchscript.py", "-o " + path) + "'";
  if (kind == model_kind::safetensors)
    return "write your model's initial weights there "
           "(fedcaf.save_safetensors), as the examples do with '" +
           example_command("fashion_mnist.py", "--init " + path) +
           "' (a CNN) or '" +
           example_command("causal_lm_bf16.py", "--init " + path) +
           "' (a bfloat16 transformer)";
  return "";
}

/// APPFL's DP switches. use_dp with dp_mechanism: opacus is DP-SGD (Opacus
/// clips each sample's gradient and adds Gaussian noise), read as fedcaf's
/// dp with dp_config's noise_multiplier and max_grad_norm (mode fused: the
/// modes differ in memory, not in the gradients). APPFL's output
/// perturbation (dp_mechanism laplace, its default, or gaussian) has no
/// counterpart and is refused: a privacy switch is never dropped. With
/// use_dp false the keys are ignored.
void read_appfl_dp(section& s, dp_sgd_config& dp) {
  bool use_dp = false;
  s.get("use_dp", use_dp);
  if (!use_dp)
    return s.ignore({"use_dp", "dp_mechanism", "dp_config"});
  std::string mechanism = "laplace"; // APPFL's default
  s.get("dp_mechanism", mechanism);
  if (mechanism != "opacus")
    return s.fail("use_dp",
                  "APPFL's '" + mechanism +
                      "' mechanism perturbs the trained model, which fedcaf "
                      "does not do: use dp_mechanism: opacus or "
                      "train_configs.dp (DP-SGD), or server_configs."
                      "aggregator_kwargs.dp_fedavg (user-level DP)");
  if (dp.mode != dp_sgd_mode::none)
    return s.fail("use_dp", "give train_configs.dp or APPFL's use_dp, not "
                            "both");
  read(s.child("dp_config"), dp); // noise_multiplier, max_grad_norm
  if (dp.mode == dp_sgd_mode::none)
    dp.mode = dp_sgd_mode::fused;
}

void read(section s, train_config& t) {
  s.one_of("trainer", t.trainer, trainer_words);
  s.get("add", t.add);
  s.get("add_by_index", t.add_by_index);
  s.get("noise", t.noise);
  if (!(t.noise >= 0 && t.noise <= 1e30))
    s.fail("noise", "must be 0 (off) or a positive finite number");
  s.get("federated_evaluation", t.federated_evaluation);
  s.get("proximal_mu", t.proximal_mu);
  if (!(t.proximal_mu >= 0))
    s.fail("proximal_mu", "must be 0 (off) or positive");
  s.get("declare_update_norm", t.declare_update_norm);
  s.get("update_clip_norm", t.update_clip_norm);
  if (t.update_clip_norm < 0)
    s.fail("update_clip_norm", "must be 0 (none) or positive");
  s.one_of("storage", t.storage, storage_words);
  s.get("storage_dir", t.storage_dir);
  s.one_of("mode", t.mode, {"epoch", "step"});
  s.get("num_local_epochs", t.num_local_epochs, 1);
  s.get("num_local_steps", t.num_local_steps, 1);
  s.one_of("optim", t.optim.name, {"SGD", "Adam"});
  read(s.child("optim_args"), t.optim);
  s.get("train_batch_size", t.train_batch_size, 1);
  s.get("val_batch_size", t.val_batch_size, 1);
  read_loss(s, t.loss_fn);
  read_device(s, t.device);
  s.get("num_threads", t.num_threads, 0, max_threads);
  read(s.child("dp"), t.dp);
  read_appfl_dp(s, t.dp);
  refuse_python_file(s, "loss_fn_path");
  refuse_python_file(s, "metric_path");
  // APPFL's validation, metric name, output perturbation's epsilon, batch
  // gradient clipping and loader shuffling: fedcaf evaluates on the server
  // (or the clients, federated_evaluation) with accuracy and loss, and
  // always shuffles training data. loss_fn_name names a class in the
  // loss_fn_path file; without that file the loss is loss_fn.
  s.ignore({"logging_output_dirname", "logging_output_filename",
            "do_validation", "do_pre_validation", "metric_name", "epsilon",
            "clip_grad", "clip_value", "clip_norm", "train_data_shuffle",
            "val_data_shuffle", "loss_fn_name"});
}

/// Reads model_configs; `opens_file`: this process reads model_configs.path
/// (the server, and clients that train with fedcaf's trainers), so the file
/// must exist here.
void read(section s, model_config& m, bool opens_file) {
  auto key = s.has("name") ? "name" : "model_name";
  s.one_of(key, m.model_name, model_words);
  s.one_of("preset", m.preset, {"llama-3.2-1b", "llama-3.1-8b", "llama-tiny"});
  s.get("path", m.path);
  if (!m.path.empty() && opens_file &&
      !std::filesystem::is_regular_file(m.path))
    fail_missing_file(s, "path", m.path,
                      model_writer(m.model_name, absolute_of(m.path)));
  else if (m.model_name == model_kind::safetensors && m.path.empty())
    s.fail("path", "is required for a safetensors model: the file of its "
                   "initial weights, whose tensors are the model's layout "
                   "(fedcaf.save_safetensors(model.state_dict(), path))");
  else if (m.model_name == model_kind::torchscript && m.path.empty())
    s.fail("path", "is required for a torchscript model: the file that "
                   "torch.jit.script(model).save(path) wrote (see "
                   "examples/python/export_torchscript.py)");
  s.get("seed", m.seed);
  s.get("num_tensors", m.num_tensors, 1, max_model_tensors);
  s.get("total_bytes", m.total_bytes, 64, max_model_bytes);
  s.one_of("dtype", m.dtype, {"float32", "bfloat16", "float16"});
  if (m.total_bytes / 4 < m.num_tensors)
    s.fail("total_bytes", "too small for num_tensors tensors");
  auto kwargs = s.child("model_kwargs");
  kwargs.get("num_channel", m.num_channel, 1, 1024);
  kwargs.get("num_classes", m.num_classes, 2, 1 << 16);
  kwargs.get("num_pixel", m.num_pixel, 28);
  if (m.num_pixel != 28)
    kwargs.fail("num_pixel", "the CNN is built for 28 x 28 images");
  refuse_python_file(s, "model_path");
}

void read(section s, compression_config& c) {
  std::string method = "none", direction = "up";
  s.one_of("method", method, {"none", "fp16", "bf16", "int8", "zfp"});
  s.one_of("direction", direction, {"up", "down", "both"});
  c.method = parse_compression(method).value_or(compression_method::none);
  bool on = c.method != compression_method::none;
  c.up = on && direction != "down";
  c.down = on && direction != "up";
  s.positive("zfp_tolerance", c.zfp_tolerance);
  s.get("error_feedback", c.error_feedback);
}

/// APPFL's compressor_configs, read as fedcaf's compression where they
/// mean the same. enable_compression false: none (the other keys, used only
/// when it is on, are ignored). On, with an error-bounded lossy compressor
/// (SZ2, SZ3, SZx or ZFP) and error_bounding_mode ABS: zfp on uploads (APPFL
/// compresses uploads only), every value within zfp_tolerance = error_bound
/// of what the client sent, so without error feedback (which moves a value
/// by the last round's loss too). APPFL's lossless stage, flat dtype and
/// param_cutoff have no counterpart (zfp encodes every float tensor): they
/// are ignored. A REL bound (error_bound times each tensor's value range)
/// has none either: the block is then ignored whole, and nothing is
/// compressed.
void read_appfl_compressor(section s, compression_config& c) {
  bool enabled = false;
  std::string lossy = "SZ2Compressor", bounding;
  double bound = 0;
  s.get("enable_compression", enabled);
  s.get("error_bounding_mode", bounding);
  s.get("error_bound", bound);
  if (enabled)
    s.one_of("lossy_compressor", lossy,
             {"SZ2Compressor", "SZ3Compressor", "SZxCompressor",
              "ZFPCompressor", "SZ2", "SZ3", "SZx", "ZFP"});
  if (enabled && bounding != "ABS" && bounding != "REL")
    s.fail("error_bounding_mode", "must be ABS or REL, got '" + bounding + "'");
  if (!enabled || bounding != "ABS") {
    if (enabled)
      s.ignore({"enable_compression"});
    return s.ignore({"lossy_compressor", "lossless_compressor",
                     "error_bounding_mode", "error_bound", "flat_model_dtype",
                     "param_cutoff"});
  }
  if (!(bound > 0))
    return s.fail("error_bound", "must be greater than 0");
  c.method = compression_method::zfp;
  c.up = true;
  c.down = false;
  c.zfp_tolerance = bound;
  c.error_feedback = false;
  s.ignore({"lossless_compressor", "flat_model_dtype", "param_cutoff"});
}

/// Reads client_configs: the server's (`on_server`: from its own file), or
/// as a client received them. A Python client never opens
/// model_configs.path (its model's layout comes with the model), so the
/// server's file need not exist where it runs.
void read(section s, client_configs& c, bool on_server) {
  read(s.child("train_configs"), c.train);
  read(s.child("model_configs"), c.model,
       on_server || c.train.trainer != trainer_kind::python);
  {
    auto comm = s.child("comm_configs");
    read(comm.child("compression"), c.compression);
    if (comm.has("compressor_configs") && comm.has("compression"))
      comm.fail("compressor_configs", "give compression (fedcaf's) or "
                                      "compressor_configs (APPFL's), not both");
    else if (comm.has("compressor_configs"))
      read_appfl_compressor(comm.child("compressor_configs"), c.compression);
  }
  // APPFL's data readiness report: fedcaf makes none.
  s.ignore({"data_readiness_configs"});
  if (c.train.storage == model_storage::disk &&
      c.train.trainer != trainer_kind::dummy)
    s.fail("train_configs.storage", "disk storage needs trainer: dummy");
  if (c.train.dp.mode != dp_sgd_mode::none &&
      c.train.trainer != trainer_kind::vanilla)
    s.fail("train_configs.dp.mode",
           "DP-SGD needs the LibTorch trainer (VanillaTrainer)");
  bool torch_model = c.model.model_name == model_kind::cnn ||
                     c.model.model_name == model_kind::torchscript;
  if (c.model.model_name == model_kind::safetensors &&
      c.train.trainer != trainer_kind::python &&
      c.train.trainer != trainer_kind::dummy)
    s.fail("train_configs.trainer",
           "a safetensors model is trained by the clients' own Python code: "
           "use trainer: python and the Python client (import fedcaf; see "
           "examples/python/fashion_mnist.py), or model_configs.name: "
           "torchscript for fedcaf's own trainer");
  else if (!torch_model && c.train.trainer != trainer_kind::dummy &&
           c.train.trainer != trainer_kind::python)
    s.fail("train_configs.trainer",
           "a " + std::string{name_of(c.model.model_name)} +
               " model has no data to train on "
               "here; use trainer: dummy");
  if (c.train.dp.mode != dp_sgd_mode::none &&
      c.model.model_name != model_kind::cnn)
    s.fail("train_configs.dp.mode", "DP-SGD needs the built-in CNN");
}

/// The file of a tensors-dataset key: "x.safetensors:NAME" names x.safetensors.
std::string tensor_file_of(const std::string& value) {
  auto at = value.rfind(".safetensors:");
  return at == std::string::npos
             ? value
             : value.substr(0, at + sizeof ".safetensors" - 1);
}

/// How examples/python/export_tensors.py writes tensor file `path`
/// (Fashion-MNIST as DIR/{train,test}_{features,labels}.npy); "" for a
/// file of another name.
std::string tensor_writer(const std::string& path) {
  auto abs = std::filesystem::path{absolute_of(path)};
  auto name = abs.filename().string();
  for (const char* known : {"train_features.npy", "train_labels.npy",
                            "test_features.npy", "test_labels.npy"})
    if (name == known)
      return "write it with '" +
             example_command("export_tensors.py",
                             "-o " + abs.parent_path().string()) +
             "' (Fashion-MNIST as .npy files)";
  return "";
}

/// Checks a tensors-dataset file key: required iff `needed`, and its file
/// must exist.
void check_tensor_file(section& kwargs, const char* key,
                       const std::string& value, bool needed) {
  auto file = tensor_file_of(value);
  if (value.empty() && needed)
    kwargs.fail(key, "is required with dataset_name: tensors (a .npy or "
                     ".safetensors file)");
  else if (!value.empty() && !std::filesystem::is_regular_file(file))
    fail_missing_file(kwargs, key, file, tensor_writer(file));
}

void read_tensor_files(section& kwargs, data_config& d) {
  const std::pair<const char*, std::string*> keys[] = {
      {"train_features", &d.train_features},
      {"train_labels", &d.train_labels},
      {"test_features", &d.test_features},
      {"test_labels", &d.test_labels}};
  for (auto [key, value] : keys)
    kwargs.get(key, *value);
  bool tensors = d.dataset_name == "tensors";
  bool has_test = !d.test_features.empty() || !d.test_labels.empty();
  for (auto [key, value] : keys) {
    if (!tensors && !value->empty())
      kwargs.fail(key, "tensor files need dataset_name: tensors");
    else if (tensors)
      check_tensor_file(kwargs, key, *value,
                        std::string_view{key}.starts_with("train") || has_test);
  }
}

void read_dataset_path(section& s, data_config& d) {
  s.get("dataset_path", d.dataset_path);
  namespace fs = std::filesystem;
  if (d.dataset_path.ends_with(".py"))
    s.fail("dataset_path", python_file_refusal);
  else if (d.dataset_name == "FashionMNIST" &&
           !fs::exists(fs::path{d.dataset_path} /
                       "t10k-images-idx3-ubyte.gz") &&
           !fs::exists(fs::path{d.dataset_path} / "t10k-images-idx3-ubyte"))
    s.fail("dataset_path", "'" + d.dataset_path +
                               "' holds no Fashion-MNIST IDX files (install "
                               "dataset-fashion-mnist or point it elsewhere)");
}

void read(section s, data_config& d, bool needs_partition) {
  s.one_of("dataset_name", d.dataset_name, {"FashionMNIST", "tensors"});
  read_dataset_path(s, d);
  auto kwargs = s.child("dataset_kwargs");
  read_tensor_files(kwargs, d);
  kwargs.get("num_clients", d.num_clients, 1, max_clients);
  kwargs.get("client_id", d.client_index, 0, max_clients - 1);
  kwargs.one_of("partition_strategy", d.partition_strategy,
                {"iid", "class_noniid", "dirichlet_noniid"});
  kwargs.get("classes_per_client", d.classes_per_client, 1, 256); // uint8
  kwargs.positive("dirichlet_alpha", d.dirichlet_alpha);
  kwargs.get("seed", d.seed);
  // APPFL's plot of the partition (a PDF): fedcaf draws none.
  kwargs.ignore({"visualization", "output_dirname", "output_filename"});
  if (needs_partition && !kwargs.has("num_clients"))
    kwargs.fail("num_clients",
                "is required: fedcaf client trains on its partition "
                "(dataset_kwargs.client_id, from 0) of the data set split "
                "num_clients ways; a Python client (import fedcaf) brings its "
                "own data and needs no data_configs");
  else if (needs_partition && d.client_index >= d.num_clients)
    kwargs.fail("client_id", "must be below num_clients (" +
                                 std::to_string(d.num_clients) + ")");
  refuse_python_file(s, "dataset_path_py");
}

/// Reads a path key that must name a readable file when `needed`.
void get_file(section& s, const char* key, std::string& out, bool needed,
              const char* why) {
  s.get(key, out);
  if (!needed)
    return;
  if (out.empty())
    s.fail(key, std::string{"is required "} + why);
  else if (!std::filesystem::is_regular_file(out))
    s.fail(key, "'" + out + "' is not a file");
}

/// Reads the first line of a file holding a secret.
std::string read_secret(const std::string& path) {
  std::ifstream in{path};
  std::string line;
  std::getline(in, line);
  return line;
}

void read_tls(section& grpc, comm_config& c, bool server_side) {
  grpc.get("use_ssl", c.use_ssl);
  const char* why = "with use_ssl: true (fedcaf never falls back to "
                    "unauthenticated TLS); make one with deploy/make-certs.sh";
  const char* cert = server_side ? "server_certificate" : "client_certificate";
  const char* key =
      server_side ? "server_certificate_key" : "client_certificate_key";
  get_file(grpc, cert, c.tls.certificate, c.use_ssl, why);
  get_file(grpc, key, c.tls.certificate_key, c.use_ssl, why);
  get_file(grpc, "root_certificate", c.tls.root_certificate, c.use_ssl, why);
}

/// Reads a YAML mapping of client id to token from `file`; errors name it.
void read_tokens_file(section& args, const std::string& file,
                      std::vector<std::pair<std::string, std::string>>& out) {
  if (!std::filesystem::is_regular_file(file))
    return args.fail("tokens_file", "'" + file + "' is not a file");
  auto text = read_yaml_file(file, "tokens file");
  if (!text)
    return args.fail("tokens_file", text.err().message);
  try {
    auto tokens = load_yaml(*text);
    if (!tokens.IsMap())
      return args.fail("tokens_file",
                       file + ": expected a mapping of client ids to tokens");
    args.read_pairs(tokens, out, "tokens_file");
  } catch (const YAML::Exception& e) {
    args.fail("tokens_file", file + ": " + e.what());
  }
}

void read_auth(section& grpc, comm_config& c, bool server_side) {
  grpc.get("use_authenticator", c.auth.enabled);
  std::string name = "NaiveAuthenticator";
  grpc.one_of("authenticator", name, {"NaiveAuthenticator"});
  auto args = grpc.child("authenticator_args");
  if (server_side) {
    args.get_map("tokens", c.auth.tokens);
    std::string file;
    args.get("tokens_file", file);
    if (!file.empty())
      read_tokens_file(args, file, c.auth.tokens);
    if (c.auth.enabled && c.auth.tokens.empty())
      args.fail("tokens", "use_authenticator needs a token per client "
                          "(tokens or tokens_file)");
    return;
  }
  args.get("auth_token", c.auth.token);
  std::string file;
  args.get("auth_token_file", file);
  if (!file.empty()) {
    if (!std::filesystem::is_regular_file(file))
      return args.fail("auth_token_file", "'" + file + "' is not a file");
    c.auth.token = read_secret(file);
  }
  if (c.auth.enabled && c.auth.token.empty())
    args.fail("auth_token", "use_authenticator needs auth_token or "
                            "auth_token_file");
}

void read(section s, comm_config& c, bool server_side) {
  auto grpc = s.child("grpc_configs");
  grpc.get("server_uri", c.server_uri);
  if (c.server_uri.rfind(':') == std::string::npos)
    grpc.fail("server_uri", "expected host:port, got '" + c.server_uri + "'");
  grpc.get("max_message_size", c.max_message_size, 1024, max_message_bytes);
  grpc.get("use_model_chunking", c.use_model_chunking);
  read_tls(grpc, c, server_side);
  read_auth(grpc, c, server_side);
  auto stream = s.child("stream_configs");
  // Unset, a chunk is 1 MiB or what max_message_size leaves room for
  // (APPFL's examples set 1 MiB messages).
  if (c.max_message_size >= 1024 + 64)
    c.stream.chunk_bytes =
        std::min<uint64_t>(c.stream.chunk_bytes, c.max_message_size - 1024);
  stream.get("chunk_bytes", c.stream.chunk_bytes, 64, capnp_data_limit);
  stream.get("window", c.stream.window, 1, max_window);
  stream.seconds("idle_timeout_s", c.stream.idle_timeout_s);
  stream.get("min_rate_bytes_per_s", c.stream.min_rate_bytes_per_s);
  if (!(c.stream.min_rate_bytes_per_s >= 0))
    stream.fail("min_rate_bytes_per_s", "must be 0 (none) or positive");
  stream.seconds("rate_window_s", c.stream.rate_window_s);
  stream.seconds("heartbeat_s", c.stream.heartbeat_s);
  stream.seconds("connection_timeout_s", c.stream.connection_timeout_s);
  if (c.stream.connection_timeout_s <= c.stream.heartbeat_s)
    stream.fail("connection_timeout_s", "must exceed heartbeat_s");
  // A client waits out a server's restart (process start, model and
  // checkpoint loaded: minutes for a large model); a server drops a lost
  // client after 30 s, so that its round goes on.
  if (!server_side)
    c.stream.reconnect_grace_s = client_reconnect_grace_s;
  stream.seconds("reconnect_grace_s", c.stream.reconnect_grace_s);
  stream.seconds("handshake_timeout_s", c.stream.handshake_timeout_s);
  stream.get("max_unauthenticated", c.stream.max_unauthenticated, 1, 65535);
  if (c.use_model_chunking && c.stream.chunk_bytes + 1024 > c.max_message_size)
    stream.fail("chunk_bytes",
                "a chunk of " + std::to_string(c.stream.chunk_bytes) +
                    " bytes plus its header does not fit max_message_size (" +
                    std::to_string(c.max_message_size) + ")");
}

/// eta when aggregator_kwargs names none: the step that reaches 0.85 or more
/// in the default 3-round run (configs/simulate.yaml), on the grid of the
/// papers (see rule_config::server_learning_rate).
double default_server_learning_rate(server_rule rule) {
  if (rule == server_rule::fedadam || rule == server_rule::fedyogi)
    return 0.1;
  return 1.0; // FedAdagrad, FedAvgM, FedBuff (FedAvg, FedAsync: no eta)
}

void read(section s, rule_config& r, server_rule rule) {
  const std::string aggregator = aggregator_name(rule);
  s.one_of("client_weights_mode", r.client_weights_mode, weighting_words);
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
  s.one_of("staleness_fn", r.staleness_fn, staleness_words);
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
  s.one_of("partial_updates", r.partial_updates, partial_words);
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
  for (const auto& pattern : rules.keys()) {
    auto rule = tensor_rule::average;
    rules.one_of(pattern.c_str(), rule, tensor_rule_words);
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

void read_sampling(section& kw, server_config& sc) {
  kw.get("clients_per_round", sc.clients_per_round, 1, max_clients);
  if (kw.has("client_fraction")) {
    double fraction = 0;
    kw.get("client_fraction", fraction);
    if (!(fraction > 0 && fraction <= 1))
      kw.fail("client_fraction", "must be in (0, 1]");
    else if (kw.has("clients_per_round"))
      kw.fail("client_fraction", "give clients_per_round or client_fraction, "
                                 "not both");
    else
      sc.clients_per_round = std::max<uint32_t>(
          1, static_cast<uint32_t>(fraction * sc.num_clients + 0.5));
  }
  if (sc.clients_per_round > sc.num_clients)
    kw.fail("clients_per_round", "must not exceed num_clients (" +
                                     std::to_string(sc.num_clients) + ")");
  kw.get("seed", sc.sampling_seed);
}

void read(section s, secure_aggregation_config& a) {
  s.get("enabled", a.enabled);
  s.get("threshold", a.threshold);
  s.positive("clipping_range", a.clipping_range);
  s.get("quantization_bits", a.quantization_bits);
  if (a.quantization_bits < 1 || a.quantization_bits > 31)
    s.fail("quantization_bits",
           "must be from 1 to 31, got " + std::to_string(a.quantization_bits));
  s.get("neighbours", a.neighbours);
}

/// Refuses what secure aggregation cannot run with.
void check_secure_aggregation(section& s, const server_config& sc) {
  const auto& a = sc.secure_aggregation;
  if (!a.enabled)
    return;
  auto fail = [&](const std::string& why) {
    s.fail("secure_aggregation", why);
  };
  if (sc.scheduler != "SyncScheduler")
    fail("runs with SyncScheduler only (a sum needs a round)");
  if (sc.memory_mode != memory_mode::ram &&
      sc.aggregator != server_rule::fedavg)
    fail(std::string{"in memory_mode "} + to_string(sc.memory_mode) +
         " averages with FedAvgAggregator only (the masked sum waits where "
         "the old model was, which " +
         aggregator_name(sc.aggregator) + " needs): use memory_mode ram");
  if (sc.rule.partial_updates == partial_updates::keep)
    fail("cannot keep a partial masked update (partial_updates: keep)");
  if (is_robust(sc.aggregator))
    fail(std::string{aggregator_name(sc.aggregator)} +
         " must see each update's values to order them; "
         "masked updates hide them");
  if (sc.rule.max_update_norm > 0 || sc.rule.norm_bound > 0)
    fail("cannot measure a masked update: drop "
         "aggregator_kwargs.max_update_norm and norm_bound");
  if (sc.on_deadline == deadline_action::wait)
    fail("ends its keys phase at round_deadline_s: scheduler_kwargs."
         "on_deadline: wait does not apply");
  auto n = sc.clients_per_round ? sc.clients_per_round : sc.num_clients;
  uint64_t top = (uint64_t{1} << a.quantization_bits) - 1;
  if (n * top > 0xffffffffull)
    fail(std::to_string(n) + " clients of " +
         std::to_string(a.quantization_bits) +
         " bits each overflow the 32-bit sum: lower quantization_bits");
  auto k = a.neighbours == 0 || a.neighbours >= n ? n - 1 : a.neighbours;
  if (k > 254)
    fail("at most 254 neighbours per client, got " + std::to_string(k));
  if (a.threshold > k + 1)
    fail("threshold " + std::to_string(a.threshold) + " exceeds the " +
         std::to_string(k) + " neighbours a client shares with (+1)");
}

/// server_configs.relays: client id -> the most clients under it. A tree
/// sums: what does not decompose into sums of groups is refused here.
void read_relays(section& s, server_config& sc) {
  std::vector<std::pair<std::string, std::string>> relays;
  s.get_map("relays", relays);
  for (const auto& [id, most] : relays) {
    auto key = "relays." + id;
    if (auto ok = check_client_id(id); !ok)
      return s.fail(key.c_str(), ok.err().message);
    uint64_t n = 0;
    auto [end, ec] = std::from_chars(most.data(), most.data() + most.size(), n);
    if (ec != std::errc{} || end != most.data() + most.size() || n == 0 ||
        n > max_clients)
      return s.fail(key.c_str(), "the most clients under the relay, 1 to " +
                                     std::to_string(max_clients));
    const auto& auth = sc.comm.auth;
    const std::string& relay_id = id; // a binding no lambda may capture
    if (auth.enabled && std::none_of(auth.tokens.begin(), auth.tokens.end(),
                                     [&relay_id](const auto& t) {
                                       return t.first == relay_id;
                                     }))
      return s.fail(key.c_str(),
                    "has no token (comm_configs.grpc_configs."
                    "authenticator_args): the relay could never register");
    sc.relays[id] = n;
  }
  s.get("simulated_relays", sc.simulated_relays, 0, max_clients);
  if (sc.simulated_relays > 0 && !sc.relays.empty())
    s.fail("simulated_relays", "a simulated tree names its own relays "
                               "(Relay1..R): give relays or simulated_relays");
  auto per_round = sc.clients_per_round ? sc.clients_per_round : sc.num_clients;
  if (sc.simulated_relays > per_round)
    s.fail("simulated_relays",
           "each relay runs at least one client a round: at most " +
               std::to_string(per_round) + " (clients_per_round)");
  if (sc.relays.empty() && sc.simulated_relays == 0)
    return;
  const std::string where =
      sc.relays.empty() ? " (server_configs.simulated_relays runs a tree)"
                        : " (server_configs.relays names relays)";
  auto refuse = [&](const char* key, const std::string& why) {
    s.fail(key, why + where);
  };
  if (is_robust(sc.aggregator))
    refuse("aggregator",
           std::string{aggregator_name(sc.aggregator)} +
               " does not decompose into the sums a tree forwards: the "
               "median or trimmed mean of relays' sums is not that of their "
               "clients' updates; use FedAvg or a server optimizer");
  if (is_async(sc.aggregator))
    refuse("aggregator",
           std::string{aggregator_name(sc.aggregator)} +
               " weighs each update by its own staleness as it arrives: a "
               "relay's sum mixes updates of one round and has no single "
               "staleness; use a SyncScheduler rule");
  if (sc.rule.client_weights_mode != client_weighting::equal)
    refuse("aggregator_kwargs.client_weights_mode",
           "sample_size weights through relays are not built: a relay "
           "weighs each of its clients 1; use equal");
  if (sc.secure_aggregation.enabled)
    refuse("secure_aggregation.enabled",
           "secure aggregation across relays is not built: the masks of a "
           "relay's group do not cancel in its partial sum (a relay's own "
           "server_configs.secure_aggregation runs it within its group)");
  if (sc.rule.partial_updates == partial_updates::keep &&
      !is_async(sc.aggregator))
    refuse("aggregator_kwargs.partial_updates",
           "keep would put the part of a relay's sum that arrived before it "
           "was lost into the model; use discard (the default)");
  if (sc.rule.norm_bound > 0)
    refuse("aggregator_kwargs.norm_bound",
           "a relay's sum is not one update: its distance from the model "
           "says nothing of its clients'");
  if (!sc.rule.tensor_rules.empty())
    refuse("aggregator_kwargs.tensor_rules",
           "kept tensors replace a client's bytes by the model's, which a "
           "relay's sum would need times its weight");
}

void read(section s, server_config& sc) {
  s.get("num_clients", sc.num_clients, 1, max_clients);
  s.get("num_global_epochs", sc.num_global_epochs, 1);
  s.one_of("scheduler", sc.scheduler, {"SyncScheduler", "AsyncScheduler"});
  {
    auto kw = s.child("scheduler_kwargs");
    uint32_t n = sc.num_clients;
    kw.get("num_clients", n, 1, max_clients);
    if (n != sc.num_clients)
      kw.fail("num_clients", "differs from server_configs.num_clients");
    read_sampling(kw, sc);
    auto per_round =
        sc.clients_per_round ? sc.clients_per_round : sc.num_clients;
    sc.min_clients = per_round;
    kw.get("min_clients", sc.min_clients, 1, max_clients);
    if (sc.min_clients > per_round)
      kw.fail("min_clients", "must not exceed the clients of a round (" +
                                 std::to_string(per_round) + ")");
    kw.seconds("round_deadline_s", sc.round_deadline_s, true);
    kw.seconds("registration_deadline_s", sc.registration_deadline_s, true);
    kw.one_of("on_deadline", sc.on_deadline, deadline_words);
    bool same_init = true;
    kw.get("same_init_model", same_init);
    if (!same_init)
      kw.fail("same_init_model", "only true is supported");
  }
  s.one_of("aggregator", sc.aggregator, rule_names);
  read(s.child("aggregator_kwargs"), sc.rule, sc.aggregator);
  bool async_rule = is_async(sc.aggregator);
  if (!s.has("scheduler")) // unnamed: the one the aggregator needs
    sc.scheduler = async_rule ? "AsyncScheduler" : "SyncScheduler";
  if (async_rule != (sc.scheduler == "AsyncScheduler"))
    s.fail("aggregator", std::string{aggregator_name(sc.aggregator)} +
                             " needs " +
                             (async_rule ? "AsyncScheduler" : "SyncScheduler") +
                             ", the scheduler is " + sc.scheduler);
  s.get("evaluate", sc.evaluate);
  if (s.has("federated_evaluation")) {
    bool on = false;
    s.get("federated_evaluation", on);
    sc.federated_evaluation = on;
  }
  std::string mode = to_string(sc.memory_mode);
  s.one_of("memory_mode", mode, {"ram", "window", "disk"});
  sc.memory_mode = parse_memory_mode(mode).value_or(memory_mode::ram);
  if (sc.rule.norm_bound > 0 && sc.memory_mode != memory_mode::ram)
    s.fail("aggregator_kwargs.norm_bound",
           "needs memory_mode ram: an update is scaled towards the model its "
           "client received, which window and disk modes overwrite");
  if (sc.scheduler == "AsyncScheduler" && sc.memory_mode != memory_mode::ram)
    s.fail("memory_mode", "AsyncScheduler runs in ram mode only (window and "
                          "disk modes average sync rounds in place)");
  s.get("storage_dir", sc.storage_dir);
  if (sc.memory_mode == memory_mode::disk &&
      !std::filesystem::is_directory(sc.storage_dir))
    s.fail("storage_dir", "'" + sc.storage_dir + "' is not a directory");
  s.get("save_global_model", sc.save_global_model);
  if (!sc.save_global_model.empty()) {
    auto dir = std::filesystem::path{sc.save_global_model}.parent_path();
    if (!dir.empty() && !std::filesystem::is_directory(dir))
      s.fail("save_global_model",
             "directory '" + dir.string() + "' does not exist");
  }
  if (s.has("checkpoint")) {
    auto c = s.child("checkpoint");
    c.get("dir", sc.checkpoint.dir);
    if (sc.checkpoint.dir.empty())
      c.fail("dir", "names the folder checkpoints are written to");
    c.get("every_rounds", sc.checkpoint.every_rounds, 1);
    c.get("keep", sc.checkpoint.keep, 1);
    c.one_of("on_error", sc.checkpoint.on_error, checkpoint_failure_words);
  }
  std::string device = "cpu";
  s.one_of("device", device, {"cpu"});
  read(s.child("comm_configs"), sc.comm, true);
  read(s.child("secure_aggregation"), sc.secure_aggregation);
  check_secure_aggregation(s, sc);
  read_relays(s, sc);
  s.ignore({"logging_output_dirname", "logging_output_filename"});
}

/// A client's own file. `fedcaf client` (role client) reads its device and
/// its partition of the data set here; a Python client's device and
/// data_configs, if any, are its own code's, accepted unread.
void read_client_file(section& root, config& c, config_role role) {
  auto train = root.child("train_configs");
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
  train.get("num_threads", c.client.num_threads, 0, max_threads);
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
  if (sc.scheduler != "SyncScheduler")
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

result<void> apply_override(YAML::Node& root, const std::string& item) {
  auto eq = item.find('=');
  if (eq == std::string::npos || eq == 0)
    return error{errc::bad_config,
                 "--set " + item + ": expected key.path=value"};
  auto path = split(item.substr(0, eq), '.');
  for (const auto& p : path)
    if (p.empty())
      return error{errc::bad_config, "--set " + item + ": empty key in path"};
  if (!root.IsMap())
    root = YAML::Node{YAML::NodeType::Map};
  set_path(root, path, 0, load_yaml(item.substr(eq + 1)));
  return {};
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

/// Every error at once, one per line; an error in a key a --set gave is
/// blamed on that --set, not on the file.
std::string join_errors(const std::string& source,
                        const std::vector<std::string>& errors,
                        const std::vector<std::string>& overrides = {}) {
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

} // namespace

result<uint64_t> comm_config::chunk_bytes_for(uint64_t model_bytes) const {
  if (use_model_chunking)
    return stream.chunk_bytes;
  // The whole model travels as one message, as peers without chunking do.
  if (model_bytes + 1024 > max_message_size)
    return error{errc::bad_config,
                 "with use_model_chunking off the model of " +
                     std::to_string(model_bytes) +
                     " bytes travels as one message, which does not fit "
                     "grpc_configs.max_message_size (" +
                     std::to_string(max_message_size) +
                     "): raise it or turn chunking on"};
  if (model_bytes > capnp_data_limit)
    return error{errc::bad_config,
                 "with use_model_chunking off the model of " +
                     std::to_string(model_bytes) +
                     " bytes travels as one message, and one message holds "
                     "under 512 MiB: turn chunking on"};
  return std::max<uint64_t>(model_bytes, 64);
}

result<config> load_config(std::string_view yaml_text, std::string source,
                           config_role role,
                           const std::vector<std::string>& overrides) {
  config c;
  c.role = role;
  c.source = std::move(source);
  std::vector<std::string> errors;
  try {
    YAML::Node root = load_yaml(std::string{yaml_text});
    for (const auto& item : overrides)
      if (auto ok = apply_override(root, item); !ok)
        return ok.err();
    follow_aggregator(root, overrides);
    {
      section top{root, "", errors};
      top.track_ignored(&c.ignored_keys);
      if (is_client_role(role))
        read_client_file(top, c, role);
      else
        read_server_file(top, c);
      if (role != config_role::simulate && c.server.simulated_relays > 0)
        top.fail("server_configs.simulated_relays",
                 "simulate only: a tree of processes is fedcaf relay "
                 "(server_configs.relays names them)");
      if (role == config_role::simulate &&
          c.clients.train.trainer == trainer_kind::python)
        top.fail("client_configs.train_configs.trainer",
                 "python: Python clients train with their own code in their "
                 "own processes; simulate runs fedcaf's trainers (run fedcaf "
                 "server and the Python client, examples/python)");
    }
    YAML::Emitter out;
    auto shown = YAML::Clone(root);
    redact(shown);
    out << shown;
    c.effective_yaml = out.c_str();
    if (!is_client_role(role)) { // clients evaluate when asked to
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
    if (!is_client_role(role))
      send_compression_as_read(root["client_configs"], c.clients.compression);
    YAML::Emitter clients;
    if (root.IsMap() && root["client_configs"])
      clients << root["client_configs"];
    else
      clients << YAML::BeginMap << YAML::EndMap;
    c.client_configs_text = clients.c_str();
  } catch (const YAML::Exception& e) {
    return error{errc::bad_config, c.source + ": " + e.what()};
  }
  if (!errors.empty())
    return error{errc::bad_config, join_errors(c.source, errors, overrides)};
  return c;
}

result<config> load_config_file(const std::string& path, config_role role,
                                const std::vector<std::string>& overrides) {
  auto text = read_yaml_file(path, "config file");
  if (!text)
    return text.err();
  return load_config(*text, path, role, overrides);
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

namespace {

/// Reads the YAML file `path`, after each `--set` override, as one section
/// into a T with `read`; errors name the file (or the --set) and the key
/// path.
template <class T, class Read>
result<T> load_file(const std::string& path,
                    const std::vector<std::string>& overrides, Read read) {
  T out;
  std::vector<std::string> errors;
  auto text = read_yaml_file(path, "config file");
  if (!text)
    return text.err();
  try {
    YAML::Node root = load_yaml(*text);
    for (const auto& item : overrides)
      if (auto ok = apply_override(root, item); !ok)
        return ok.err();
    section s{root, "", errors};
    read(s, out);
  } catch (const YAML::Exception& e) {
    return error{errc::bad_config, path + ": " + e.what()};
  }
  if (!errors.empty())
    return error{errc::bad_config, join_errors(path, errors, overrides)};
  return out;
}

/// `name` as a file that another config names: a relative name is looked
/// for beside that config (in `dir`) first, then in the working directory
/// (where configs written before this rule found it).
std::string beside(const std::string& name, const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  auto there = dir / name;
  std::error_code ec;
  if (fs::path{name}.is_relative() && fs::is_regular_file(there, ec))
    return there.lexically_normal().string();
  return name;
}

/// Reads a profile matrix found in the folder `dir`.
void read(section& s, profile_matrix& m, const std::filesystem::path& dir) {
  s.get("base", m.base);
  m.base = beside(m.base, dir);
  if (!std::filesystem::is_regular_file(m.base))
    s.fail("base", "'" + m.base +
                       "' is not a file (a relative base is looked for "
                       "beside the matrix file, then in the working "
                       "directory)");
  s.get_whole_list("sizes_mib", m.sizes_mib, 1, max_model_bytes >> 20);
  s.get_whole_list("clients", m.clients, 1, max_clients);
  s.get_list("chunking", m.chunking);
  s.get_list("memory_modes", m.memory_modes);
  for (const auto& mode : m.memory_modes)
    if (mode != "ram" && mode != "window" && mode != "disk")
      s.fail("memory_modes", "'" + mode + "' is not ram, window or disk");
  s.get("rounds", m.rounds, 1);
  s.get("sample_ms", m.sample_ms, 1);
  s.get("timeout_s", m.timeout_s, 1);
}

void read(section& s, dp_profile_config& d) {
  {
    auto m = s.child("model");
    // Bounded so that the model's tensors (vocab_size x d_model, d_model
    // x d_ff, per layer) are checked here, before any is allocated.
    m.get("vocab_size", d.vocab_size, 2, max_dp_profile_dim);
    m.get("d_model", d.d_model, 1, max_dp_profile_dim);
    m.get("num_heads", d.num_heads, 1, max_dp_profile_dim);
    m.get("num_layers", d.num_layers, 1, max_dp_profile_layers);
    m.get("d_ff", d.d_ff, 1, max_dp_profile_dim);
    m.get("num_labels", d.num_labels, 2, max_dp_profile_dim);
    if (d.d_model % d.num_heads != 0)
      m.fail("num_heads",
             "must divide d_model (" + std::to_string(d.d_model) + ")");
  }
  s.get("batch_size", d.batch_size, 1);
  s.get_whole_list("seq_lengths", d.seq_lengths, 1);
  s.get_list("modes", d.modes);
  for (const auto& mode : d.modes)
    if (mode != "none" && mode != "per_sample" && mode != "ghost" &&
        mode != "fused")
      s.fail("modes", "'" + mode + "' is not none, per_sample, ghost or fused");
  s.get("warmup_iter", d.warmup_iter);
  s.get("num_iter", d.num_iter, 1);
  s.get("repeats", d.repeats, 1);
  s.get("noise_multiplier", d.noise_multiplier);
  if (!(d.noise_multiplier >= 0))
    s.fail("noise_multiplier", "must be 0 (no noise) or positive");
  s.positive("max_grad_norm", d.max_grad_norm);
  s.positive("learning_rate", d.learning_rate);
  s.get("num_threads", d.num_threads, 0, max_threads);
  s.get("seed", d.seed);
  s.get("timeout_s", d.timeout_s, 1);
}

} // namespace

result<profile_matrix>
load_profile_matrix(const std::string& path,
                    const std::vector<std::string>& overrides) {
  auto dir = std::filesystem::path{path}.parent_path();
  return load_file<profile_matrix>(
      path, overrides,
      [&dir](section& s, profile_matrix& m) { read(s, m, dir); });
}

result<dp_profile_config>
load_dp_profile_config(const std::string& path,
                       const std::vector<std::string>& overrides) {
  return load_file<dp_profile_config>(
      path, overrides, [](section& s, dp_profile_config& d) { read(s, d); });
}

std::string client_configs_yaml(const config& c) {
  return c.client_configs_text;
}

result<client_configs> parse_client_configs(std::string_view yaml_text) {
  client_configs c;
  std::vector<std::string> errors;
  try {
    read(section{load_yaml(std::string{yaml_text}), "client_configs", errors},
         c, false);
  } catch (const YAML::Exception& e) {
    return error{errc::bad_config,
                 std::string{"client_configs from the server: "} + e.what()};
  }
  if (!errors.empty())
    return error{errc::bad_config,
                 join_errors("client_configs from the server", errors)};
  return c;
}

const char* to_string(memory_mode m) {
  switch (m) {
  case memory_mode::ram:
    return "ram";
  case memory_mode::window:
    return "window";
  case memory_mode::disk:
    return "disk";
  }
  return "?";
}

std::optional<memory_mode> parse_memory_mode(std::string_view name) {
  for (auto m : {memory_mode::ram, memory_mode::window, memory_mode::disk})
    if (name == to_string(m))
      return m;
  return std::nullopt;
}

} // namespace fedcaf
