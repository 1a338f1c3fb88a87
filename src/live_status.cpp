#include "fedcaf/live_status.hpp"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "fedcaf/memory_probe.hpp"
#include "fedcaf/stopwatch.hpp"

namespace fedcaf {

namespace {

/// At most this many memory samples are kept (the oldest half is thinned).
constexpr size_t max_memory_points = 2048;

} // namespace

void live_status::set_run(std::string role, uint32_t num_rounds,
                          std::string aggregator) {
  std::lock_guard<std::mutex> guard{mtx_};
  role_ = std::move(role);
  num_rounds_ = num_rounds;
  aggregator_ = std::move(aggregator);
  started_ = unix_seconds();
}

void live_status::set_model_bytes(uint64_t model_bytes) {
  std::lock_guard<std::mutex> guard{mtx_};
  model_bytes_ = model_bytes;
}

void live_status::client_event(const std::string& id, const std::string& state,
                               const std::string& address) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto& c = clients_[id];
  c.state = state;
  if (!address.empty())
    c.address = address;
}

void live_status::round_started(uint32_t round) {
  std::lock_guard<std::mutex> guard{mtx_};
  round_ = round;
  for (auto& [id, c] : clients_)
    c.bytes_down_round = c.bytes_up_round = 0;
}

void live_status::sent_to(const std::string& id, uint64_t bytes) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto& c = clients_[id];
  c.bytes_down_round += bytes;
  c.bytes_down_total += bytes;
}

void live_status::received_from(const std::string& id, uint64_t bytes) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto& c = clients_[id];
  c.bytes_up_round += bytes;
  c.bytes_up_total += bytes;
}

void live_status::round_finished(const round_record& r) {
  std::lock_guard<std::mutex> guard{mtx_};
  for (auto& x : rounds_)
    if (x.round == r.round) {
      x = r;
      return;
    }
  rounds_.push_back(r);
}

void live_status::set_refusals(uint64_t refusals) {
  std::lock_guard<std::mutex> guard{mtx_};
  refusals_ = refusals;
}

void live_status::ended(const std::string& status) {
  std::lock_guard<std::mutex> guard{mtx_};
  status_ = status;
}

void live_status::sample_memory_locked() {
  auto now = unix_seconds();
  if (!memory_.empty() && now - memory_.back().t < 1.0)
    return;
  memory_.push_back({now, sample_memory().rss_bytes});
  if (memory_.size() > max_memory_points) { // keep every other old point
    std::vector<memory_point> thinned;
    for (size_t i = 0; i < memory_.size(); ++i)
      if (i >= memory_.size() / 2 || i % 2 == 0)
        thinned.push_back(memory_[i]);
    memory_ = std::move(thinned);
  }
}

namespace {

/// `text` as a Prometheus label value in quotes: backslash, quote and
/// newline escaped as the text format defines; other control bytes and
/// bytes past ASCII, which its parsers refuse, become '?'. (Client ids are
/// printable ASCII; this keeps any text safe.)
std::string prometheus_label(std::string_view text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '\\' || c == '"')
      out += {'\\', static_cast<char>(c)};
    else if (c == '\n')
      out += "\\n";
    else if (c < 0x20 || c >= 0x7f)
      out += '?';
    else
      out += static_cast<char>(c);
  }
  return out + '"';
}

} // namespace

std::string live_status::prometheus() {
  std::lock_guard<std::mutex> guard{mtx_};
  sample_memory_locked();
  std::string out;
  auto metric = [&](const char* name, const char* type, const char* help) {
    out += std::string{"# HELP "} + name + " " + help + "\n# TYPE " + name +
           " " + type + "\n";
  };
  auto value = [&](const std::string& name, double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, " %.17g\n", v);
    out += name + buf;
  };
  metric("fedcaf_rounds_completed", "counter", "Rounds published.");
  value("fedcaf_rounds_completed", static_cast<double>(rounds_.size()));
  metric("fedcaf_round", "gauge", "The round under way.");
  value("fedcaf_round", round_);
  metric("fedcaf_clients_connected", "gauge", "Clients connected now.");
  size_t connected = 0;
  for (const auto& [id, c] : clients_)
    connected += c.state == "registered" || c.state == "back" ? 1 : 0;
  value("fedcaf_clients_connected", static_cast<double>(connected));
  uint64_t sent = 0, received = 0;
  for (const auto& [id, c] : clients_) {
    sent += c.bytes_down_total;
    received += c.bytes_up_total;
  }
  metric("fedcaf_bytes_sent_total", "counter",
         "Model bytes served to clients.");
  value("fedcaf_bytes_sent_total", static_cast<double>(sent));
  metric("fedcaf_bytes_received_total", "counter",
         "Update bytes received from clients (frames).");
  value("fedcaf_bytes_received_total", static_cast<double>(received));
  metric("fedcaf_client_round_progress", "gauge",
         "Share of the model moved this round, per client and direction.");
  for (const auto& [id, c] : clients_) {
    auto share = [&](uint64_t b) {
      return model_bytes_ ? std::min(1.0, static_cast<double>(b) /
                                              static_cast<double>(model_bytes_))
                          : 0.0;
    };
    auto label = prometheus_label(id);
    value("fedcaf_client_round_progress{client=" + label +
              ",direction=\"down\"}",
          share(c.bytes_down_round));
    value("fedcaf_client_round_progress{client=" + label + ",direction=\"up\"}",
          share(c.bytes_up_round));
  }
  metric("fedcaf_rss_bytes", "gauge", "Resident memory of this process.");
  value("fedcaf_rss_bytes", static_cast<double>(memory_.back().rss_bytes));
  metric("fedcaf_refusals_total", "counter", "Frames refused as bad input.");
  value("fedcaf_refusals_total", static_cast<double>(refusals_));
  metric("fedcaf_test_accuracy", "gauge", "The last round's test accuracy.");
  if (!rounds_.empty() && rounds_.back().test_accuracy)
    value("fedcaf_test_accuracy", *rounds_.back().test_accuracy);
  return out;
}

std::string live_status::json() {
  std::lock_guard<std::mutex> guard{mtx_};
  sample_memory_locked();
  using nlohmann::json;
  json clients = json::array();
  for (const auto& [id, c] : clients_)
    clients.push_back({{"id", id},
                       {"state", c.state},
                       {"address", c.address},
                       {"bytes_down_round", c.bytes_down_round},
                       {"bytes_up_round", c.bytes_up_round}});
  json rounds = json::array();
  for (const auto& r : rounds_)
    rounds.push_back(
        {{"round", r.round},
         {"test_accuracy", r.test_accuracy ? json(*r.test_accuracy) : json()},
         {"wall_seconds", r.wall_seconds},
         {"train_loss", r.train_loss}});
  json memory = json::array();
  for (const auto& m : memory_)
    memory.push_back({m.t - started_, m.rss_bytes});
  json out = {{"role", role_},
              {"status", status_},
              {"aggregator", aggregator_},
              {"round", round_},
              {"num_rounds", num_rounds_},
              {"model_bytes", model_bytes_},
              {"refusals", refusals_},
              {"clients", clients},
              {"rounds", rounds},
              {"memory", memory}};
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

} // namespace fedcaf
