#include "protocol/round_reporter.hpp"

#include <algorithm>
#include <cstdio>
#include <string_view>

#include "fedcaf/live_page.hpp"
#include "fedcaf/log.hpp"
#include "fedcaf/rdp_accountant.hpp"

namespace fedcaf {

round_reporter::round_reporter(reporter_options options, run_report* report)
    : options_(std::move(options)), report_(report) {}

void round_reporter::round_started(uint32_t round, uint64_t expected_bytes) {
  if (options_.live)
    options_.live->round_started(round, evaluates(round));
  if (options_.progress)
    options_.progress->round_started(round, expected_bytes, expected_bytes);
  start_traffic();
}

void round_reporter::expect_task(uint64_t model_bytes) {
  if (options_.progress)
    options_.progress->expect(model_bytes, model_bytes);
}

void round_reporter::start_traffic() {
  bytes_up_ = bytes_down_ = raw_down_ = 0;
  traffic_.clear();
}

void round_reporter::count_down(const std::string& id, uint64_t wire_bytes,
                                uint64_t model_bytes, bool last) {
  bytes_down_ += wire_bytes;
  raw_down_ += model_bytes;
  traffic_[id].second += wire_bytes;
  if (options_.live)
    options_.live->served(id, wire_bytes, model_bytes, last);
  if (options_.progress)
    options_.progress->moved_down(wire_bytes);
  report_->bytes_sent += wire_bytes;
}

void round_reporter::count_up(const std::string& id, uint64_t frame_bytes) {
  traffic_[id].first += frame_bytes;
  if (options_.live)
    options_.live->received(id, frame_bytes);
  if (options_.progress)
    options_.progress->moved_up(frame_bytes);
  bytes_up_ += frame_bytes;
  report_->bytes_received += frame_bytes;
}

void round_reporter::task_started(const std::string& id, uint32_t round) {
  if (options_.live)
    options_.live->task_started(id, evaluates(round));
}

void round_reporter::upload_ended(const std::string& id) {
  if (options_.live)
    options_.live->upload_ended(id);
}

void round_reporter::upload_again(const std::string& id) {
  if (options_.live)
    options_.live->upload_again(id);
}

void round_reporter::final_evaluation_started() {
  if (options_.live)
    options_.live->final_evaluation_started();
}

void round_reporter::secagg_phase(const char* phase) {
  if (options_.live)
    options_.live->set_secagg_phase(phase);
}

bool round_reporter::evaluates(uint32_t round) const {
  return options_.federated_evaluation && round > 1;
}

void round_reporter::note_offer(const std::string& id, uint64_t samples,
                                msg::named_values figures) {
  train_figures_[id] = {samples, std::move(figures)};
}

void round_reporter::sat_out(uint32_t round) {
  report_->failed_rounds.push_back(round);
  note(run_event::round_failed, "sat_out", "",
       "round " + std::to_string(round) +
           ": too few clients under this relay; it sat its parent's round out");
}

round_record round_reporter::open_record(round_outcome o,
                                         const model_snapshot& model) {
  auto record = round_record{};
  record.round = o.round;
  record.excluded = std::move(o.excluded);
  if (!model.failure.empty()) { // nobody's update is in the model
    record.status = "failed";
    record.failure = model.failure;
    report_->failed_rounds.push_back(o.round);
    note(run_event::round_failed, "no_model", "",
         "round " + std::to_string(o.round) + ": " + model.failure);
    o.contributors.clear();
    o.relay_weights.clear();
    o.clients = 0;
  }
  record.bytes_up = bytes_up_;
  record.bytes_down = bytes_down_;
  record.client_bytes.assign(traffic_.begin(), traffic_.end());
  const auto& z = options_.compression;
  if (z.up && bytes_up_ > 0)
    record.compression_up = static_cast<double>(o.clients) *
                            static_cast<double>(model.bytes.size()) /
                            static_cast<double>(bytes_up_);
  if (z.down && bytes_down_ > 0)
    record.compression_down =
        static_cast<double>(raw_down_) / static_cast<double>(bytes_down_);
  record.train_loss = o.loss;
  record.clients = o.clients;
  record.missing_clients = std::move(o.missing);
  if (options_.dp_noise_multiplier > 0)
    record.dp_epsilon =
        epsilon_for(options_.dp_sample_rate, options_.dp_noise_multiplier,
                    o.round, options_.dp_delta)
            .epsilon;
  if (o.dp_sgd_epsilon > 0)
    record.dp_sgd_epsilon = o.dp_sgd_epsilon;
  record.client_train_metrics = train_figures_of(o.contributors);
  record.contributors = std::move(o.contributors);
  record.staleness = std::move(o.staleness);
  record.relay_weights = std::move(o.relay_weights);
  if (options_.robust) {
    record.trimmed_values = model.trimmed_values;
    log_trimmed(o.round, model);
  }
  return record;
}

void round_reporter::finish_round(round_record record, double wall_seconds,
                                  double ended_unix_s,
                                  const report_stamp& now) {
  record.wall_seconds = wall_seconds;
  record.ended_unix_s = ended_unix_s;
  report_->rounds.push_back(record);
  show(record);                      // published: the live view counts it now
  if (options_.federated_evaluation) // printed with the clients' figures
    held_round_ = record.round;
  else
    print_line(record);
  save(now);
}

void round_reporter::print_held(const report_stamp& now) {
  if (!held_round_)
    return;
  if (auto* r = record_of(*held_round_))
    print_line(*r);
  held_round_.reset();
  save(now); // with the clients' evaluation
}

bool round_reporter::put_client_metrics(uint32_t round,
                                        const client_figures& figures) {
  auto* r = record_of(round);
  if (!r)
    return false;
  r->client_metrics = figures;
  if (!r->test_accuracy || evaluated_by_clients_.count(r->round)) {
    evaluated_by_clients_.insert(r->round);
    r->test_accuracy = r->client_metrics->find("accuracy");
    r->test_loss = r->client_metrics->find("loss");
  }
  show(*r);
  return true;
}

bool round_reporter::note_evaluations(const model_evaluations& of,
                                      bool all_answered, bool complete,
                                      const report_stamp& now) {
  if (!put_client_metrics(of.round, of.sum.mean())) {
    if (all_answered) // the initial model: logged, not a round of the report
      log_line("server", evaluation_tally::initial_line(of));
    return false;
  }
  if (complete && held_round_ == of.round)
    print_held(now);
  return complete;
}

void round_reporter::save(const report_stamp& now) {
  if (options_.live)
    options_.live->set_refusals(now.refusals);
  if (ended_)
    return;
  if (!options_.report_path.empty()) {
    report_->events = by_name(event_counts_);
    report_->status = "running";
    report_->refusals = now.refusals;
    report_->total_seconds = now.total_seconds;
    if (auto ok = write_report(*report_, options_.report_path); !ok)
      log_line(log_level::error, "server", to_string(ok.err()));
    report_->status.clear();
  }
  if (!options_.report_html_path.empty() && options_.live)
    if (auto ok = write_static_page(options_.live->snapshot(),
                                    options_.report_html_path);
        !ok)
      log_line(log_level::error, "server", to_string(ok.err()));
}

void round_reporter::event(const char* what, const std::string& id,
                           const std::string& detail) {
  if (options_.metrics)
    options_.metrics->client(what, id, detail);
  if (!options_.live)
    return;
  std::string_view w{what};
  if (w == "evaluated")
    options_.live->evaluated(id);
  else if (w == "rejected" || w == "excluded")
    options_.live->rejected(id);
  else
    options_.live->client_event(id, what, detail);
}

void round_reporter::note(run_event e, const std::string& reason,
                          const std::string& id, const std::string& detail) {
  count_event(event_counts_, e, reason); // into the report as it is saved
  if (options_.live)
    options_.live->note_event(e, reason, id, detail);
}

void round_reporter::refused(const std::string& peer, const error& why) {
  note(run_event::refused, to_string(why.code), peer, why.message);
}

void round_reporter::registered(const std::string& id, const std::string& from,
                                registration_log::time_point now) {
  if (auto line = registrations_.note(id, from, now))
    log_line(inner_level(), "server", *line);
  event("registered", id, from);
  note(run_event::registered, "joined", id, "from " + from);
}

void round_reporter::registrations_settled(registration_log::time_point now) {
  if (auto line = registrations_.flush(now))
    log_line(inner_level(), "server", *line);
}

void round_reporter::resumed(const std::string& id, const std::string& from,
                             const char* how) {
  ++report_->resumes;
  log_line("server", id + " is back from " + from + "; it resumes");
  event("back", id, from);
  note(run_event::resumed, how, id, "from " + from);
}

void round_reporter::lost(const std::string& id, const std::string& reason,
                          const std::string& why, int64_t grace_ms) {
  event("lost", id, why);
  note(run_event::lost, reason, id, why);
  log_line(log_level::warning, "server",
           id + " lost its connection (" + why + "); waiting " +
               std::to_string(grace_ms) + " ms for it to resume");
}

void round_reporter::left(const std::string& id, const std::string& reason,
                          const std::string& why) {
  event("left", id, why);
  note(run_event::left, reason, id, why);
  log_line(log_level::warning, "server",
           id + " left the run: " + why + "; dropped now (no wait for it)");
}

void round_reporter::retired(const std::string& id, uint32_t round) {
  if (options_.metrics)
    options_.metrics->client("left", id,
                             "not drawn for round " + std::to_string(round));
  if (options_.live)
    options_.live->forget_client(id);
}

void round_reporter::dropped(const std::string& id, int64_t grace_ms) {
  event("dropped", id, "");
  note(run_event::dropped, "no_resume", id,
       "did not come back within " + std::to_string(grace_ms) + " ms");
  log_line(log_level::warning, "server",
           "dropped " + id + ": it did not come back within " +
               std::to_string(grace_ms) + " ms");
}

void round_reporter::evaluated(const std::string& id, uint32_t round,
                               uint64_t samples) {
  event("evaluated", id,
        "round " + std::to_string(round) + ", " + std::to_string(samples) +
            " samples");
}

void round_reporter::end(const std::string& failure) {
  ended_ = true;
  report_->failure = failure;
}

void round_reporter::close(const report_stamp& now, uint64_t peak_rss_bytes) {
  end_event();
  report_->node = "server";
  report_->total_seconds = now.total_seconds;
  report_->peak_rss_bytes = peak_rss_bytes;
  report_->refusals = now.refusals;
  report_->events = by_name(event_counts_);
  if (options_.poisoned)
    report_->poisoned_updates = options_.poisoned->load();
}

void round_reporter::end_event() {
  if (ended_logged_)
    return;
  ended_logged_ = true;
  auto why = report_->failure;
  std::string status = !why.empty() && why.rfind("interrupted", 0) == 0
                           ? "interrupted"
                       : !why.empty()                    ? "failed"
                       : !report_->failed_rounds.empty() ? "rounds_failed"
                                                         : "completed";
  if (why.empty() && !report_->failed_rounds.empty())
    why = std::to_string(report_->failed_rounds.size()) +
          " rounds failed (see their records)";
  if (options_.live)
    options_.live->ended(status, why);
  if (options_.metrics)
    options_.metrics->end(status, why);
}

void round_reporter::print_line(const round_record& record) const {
  if (options_.metrics)
    options_.metrics->round(record);
  if (!options_.print_rounds)
    return log_line(log_level::debug, "relay",
                    progress_line(record, options_.num_rounds));
  fedcaf::print_line(progress_line(record, options_.num_rounds));
  std::fflush(stdout);
}

void round_reporter::show(const round_record& record) const {
  if (options_.live)
    options_.live->round_finished(record);
}

/// Robust rules: says whose values the round dropped most, as shares of
/// each update's values (an attacker's stand out near 100%).
void round_reporter::log_trimmed(uint32_t round,
                                 const model_snapshot& model) const {
  uint64_t elements = 0;
  for (const auto& t : model.layout.tensors)
    elements += t.byte_size / dtype_bytes(t.type);
  const auto& trimmed = model.trimmed_values;
  if (trimmed.empty() || elements == 0)
    return;
  auto sorted = trimmed;
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& a, const auto& b) { return a.second > b.second; });
  std::string line = "round " + std::to_string(round) + ": values dropped";
  for (size_t i = 0; i < sorted.size() && i < 4; ++i) {
    char share[32];
    std::snprintf(share, sizeof share, " %.1f%%",
                  100.0 * static_cast<double>(sorted[i].second) /
                      static_cast<double>(elements));
    line += (i ? ", " : " ") + sorted[i].first + share;
  }
  if (sorted.size() > 4)
    line += ", ...";
  log_line("server", line);
}

std::optional<client_figures>
round_reporter::train_figures_of(const std::vector<std::string>& contributors) {
  figures_sum sum;
  for (const auto& id : contributors)
    if (auto it = train_figures_.find(id);
        it != train_figures_.end() && !it->second.second.empty())
      sum.add(it->second.first, it->second.second);
  train_figures_.clear();
  if (sum.empty())
    return std::nullopt;
  return sum.mean();
}

round_record* round_reporter::record_of(uint32_t round) {
  for (auto& r : report_->rounds)
    if (r.round == round)
      return &r;
  return nullptr;
}

} // namespace fedcaf
