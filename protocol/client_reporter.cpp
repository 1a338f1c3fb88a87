#include "protocol/client_reporter.hpp"

#include <algorithm>

#include "fedcaf/log.hpp"

namespace fedcaf {

client_reporter::client_reporter(run_report* report, std::string client_id,
                                 std::shared_ptr<transfer_progress> progress)
    : report_(report), client_id_(std::move(client_id)),
      progress_(std::move(progress)) {
  report_->node = client_id_;
}

void client_reporter::begin_round(const msg::round_start& rs,
                                  uint64_t model_bytes, time_point now) {
  record_ = round_record{};
  record_.round = rs.round;
  round_started_ = now;
  if (progress_)
    progress_->round_started(rs.round, model_bytes,
                             rs.evaluate_only ? 0 : model_bytes);
}

void client_reporter::downloaded(uint64_t wire_bytes) {
  record_.bytes_down += wire_bytes;
  report_->bytes_received += wire_bytes;
  if (progress_)
    progress_->moved_down(wire_bytes);
}

void client_reporter::download_done(time_point now) {
  record_.download_seconds = seconds_between(round_started_, now);
}

void client_reporter::trained(const msg::offer& o,
                              std::optional<double> dp_sgd_epsilon,
                              time_point now) {
  record_.train_loss = o.train_loss;
  record_.train_seconds = o.train_seconds;
  if (dp_sgd_epsilon)
    record_.dp_sgd_epsilon = dp_sgd_epsilon;
  upload_started_ = now;
}

void client_reporter::uploaded(uint64_t payload_bytes, bool resent) {
  record_.bytes_up += payload_bytes;
  report_->bytes_sent += payload_bytes;
  if (progress_)
    progress_->moved_up(payload_bytes);
  if (resent)
    report_->bytes_resent += payload_bytes;
}

void client_reporter::in_flight(uint32_t chunks) {
  report_->peak_in_flight = std::max(report_->peak_in_flight, chunks);
}

void client_reporter::note_metrics(const msg::metrics& m) {
  if (!m.evaluated)
    return;
  for (auto& r : report_->rounds)
    if (r.round == m.round) {
      r.test_accuracy = m.test_accuracy;
      r.test_loss = m.test_loss;
    }
}

void client_reporter::upload_closed(time_point now, double unix_s,
                                    uint64_t clipped) {
  record_.upload_seconds = seconds_between(upload_started_, now);
  record_.wall_seconds = seconds_between(round_started_, now);
  if (clipped > 0)
    log_line(log_level::warning, client_id_,
             "round " + std::to_string(record_.round) + ": " +
                 std::to_string(clipped) +
                 " values of its weighted model lay beyond the secure "
                 "aggregation clipping_range and were clipped: raise "
                 "server_configs.secure_aggregation.clipping_range");
  log_line(log_level::debug, client_id_,
           "round " + std::to_string(record_.round) + ": upload closed " +
               std::to_string(record_.upload_seconds) +
               " s after training ended");
  record_.ended_unix_s = unix_s;
  if (!report_->rounds.empty() && report_->rounds.back().round == record_.round)
    report_->rounds.back() = record_; // sent again
  else
    report_->rounds.push_back(record_);
}

void client_reporter::failed(const error& e) {
  log_line(log_level::error, client_id_, to_string(e));
  report_->failure = to_string(e);
}

void client_reporter::finish(time_point now, uint64_t peak_rss_bytes) {
  report_->total_seconds = seconds_between(started_, now);
  report_->peak_rss_bytes = peak_rss_bytes;
}

} // namespace fedcaf
