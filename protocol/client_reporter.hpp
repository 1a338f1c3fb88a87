#pragma once
// What a client writes into its run report and counts for the console:
// each round's record (bytes each way; seconds downloading, training and
// uploading; DP-SGD's epsilon), the server's evaluation of each global
// model, bytes sent a second time, the deepest window, retries and
// resumptions, the failure and the totals. It reads no clock: the client
// actor passes the time in.
// Thread-safety: none; owned by the client actor (the report is read once
// the actor has terminated; transfer_progress counts atomically).

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "fedcaf/progress.hpp"
#include "fedcaf/report.hpp"
#include "messages/codec.hpp"

namespace fedcaf {

class client_reporter {
public:
  using time_point = std::chrono::steady_clock::time_point;

  /// Writes into `report` as node `client_id`, and counts transfer bytes
  /// into `progress` iff it is set. REQUIRES: `report` outlives it.
  client_reporter(run_report* report, std::string client_id,
                  std::shared_ptr<transfer_progress> progress);

  /// The client starts now.
  void start(time_point now) { started_ = now; }

  /// Round `rs` starts now; its model has `model_bytes` bytes.
  void begin_round(const msg::round_start& rs, uint64_t model_bytes,
                   time_point now);

  /// A chunk of the model arrived, `wire_bytes` long.
  void downloaded(uint64_t wire_bytes);
  /// The whole model has arrived now.
  void download_done(time_point now);
  /// Training ended now with offer `o` (DP-SGD's epsilon if it ran).
  void trained(const msg::offer& o, std::optional<double> dp_sgd_epsilon,
               time_point now);
  /// A chunk of the update went, `payload_bytes` long (`resent`: again).
  void uploaded(uint64_t payload_bytes, bool resent);
  /// `bytes` go a second time (a reconnect, or the updates collected again).
  void resent(uint64_t bytes) { report_->bytes_resent += bytes; }
  /// A stream had `chunks` unacknowledged at once.
  void in_flight(uint32_t chunks);
  void retried() { ++report_->retries; }
  void resumed() { ++report_->resumes; }

  /// Attaches the server's evaluation `m` of a global model to the round
  /// that produced it; nothing iff `m` is not evaluated.
  void note_metrics(const msg::metrics& m);

  /// The upload closed now (`unix_s`: the wall clock's seconds); the
  /// SecAgg+ quantizer clipped `clipped` values (a warning iff any). The
  /// round's record goes into the report, replacing that of the same round
  /// (an update sent again).
  void upload_closed(time_point now, double unix_s, uint64_t clipped);

  /// The client fails with `e`: logged, and the report's failure.
  void failed(const error& e);

  /// The client ends now, having used `peak_rss_bytes` at most.
  void finish(time_point now, uint64_t peak_rss_bytes);

  /// The round being recorded.
  const round_record& record() const { return record_; }

private:
  run_report* report_;
  std::string client_id_;
  std::shared_ptr<transfer_progress> progress_;
  round_record record_;
  time_point started_{};
  time_point round_started_{};
  time_point upload_started_{};
};

/// Returns the seconds from `from` to `to`.
inline double seconds_between(std::chrono::steady_clock::time_point from,
                              std::chrono::steady_clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

} // namespace fedcaf
