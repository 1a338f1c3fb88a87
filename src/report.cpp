#include "fedcaf/report.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "fedcaf/stopwatch.hpp"

namespace fedcaf {

namespace {

using json = nlohmann::json;

/// Converts YAML to JSON, typing scalars as YAML 1.2 core schema would.
json to_json(const YAML::Node& n) {
  switch (n.Type()) {
  case YAML::NodeType::Map: {
    json out = json::object();
    for (const auto& kv : n)
      out[kv.first.as<std::string>()] = to_json(kv.second);
    return out;
  }
  case YAML::NodeType::Sequence: {
    json out = json::array();
    for (const auto& x : n)
      out.push_back(to_json(x));
    return out;
  }
  case YAML::NodeType::Scalar: {
    const auto& s = n.Scalar();
    if (n.Tag() == "!")
      return s; // quoted
    bool b;
    if (YAML::convert<bool>::decode(n, b) && s != "y" && s != "n")
      return b;
    long long i;
    if (YAML::convert<long long>::decode(n, i))
      return i;
    double d;
    if (YAML::convert<double>::decode(n, d))
      return d;
    return s;
  }
  default:
    return nullptr;
  }
}

json optional_number(const std::optional<double>& x) {
  return x ? json(*x) : json(nullptr);
}

json figures_json(const std::optional<client_figures>& f) {
  if (!f)
    return nullptr;
  json means = json::object();
  for (const auto& [name, value] : f->means)
    means[name] = value;
  // trimmed: 3 or more reported, so the highest and the lowest value of
  // each figure were left out; false: one reporter's figure is the mean
  // (or half of it), unchecked by any other.
  return {{"clients", f->clients},
          {"samples", f->samples},
          {"means", means},
          {"trimmed", f->clients >= 3}};
}

} // namespace

std::optional<double> client_figures::find(const std::string& name) const {
  for (const auto& [n, v] : means)
    if (n == name)
      return v;
  return std::nullopt;
}

void figures_sum::add(
    uint64_t samples,
    const std::vector<std::pair<std::string, double>>& values) {
  ++clients_;
  samples_ += samples;
  for (const auto& [name, value] : values)
    values_[name].emplace_back(value, static_cast<double>(samples));
}

namespace {

/// The mean of `v` (value, weight) weighted by its weights (where they sum
/// to 0: its plain mean), leaving out its highest and lowest value where it
/// holds 3 or more.
double trimmed_mean(std::vector<std::pair<double, double>> v) {
  if (v.size() >= 3) {
    std::sort(v.begin(), v.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    v.erase(v.begin());
    v.pop_back();
  }
  double sum = 0, weight = 0, plain = 0;
  for (const auto& [value, w] : v) {
    sum += w * value;
    weight += w;
    plain += value;
  }
  return weight > 0 ? sum / weight : plain / static_cast<double>(v.size());
}

} // namespace

client_figures figures_sum::mean() const {
  client_figures out{clients_, samples_, {}};
  for (const auto& [name, v] : values_)
    out.means.emplace_back(name, trimmed_mean(v));
  return out;
}

namespace {

/// Robust rules: {client: values dropped}; null for the others.
json trimmed_json(
    const std::optional<std::vector<std::pair<std::string, uint64_t>>>& t) {
  if (!t)
    return nullptr;
  json out = json::object();
  for (const auto& [id, values] : *t)
    out[id] = values;
  return out;
}

/// {id: value}.
json pairs_json(const std::vector<std::pair<std::string, double>>& pairs) {
  json out = json::object();
  for (const auto& [id, value] : pairs)
    out[id] = value;
  return out;
}

/// {client: {up, down}}.
json client_bytes_json(
    const std::vector<std::pair<std::string, std::pair<uint64_t, uint64_t>>>&
        traffic) {
  json out = json::object();
  for (const auto& [id, bytes] : traffic)
    out[id] = {{"up", bytes.first}, {"down", bytes.second}};
  return out;
}

json round_json(const round_record& x) {
  json excluded = json::array();
  for (const auto& [id, why] : x.excluded)
    excluded.push_back({{"client", id}, {"why", why}});
  return {{"round", x.round},
          {"status", x.status},
          {"failure", x.failure},
          {"excluded", excluded},
          {"test_accuracy", optional_number(x.test_accuracy)},
          {"test_loss", optional_number(x.test_loss)},
          {"wall_seconds", x.wall_seconds},
          {"bytes_up", x.bytes_up},
          {"bytes_down", x.bytes_down},
          {"train_loss", x.train_loss},
          {"clients", x.clients},
          {"download_seconds", x.download_seconds},
          {"train_seconds", x.train_seconds},
          {"upload_seconds", x.upload_seconds},
          {"ended_unix_s", x.ended_unix_s},
          {"missing_clients", x.missing_clients},
          {"contributors", x.contributors},
          {"staleness", x.staleness},
          {"relay_weights", pairs_json(x.relay_weights)},
          {"dp_epsilon", optional_number(x.dp_epsilon)},
          {"dp_sgd_epsilon", optional_number(x.dp_sgd_epsilon)},
          {"client_metrics", figures_json(x.client_metrics)},
          {"client_train_metrics", figures_json(x.client_train_metrics)},
          {"trimmed_values", trimmed_json(x.trimmed_values)},
          {"client_bytes", client_bytes_json(x.client_bytes)},
          {"compression_up", optional_number(x.compression_up)},
          {"compression_down", optional_number(x.compression_down)}};
}

/// The inverse of optional_number.
std::optional<double> number_or_null(const json& j) {
  return j.is_null() ? std::nullopt : std::optional<double>{j.get<double>()};
}

std::optional<client_figures> figures_from(const json& j) {
  if (j.is_null())
    return std::nullopt;
  client_figures f{
      j.at("clients").get<uint32_t>(), j.at("samples").get<uint64_t>(), {}};
  for (const auto& [name, value] : j.at("means").items())
    f.means.emplace_back(name, value.get<double>());
  return f;
}

/// The inverse of round_json.
round_record round_from(const json& j) {
  round_record x;
  x.round = j.at("round").get<uint32_t>();
  x.status = j.at("status").get<std::string>();
  x.failure = j.at("failure").get<std::string>();
  for (const auto& e : j.at("excluded"))
    x.excluded.emplace_back(e.at("client").get<std::string>(),
                            e.at("why").get<std::string>());
  x.test_accuracy = number_or_null(j.at("test_accuracy"));
  x.test_loss = number_or_null(j.at("test_loss"));
  x.wall_seconds = j.at("wall_seconds").get<double>();
  x.bytes_up = j.at("bytes_up").get<uint64_t>();
  x.bytes_down = j.at("bytes_down").get<uint64_t>();
  x.train_loss = j.at("train_loss").get<double>();
  x.clients = j.at("clients").get<uint32_t>();
  x.download_seconds = j.at("download_seconds").get<double>();
  x.train_seconds = j.at("train_seconds").get<double>();
  x.upload_seconds = j.at("upload_seconds").get<double>();
  x.ended_unix_s = j.at("ended_unix_s").get<double>();
  x.missing_clients = j.at("missing_clients").get<std::vector<std::string>>();
  x.contributors = j.at("contributors").get<std::vector<std::string>>();
  x.staleness = j.at("staleness").get<std::vector<uint32_t>>();
  if (auto w = j.find("relay_weights"); w != j.end()) // since 0.13
    for (const auto& [id, value] : w->items())
      x.relay_weights.emplace_back(id, value.get<double>());
  x.dp_epsilon = number_or_null(j.at("dp_epsilon"));
  x.dp_sgd_epsilon = number_or_null(j.at("dp_sgd_epsilon"));
  x.client_metrics = figures_from(j.at("client_metrics"));
  x.client_train_metrics = figures_from(j.at("client_train_metrics"));
  if (const auto& t = j.at("trimmed_values"); !t.is_null()) {
    x.trimmed_values.emplace();
    for (const auto& [id, n] : t.items())
      x.trimmed_values->emplace_back(id, n.get<uint64_t>());
  }
  for (const auto& [id, b] : j.at("client_bytes").items())
    x.client_bytes.emplace_back(id, std::pair{b.at("up").get<uint64_t>(),
                                              b.at("down").get<uint64_t>()});
  x.compression_up = number_or_null(j.at("compression_up"));
  x.compression_down = number_or_null(j.at("compression_down"));
  return x;
}

} // namespace

std::string run_status(const run_report& r) {
  return !r.status.empty()          ? r.status
         : !r.failure.empty()       ? std::string{"failed"}
         : !r.failed_rounds.empty() ? std::string{"rounds_failed"}
                                    : std::string{"completed"};
}

namespace {

json report_json(const run_report& r) {
  json rounds = json::array();
  for (const auto& x : r.rounds)
    rounds.push_back(round_json(x));
  json config = nullptr;
  try {
    if (!r.config_yaml.empty())
      config = to_json(YAML::Load(r.config_yaml));
  } catch (const YAML::Exception&) {
    config = r.config_yaml;
  }
  json out = {{"schema_version", report_schema_version},
              {"fedcaf_version", FEDCAF_VERSION},
              {"status", run_status(r)},
              {"aggregator", r.aggregator},
              {"scheduler", r.scheduler},
              {"role", r.role},
              {"node", r.node},
              {"rounds", rounds},
              {"resumed_from", r.resumed_from},
              {"peak_rss_bytes", r.peak_rss_bytes},
              {"refusals", r.refusals},
              {"poisoned_updates", r.poisoned_updates},
              {"peak_in_flight", r.peak_in_flight},
              {"bytes_sent", r.bytes_sent},
              {"bytes_received", r.bytes_received},
              {"retries", r.retries},
              {"resumes", r.resumes},
              {"bytes_resent", r.bytes_resent},
              {"total_seconds", r.total_seconds},
              {"ok", r.failure.empty() && r.failed_rounds.empty()},
              {"failed_rounds", r.failed_rounds},
              {"failure", r.failure},
              {"config", config}};
  if (!r.events.empty())
    out["events"] = r.events;
  if (!r.rounds.empty())
    out["final_test_accuracy"] = optional_number(r.rounds.back().test_accuracy);
  if (r.summoned_clients > 0) {
    out["summoned_clients"] = r.summoned_clients;
    out["peak_clients_alive"] = r.peak_clients_alive;
  }
  if (!r.clients.empty()) {
    json clients = json::array();
    for (const auto& c : r.clients) {
      auto j = report_json(c);
      j.erase("config"); // the run's, above
      clients.push_back(std::move(j));
    }
    out["clients"] = std::move(clients);
  }
  return out;
}

} // namespace

std::string to_json(const run_report& r) {
  // Text from peers is checked (client ids are printable ASCII), but
  // whatever a report holds, invalid UTF-8 is replaced, never thrown on.
  return report_json(r).dump(2, ' ', false, json::error_handler_t::replace);
}

result<void> write_file_atomically(const std::string& path,
                                   std::string_view text,
                                   const std::string& what) {
  // A reader (or a run interrupted while writing) sees the old file or the
  // new one whole, never a part.
  auto temp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out{temp};
    out << text;
    out.flush();
    if (!out) {
      std::remove(temp.c_str());
      return error{errc::io_error, path + ": cannot write the " + what};
    }
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    std::remove(temp.c_str());
    return error{errc::io_error, path + ": cannot write the " + what};
  }
  return {};
}

result<void> write_report(const run_report& r, const std::string& path) {
  return write_file_atomically(path, to_json(r) + '\n', "report");
}

result<std::shared_ptr<metrics_log>>
metrics_log::open(const std::string& path) {
  auto* f = std::fopen(path.c_str(), "w");
  if (!f)
    return error{errc::io_error,
                 "cannot write the metrics to " + path +
                     ": its directory does not exist or is not writable"};
  return std::shared_ptr<metrics_log>{new metrics_log{f}};
}

void metrics_log::write(const std::string& line) {
  std::fputs(line.c_str(), file_.get());
  std::fputc('\n', file_.get());
  std::fflush(file_.get());
}

void metrics_log::round(const round_record& r) {
  auto j = round_json(r);
  j["event"] = "round";
  j["t"] = r.ended_unix_s;
  write(j.dump(-1, ' ', false, json::error_handler_t::replace));
}

void metrics_log::client(const std::string& event, const std::string& client_id,
                         const std::string& detail) {
  json j = {{"event", event},
            {"t", unix_seconds()},
            {"client", client_id},
            {"detail", detail}};
  write(j.dump(-1, ' ', false, json::error_handler_t::replace));
}

void metrics_log::end(const std::string& status, const std::string& failure) {
  json j = {{"event", "end"},
            {"t", unix_seconds()},
            {"status", status},
            {"failure", failure}};
  write(j.dump(-1, ' ', false, json::error_handler_t::replace));
}

result<void> check_writable(const std::string& path, const std::string& what) {
  auto temp = path + ".tmp." + std::to_string(::getpid());
  std::ofstream out{temp};
  if (!out)
    return error{errc::io_error,
                 "cannot write the " + what + " to " + path +
                     ": its directory does not exist or is not writable"};
  out.close();
  std::remove(temp.c_str());
  return {};
}

result<void> check_report_path(const std::string& path) {
  return check_writable(path, "report");
}

std::string progress_line(const round_record& r, uint32_t num_rounds) {
  char line[256];
  auto mib = [](uint64_t b) { return static_cast<double>(b) / (1 << 20); };
  if (r.test_accuracy && r.test_loss)
    std::snprintf(line, sizeof line,
                  "round %u/%u  accuracy %.4f  loss %.4f  %.1f s  up %.1f MiB"
                  "  down %.1f MiB",
                  r.round, num_rounds, *r.test_accuracy, *r.test_loss,
                  r.wall_seconds, mib(r.bytes_up), mib(r.bytes_down));
  else if (r.test_accuracy) // a figure the clients gave without a loss
    std::snprintf(line, sizeof line,
                  "round %u/%u  accuracy %.4f  %.1f s  up %.1f MiB  down %.1f "
                  "MiB",
                  r.round, num_rounds, *r.test_accuracy, r.wall_seconds,
                  mib(r.bytes_up), mib(r.bytes_down));
  else
    std::snprintf(line, sizeof line,
                  "round %u/%u  train loss %.4f  %.1f s  up %.1f MiB  down "
                  "%.1f MiB",
                  r.round, num_rounds, r.train_loss, r.wall_seconds,
                  mib(r.bytes_up), mib(r.bytes_down));
  std::string out = line;
  if (num_rounds == 0) { // a relay's: its parent decides how many
    auto slash = out.find("/0 ");
    if (slash != std::string::npos)
      out.erase(slash, 2);
  }
  if (r.status != "completed")
    out += "  " + r.status + ": " + r.failure;
  if (r.dp_epsilon) {
    std::snprintf(line, sizeof line, "  epsilon %.3f", *r.dp_epsilon);
    out += line;
  }
  if (r.dp_sgd_epsilon) {
    std::snprintf(line, sizeof line, "  sample epsilon %.3f",
                  *r.dp_sgd_epsilon);
    out += line;
  }
  if (r.client_metrics) {
    const auto& c = *r.client_metrics;
    std::snprintf(line, sizeof line, "  clients' eval: %u clients, weight %llu",
                  c.clients, static_cast<unsigned long long>(c.samples));
    out += line;
    for (const char* name : {"accuracy", "loss"})
      if (auto v = c.find(name)) {
        std::snprintf(line, sizeof line, " %s %.4f", name, *v);
        out += line;
      }
    if (c.clients > 0 && c.clients < 3)
      out += " (untrimmed: fewer than 3 reporters)";
  }
  return out;
}

std::string rounds_json(const std::vector<round_record>& rounds) {
  json out = json::array();
  for (const auto& x : rounds)
    out.push_back(round_json(x));
  return out.dump();
}

result<std::vector<round_record>> rounds_from_json(const std::string& text) {
  try {
    std::vector<round_record> out;
    for (const auto& j : json::parse(text))
      out.push_back(round_from(j));
    return out;
  } catch (const std::exception& e) {
    return error{errc::bad_argument,
                 std::string{"a report's rounds do not read back: "} +
                     e.what()};
  }
}

} // namespace fedcaf
