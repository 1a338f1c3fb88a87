#include "fedcaf/live_status.hpp"

#include <algorithm>
#include <cstdio>
#include <iterator>

#include <nlohmann/json.hpp>

#include "fedcaf/memory_probe.hpp"
#include "fedcaf/stopwatch.hpp"

namespace fedcaf {

namespace {

/// Keeps `v` within `most` entries: every other entry of its older half
/// goes once it is past `most`.
template <class T> void thin_older_half(std::vector<T>& v, size_t most) {
  if (v.size() <= most)
    return;
  std::vector<T> kept;
  kept.reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    if (i >= v.size() / 2 || i % 2 == 0)
      kept.push_back(std::move(v[i]));
  v = std::move(kept);
}

/// Clients a run shows beyond num_clients (dropped ones, until they give
/// way to newcomers).
constexpr size_t extra_clients = 64;

live_round round_of(const round_record& r) {
  return {r.round,         r.status,         r.test_accuracy,    r.test_loss,
          r.train_loss,    r.wall_seconds,   r.clients,          r.bytes_up,
          r.bytes_down,    r.compression_up, r.compression_down, r.dp_epsilon,
          r.dp_sgd_epsilon};
}

} // namespace

const char* to_string(client_phase p) {
  static constexpr const char* names[] = {
      "waiting",   "downloading", "evaluating", "training",
      "uploading", "done",        "rejected"};
  static_assert(std::size(names) == client_phase_count);
  return names[static_cast<size_t>(p)];
}

uint32_t live_snapshot::completed() const {
  return static_cast<uint32_t>(rounds.size());
}

std::optional<double> live_snapshot::last_accuracy() const {
  for (auto it = rounds.rbegin(); it != rounds.rend(); ++it)
    if (it->test_accuracy)
      return it->test_accuracy;
  return std::nullopt;
}

uint64_t live_snapshot::up_bytes(const live_client& c) const {
  return std::min(model_bytes, c.up_chunks * chunk_bytes);
}

// -- the run -------------------------------------------------------------

void live_status::set_run(live_run run) {
  std::lock_guard<std::mutex> guard{mtx_};
  s_.run = std::move(run);
  s_.started_unix_s = unix_seconds();
  if (s_.run.secure_aggregation)
    s_.secagg_phase = "idle";
}

void live_status::set_model(uint64_t model_bytes, uint64_t chunk_bytes,
                            uint64_t chunk_count) {
  std::lock_guard<std::mutex> guard{mtx_};
  s_.model_bytes = model_bytes;
  s_.chunk_bytes = chunk_bytes;
  s_.chunk_count = chunk_count;
}

// -- clients' connections ------------------------------------------------

void live_status::client_event(const std::string& id, const std::string& state,
                               const std::string& address) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto* c = find_locked(id);
  if (!c) {
    if (state != "registered")
      return;
    if (!make_room_locked()) {
      ++s_.clients_not_shown;
      return;
    }
    c = &clients_[id];
    restart_locked(*c, unix_seconds());
  }
  c->state = state;
  c->changed_unix_s = unix_seconds();
  if (state == "registered" || state == "back")
    c->address = address;
}

void live_status::forget_client(const std::string& id) {
  std::lock_guard<std::mutex> guard{mtx_};
  clients_.erase(id);
}

void live_status::note_event(run_event e, const std::string& reason,
                             const std::string& id, const std::string& detail) {
  std::lock_guard<std::mutex> guard{mtx_};
  events_.note(e, reason, id, detail, unix_seconds());
}

bool live_status::make_room_locked() {
  if (clients_.size() < size_t{s_.run.num_clients} + extra_clients)
    return true;
  auto oldest = clients_.end();
  for (auto it = clients_.begin(); it != clients_.end(); ++it)
    if ((it->second.state == "dropped" || it->second.state == "left") &&
        (oldest == clients_.end() ||
         it->second.changed_unix_s < oldest->second.changed_unix_s))
      oldest = it;
  if (oldest == clients_.end())
    return false;
  clients_.erase(oldest);
  return true;
}

live_client* live_status::find_locked(const std::string& id) {
  auto it = clients_.find(id);
  return it == clients_.end() ? nullptr : &it->second;
}

// -- rounds and phases ---------------------------------------------------

void live_status::enter_locked(live_client& c, client_phase p) {
  if (c.phase == p)
    return;
  c.phase = p;
  auto& at = c.entered_s[static_cast<size_t>(p)];
  if (at < 0)
    at = unix_seconds() - c.started_unix_s;
}

void live_status::restart_locked(live_client& c, double now) {
  c.phase = client_phase::waiting;
  c.down_bytes = c.down_wire_bytes = c.up_chunks = c.up_wire_bytes = 0;
  c.started_unix_s = now;
  c.entered_s.fill(-1);
  c.entered_s[static_cast<size_t>(client_phase::waiting)] = 0;
}

void live_status::restart_all_locked(bool evaluates) {
  s_.round_started_unix_s = unix_seconds();
  evaluates_ = evaluates;
  for (auto& [id, c] : clients_)
    restart_locked(c, s_.round_started_unix_s);
}

void live_status::round_started(uint32_t round, bool evaluates) {
  std::lock_guard<std::mutex> guard{mtx_};
  s_.round = round;
  restart_all_locked(evaluates);
}

void live_status::task_started(const std::string& id, bool evaluates) {
  std::lock_guard<std::mutex> guard{mtx_};
  evaluates_ = evaluates;
  if (s_.round == 0) { // the run's first tasks
    s_.round = 1;
    s_.round_started_unix_s = unix_seconds();
  }
  if (auto* c = find_locked(id))
    restart_locked(*c, unix_seconds());
}

void live_status::final_evaluation_started() {
  std::lock_guard<std::mutex> guard{mtx_};
  s_.final_evaluation = true;
  restart_all_locked(true);
}

void live_status::served(const std::string& id, uint64_t wire_bytes,
                         uint64_t model_bytes, bool last) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto* c = find_locked(id);
  if (!c)
    return;
  c->down_bytes = std::min(s_.model_bytes, c->down_bytes + model_bytes);
  c->down_wire_bytes += wire_bytes;
  c->down_wire_total += wire_bytes;
  if (c->phase == client_phase::waiting || c->phase == client_phase::done)
    enter_locked(*c, client_phase::downloading);
  if (last && c->phase == client_phase::downloading)
    enter_locked(*c, evaluates_ ? client_phase::evaluating
                                : client_phase::training);
}

void live_status::evaluated(const std::string& id) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto* c = find_locked(id);
  if (c && c->phase == client_phase::evaluating)
    enter_locked(*c, s_.final_evaluation ? client_phase::done
                                         : client_phase::training);
}

void live_status::received(const std::string& id, uint64_t frame_bytes) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto* c = find_locked(id);
  if (!c)
    return;
  ++c->up_chunks;
  c->up_wire_bytes += frame_bytes;
  c->up_wire_total += frame_bytes;
  if (c->phase != client_phase::rejected)
    enter_locked(*c, client_phase::uploading);
}

void live_status::upload_ended(const std::string& id) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto* c = find_locked(id);
  if (c && c->phase == client_phase::uploading &&
      c->up_chunks >= s_.chunk_count)
    enter_locked(*c, client_phase::done);
}

void live_status::upload_again(const std::string& id) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto* c = find_locked(id);
  if (!c)
    return;
  c->up_chunks = c->up_wire_bytes = 0;
  c->phase = client_phase::training; // it sends its update once more
}

void live_status::rejected(const std::string& id) {
  std::lock_guard<std::mutex> guard{mtx_};
  if (auto* c = find_locked(id))
    enter_locked(*c, client_phase::rejected);
}

void live_status::set_secagg_phase(const std::string& phase) {
  std::lock_guard<std::mutex> guard{mtx_};
  if (s_.secagg_phase != phase)
    s_.secagg_phase = phase;
}

// -- results and the end -------------------------------------------------

void live_status::round_finished(const round_record& r) {
  std::lock_guard<std::mutex> guard{mtx_};
  for (auto& x : rounds_)
    if (x.round == r.round) {
      x = round_of(r);
      return;
    }
  rounds_.push_back(round_of(r));
  thin_older_half(rounds_, max_rounds);
  if (s_.run.async) // steps: the one under way follows the last
    s_.round = std::min(s_.run.num_rounds, r.round + 1);
}

void live_status::set_refusals(uint64_t refusals) {
  std::lock_guard<std::mutex> guard{mtx_};
  s_.refusals = refusals;
}

void live_status::count_refusals(
    std::shared_ptr<const std::atomic<uint64_t>> counter) {
  std::lock_guard<std::mutex> guard{mtx_};
  refusals_ = std::move(counter);
}

void live_status::ended(const std::string& status, const std::string& failure) {
  std::lock_guard<std::mutex> guard{mtx_};
  s_.status = status;
  s_.failure = failure;
  if (s_.ended_unix_s == 0)
    s_.ended_unix_s = unix_seconds();
}

// -- reading -------------------------------------------------------------

void live_status::sample_memory_locked() {
  auto now = unix_seconds();
  if (!memory_.empty() && now - s_.started_unix_s - memory_.back().first < 1.0)
    return;
  auto m = sample_memory();
  memory_.emplace_back(now - s_.started_unix_s, m.rss_bytes);
  s_.rss_anon_bytes = m.anon_bytes;
  s_.rss_file_bytes = m.file_bytes;
  thin_older_half(memory_, max_memory_points);
}

live_snapshot live_status::snapshot() {
  std::lock_guard<std::mutex> guard{mtx_};
  sample_memory_locked();
  live_snapshot out = s_;
  if (refusals_)
    out.refusals = std::max(out.refusals, refusals_->load());
  out.now_unix_s = unix_seconds();
  out.clients.assign(clients_.begin(), clients_.end());
  out.rounds = rounds_;
  out.memory = memory_;
  out.event_counts = events_.counts();
  out.events.assign(events_.log().begin(), events_.log().end());
  out.refused.assign(events_.refusals().begin(), events_.refusals().end());
  return out;
}

std::string live_status::prometheus() {
  return prometheus_text(snapshot());
}

std::string live_status::json() {
  return status_json(snapshot());
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

/// Writes metric families: each one's HELP and TYPE, then its samples.
class exposition {
public:
  void family(const char* name, const char* type, const char* help) {
    out_ += std::string{"# HELP "} + name + " " + help + "\n# TYPE " + name +
            " " + type + "\n";
  }
  void sample(const std::string& name, double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, " %.17g\n", v);
    out_ += name + buf;
  }
  /// A family with one sample, or none when `v` is empty.
  void gauge(const char* name, const char* help, std::optional<double> v) {
    family(name, "gauge", help);
    if (v)
      sample(name, *v);
  }
  std::string take() { return std::move(out_); }

private:
  std::string out_;
};

/// The run's statuses (live_snapshot::status).
constexpr const char* run_statuses[] = {"running", "completed", "failed",
                                        "rounds_failed", "interrupted"};

/// The secure aggregation phases /metrics names (secagg_coordinator's).
constexpr const char* secagg_phases[] = {
    "idle", "keys", "shares", "receipts", "disputes", "upload", "unmask"};

void transfer_families(exposition& x, const live_snapshot& s) {
  uint64_t sent = 0, received = 0;
  for (const auto& [id, c] : s.clients) {
    sent += c.down_wire_total;
    received += c.up_wire_total;
  }
  x.family("fedcaf_bytes_sent_total", "counter",
           "Model bytes served to clients.");
  x.sample("fedcaf_bytes_sent_total", static_cast<double>(sent));
  x.family("fedcaf_bytes_received_total", "counter",
           "Update bytes received from clients (frames).");
  x.sample("fedcaf_bytes_received_total", static_cast<double>(received));
  x.family("fedcaf_client_round_progress", "gauge",
           "Share of the model moved this round, per client and direction.");
  auto share = [&s](uint64_t b) {
    return s.model_bytes ? std::min(1.0, static_cast<double>(b) /
                                             static_cast<double>(s.model_bytes))
                         : 0.0;
  };
  for (const auto& [id, c] : s.clients) {
    auto label = prometheus_label(id);
    x.sample("fedcaf_client_round_progress{client=" + label +
                 ",direction=\"down\"}",
             share(c.down_bytes));
    x.sample("fedcaf_client_round_progress{client=" + label +
                 ",direction=\"up\"}",
             share(s.up_bytes(c)));
  }
  x.family("fedcaf_clients_in_phase", "gauge",
           "Clients in each phase of the round under way.");
  std::array<size_t, client_phase_count> in{};
  for (const auto& [id, c] : s.clients)
    ++in[static_cast<size_t>(c.phase)];
  for (size_t p = 0; p < client_phase_count; ++p)
    x.sample(std::string{"fedcaf_clients_in_phase{phase=\""} +
                 to_string(static_cast<client_phase>(p)) + "\"}",
             static_cast<double>(in[p]));
}

void round_families(exposition& x, const live_snapshot& s) {
  const live_round* last = s.rounds.empty() ? nullptr : &s.rounds.back();
  auto of = [last](auto field) -> std::optional<double> {
    if (!last)
      return std::nullopt;
    return field(*last);
  };
  x.gauge("fedcaf_test_accuracy", "The last round's test accuracy.",
          s.last_accuracy());
  x.gauge("fedcaf_test_loss", "The last round's test loss.",
          of([](const live_round& r) { return r.test_loss; }));
  x.gauge("fedcaf_train_loss",
          "The last round's mean training loss of its clients.",
          of([](const live_round& r) { return r.train_loss; }));
  x.gauge("fedcaf_round_seconds", "The last round's wall time.",
          of([](const live_round& r) { return r.wall_seconds; }));
  x.family("fedcaf_compression_ratio", "gauge",
           "The last round's model bytes over wire bytes, per direction "
           "(compressed directions only).");
  if (last && last->compression_up)
    x.sample("fedcaf_compression_ratio{direction=\"up\"}",
             *last->compression_up);
  if (last && last->compression_down)
    x.sample("fedcaf_compression_ratio{direction=\"down\"}",
             *last->compression_down);
  x.gauge("fedcaf_dp_epsilon",
          "DP-FedAvg: epsilon spent after the last round (at its delta).",
          of([](const live_round& r) { return r.dp_epsilon; }));
  x.gauge("fedcaf_dp_sgd_epsilon",
          "DP-SGD: the largest epsilon a client spent, after the last round.",
          of([](const live_round& r) { return r.dp_sgd_epsilon; }));
}

void secagg_families(exposition& x, const live_snapshot& s) {
  x.gauge("fedcaf_secure_aggregation", "1 iff secure aggregation is on.",
          s.run.secure_aggregation ? 1.0 : 0.0);
  x.family("fedcaf_secagg_phase", "gauge",
           "Secure aggregation: 1 for the phase under way, 0 for the others.");
  if (!s.run.secure_aggregation)
    return;
  for (const char* p : secagg_phases)
    x.sample(std::string{"fedcaf_secagg_phase{phase=\""} + p + "\"}",
             s.secagg_phase == p ? 1.0 : 0.0);
}

} // namespace

std::string prometheus_text(const live_snapshot& s) {
  exposition x;
  x.family("fedcaf_rounds_completed", "counter", "Rounds published.");
  x.sample("fedcaf_rounds_completed", s.completed());
  x.gauge("fedcaf_round", "The round under way (the last, once ended).",
          s.round);
  size_t connected = 0;
  for (const auto& [id, c] : s.clients)
    connected += c.state == "registered" || c.state == "back" ? 1 : 0;
  x.gauge("fedcaf_clients_connected", "Clients connected now.",
          static_cast<double>(connected));
  transfer_families(x, s);
  x.gauge("fedcaf_rss_bytes", "Resident memory of this process.",
          s.memory.empty() ? std::nullopt
                           : std::optional<double>(
                                 static_cast<double>(s.memory.back().second)));
  x.gauge("fedcaf_rss_anon_bytes",
          "Anonymous resident memory: the process's own (RssAnon).",
          s.memory.empty()
              ? std::nullopt
              : std::optional<double>(static_cast<double>(s.rss_anon_bytes)));
  x.gauge("fedcaf_rss_file_bytes",
          "File-backed resident memory: mapped files such as a model in "
          "disk mode, which the kernel may drop (RssFile).",
          s.memory.empty()
              ? std::nullopt
              : std::optional<double>(static_cast<double>(s.rss_file_bytes)));
  x.family("fedcaf_refusals_total", "counter", "Frames refused as bad input.");
  x.sample("fedcaf_refusals_total", static_cast<double>(s.refusals));
  x.family("fedcaf_run_status", "gauge",
           "1 for the run's status now, 0 for the others.");
  for (const char* status : run_statuses)
    x.sample(std::string{"fedcaf_run_status{status=\""} + status + "\"}",
             s.status == status ? 1.0 : 0.0);
  round_families(x, s);
  secagg_families(x, s);
  auto out = x.take();
  append_prometheus(out, s.event_counts);
  return out;
}

namespace {

using nlohmann::json;

json optional_json(const std::optional<double>& v) {
  return v ? json(*v) : json();
}

json client_json(const live_snapshot& s, const std::string& id,
                 const live_client& c) {
  json entered = json::object();
  for (size_t p = 0; p < client_phase_count; ++p)
    if (c.entered_s[p] >= 0)
      entered[to_string(static_cast<client_phase>(p))] = c.entered_s[p];
  return {{"id", id},
          {"state", c.state},
          {"address", c.address},
          {"phase", to_string(c.phase)},
          {"phase_entered_s", entered},
          {"down_bytes", c.down_bytes},
          {"up_bytes", s.up_bytes(c)},
          {"total_bytes", s.model_bytes},
          {"bytes_down_round", c.down_wire_bytes},
          {"bytes_up_round", c.up_wire_bytes}};
}

json round_json(const live_round& r) {
  return {{"round", r.round},
          {"status", r.status},
          {"test_accuracy", optional_json(r.test_accuracy)},
          {"test_loss", optional_json(r.test_loss)},
          {"train_loss", r.train_loss},
          {"wall_seconds", r.wall_seconds},
          {"clients", r.clients},
          {"bytes_up", r.bytes_up},
          {"bytes_down", r.bytes_down},
          {"compression_up", optional_json(r.compression_up)},
          {"compression_down", optional_json(r.compression_down)},
          {"dp_epsilon", optional_json(r.dp_epsilon)},
          {"dp_sgd_epsilon", optional_json(r.dp_sgd_epsilon)}};
}

json event_json(const run_event_entry& e, double started_unix_s) {
  return {{"t_s", e.unix_s - started_unix_s},
          {"first_t_s", e.first_unix_s - started_unix_s},
          {"event", to_string(e.event)},
          {"reason", e.reason},
          {"client", e.client},
          {"last_client", e.last_client},
          {"count", e.count},
          {"detail", e.detail}};
}

json events_json(const live_snapshot& s) {
  json log = json::array();
  for (const auto& e : s.events)
    log.push_back(event_json(e, s.started_unix_s));
  json refused = json::array();
  for (const auto& e : s.refused)
    refused.push_back(event_json(e, s.started_unix_s));
  return {
      {"counts", by_name(s.event_counts)}, {"log", log}, {"refused", refused}};
}

json run_json(const live_snapshot& s) {
  const auto& r = s.run;
  return {{"scheduler", r.scheduler},
          {"num_clients", r.num_clients},
          {"federated_evaluation", r.federated_evaluation},
          {"secure_aggregation",
           {{"enabled", r.secure_aggregation},
            {"phase", r.secure_aggregation ? json(s.secagg_phase) : json()}}},
          {"compression",
           {{"upload", r.upload_encoding},
            {"download", r.download_encoding},
            {"zfp_tolerance", r.zfp_tolerance}}},
          {"dp",
           {{"dp_fedavg_noise_multiplier", r.dp_noise_multiplier},
            {"delta", r.dp_delta},
            {"dp_sgd", r.dp_sgd}}},
          {"relays", r.relays}};
}

} // namespace

std::string status_json(const live_snapshot& s) {
  json clients = json::array();
  for (const auto& [id, c] : s.clients)
    clients.push_back(client_json(s, id, c));
  json rounds = json::array();
  for (const auto& r : s.rounds)
    rounds.push_back(round_json(r));
  json memory = json::array();
  for (const auto& [t, rss] : s.memory)
    memory.push_back({t, rss});
  json out = {
      {"role", s.run.role},
      {"status", s.status},
      {"failure", s.failure},
      {"aggregator", s.run.aggregator},
      {"run", run_json(s)},
      {"round", s.round},
      {"rounds_completed", s.completed()},
      {"num_rounds", s.run.num_rounds},
      {"final_evaluation", s.final_evaluation},
      {"final_accuracy", s.ended() ? optional_json(s.last_accuracy()) : json()},
      {"model_bytes", s.model_bytes},
      {"refusals", s.refusals},
      {"clients_not_shown", s.clients_not_shown},
      {"clients", clients},
      {"rounds", rounds},
      {"memory", memory},
      {"rss_anon_bytes", s.rss_anon_bytes},
      {"rss_file_bytes", s.rss_file_bytes},
      {"events", events_json(s)}};
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

} // namespace fedcaf
