#pragma once
// The server's account of a run, without CAF: the round's traffic, the
// training figures of its offers, one record per round in the run report
// (written to report_path between rounds), the progress line printed per
// round (held back, with federated evaluation, until the clients have
// evaluated the round's model), and the events of the metrics file and the
// live view. It never reads a clock: callers pass the times.
// Thread-safety: none; owned by the server actor, which owns the report
// until it terminates.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "fedcaf/compression.hpp"
#include "fedcaf/live_status.hpp"
#include "fedcaf/log.hpp"
#include "fedcaf/model_snapshot.hpp"
#include "fedcaf/progress.hpp"
#include "fedcaf/report.hpp"
#include "messages/codec.hpp"
#include "protocol/evaluation_tally.hpp"
#include "protocol/refusal_log.hpp"
#include "protocol/registration_log.hpp"

namespace fedcaf {

struct reporter_options {
  uint32_t num_rounds = 0;
  /// A round's line waits for the clients' evaluation of its model.
  bool federated_evaluation = false;
  std::string report_path; ///< empty: written only at the end
  /// --report-html: the live view's static page, written with the report
  /// (empty: none). REQUIRES: live is set where this is.
  std::string report_html_path;
  std::shared_ptr<metrics_log> metrics;        ///< null: no metrics file
  std::shared_ptr<live_status> live;           ///< null: no live view
  std::shared_ptr<transfer_progress> progress; ///< null: no console counts
  compression_config compression; ///< for the records' compression ratios
  /// DP-FedAvg (noise multiplier 0: off): each record's epsilon.
  double dp_noise_multiplier = 0;
  double dp_sample_rate = 1;
  double dp_delta = 1e-5;
  bool robust = false; ///< records say whose values the round dropped
  /// Counts updates the aggregator refused for their content; null: none.
  refusal_counter poisoned;
  /// Round lines on stdout; false: at debug level in the log (a relay
  /// inside simulate, whose lines would interleave with the root's).
  bool print_rounds = true;
};

/// What the aggregator says of a round it published.
struct round_outcome {
  uint32_t round = 0;
  uint32_t clients = 0;      ///< updates averaged into the model
  double loss = 0;           ///< the clients' mean training loss
  double dp_sgd_epsilon = 0; ///< largest of the clients' (0: none)
  std::vector<std::string> missing;
  std::vector<std::string> contributors;
  std::vector<uint32_t> staleness;
  /// Clients excluded from the round for lying, with what they did.
  std::vector<std::pair<std::string, std::string>> excluded;
  /// The relays among the contributors, with their sums' weights.
  std::vector<std::pair<std::string, double>> relay_weights;
};

/// The run's figures at a moment, as the report states them.
struct report_stamp {
  double total_seconds = 0; ///< since the server started
  uint64_t refusals = 0;    ///< frames refused so far
};

class round_reporter {
public:
  /// Writes into `report`. REQUIRES: `report` outlives the reporter.
  round_reporter(reporter_options options, run_report* report);

  // -- traffic ---------------------------------------------------------------
  /// Round `round` starts, `expected_bytes` to download (and as many to
  /// upload): the live view and the console are told, the counts start.
  void round_started(uint32_t round, uint64_t expected_bytes);
  /// AsyncScheduler: a task adds `model_bytes` to download and upload.
  void expect_task(uint64_t model_bytes);
  /// A round (or, async, a model version) starts: its counts start at 0.
  void start_traffic();
  /// Client `id` was served `wire_bytes` of payload standing for
  /// `model_bytes` of the model; `last` iff the model's last chunk.
  void count_down(const std::string& id, uint64_t wire_bytes,
                  uint64_t model_bytes, bool last);
  /// Client `id` sent an upload frame of `frame_bytes`.
  void count_up(const std::string& id, uint64_t frame_bytes);

  // -- clients' phases (the live view) ---------------------------------------
  /// AsyncScheduler: client `id` got task `round`.
  void task_started(const std::string& id, uint32_t round);
  /// Client `id` ended its upload stream.
  void upload_ended(const std::string& id);
  /// Client `id` sends its update of the round again.
  void upload_again(const std::string& id);
  /// The connected clients are asked to evaluate the final model.
  void final_evaluation_started();
  /// Secure aggregation's phase is now `phase`.
  void secagg_phase(const char* phase);
  /// Client `id`'s offer for the open round: its training figures over
  /// `samples` samples (a repeated offer replaces them).
  void note_offer(const std::string& id, uint64_t samples,
                  msg::named_values figures);

  // -- rounds ----------------------------------------------------------------
  /// Returns round `o.round`'s record: traffic since start_traffic, the
  /// figures of its contributors' offers (then forgotten), privacy spent
  /// and, for robust rules, whose values `model` dropped (also logged).
  round_record open_record(round_outcome o, const model_snapshot& model);
  /// A relay's round `round` could not have min_clients: its group sat its
  /// parent's round out; the report counts the round as failed (the
  /// scheduler logged why).
  void sat_out(uint32_t round);
  /// Adds `record`, which took `wall_seconds` and ended at `ended_unix_s`,
  /// to the report; prints its line (or, with federated evaluation, holds
  /// it) and saves the report.
  void finish_round(round_record record, double wall_seconds,
                    double ended_unix_s, const report_stamp& now);
  /// Returns the round whose line awaits its evaluations, if any.
  std::optional<uint32_t> held() const { return held_round_; }
  /// Prints the held line, if any, and saves the report with it.
  void print_held(const report_stamp& now);
  /// Puts the clients' evaluation `figures` of round `round`'s model into
  /// its record (and test_accuracy / test_loss, unless the server's own
  /// evaluation set them). Returns false iff the report has no such round
  /// (the initial model).
  bool put_client_metrics(uint32_t round, const client_figures& figures);
  /// Puts `of`, the clients' evaluations so far of a model, into its
  /// round's record; iff `complete` (every client it was sent to
  /// answered, and it is the model served now), prints that round's line
  /// if it was held. The initial model's are logged once `all_answered`.
  /// Returns true iff `complete` and `of` is of a round of the report.
  bool note_evaluations(const model_evaluations& of, bool all_answered,
                        bool complete, const report_stamp& now);
  /// Writes the report and the HTML page as they stand (status running),
  /// those whose path is set, iff the run has not ended.
  void save(const report_stamp& now);

  // -- events and the end ----------------------------------------------------
  /// A client event for the metrics file and the live view ("evaluated"
  /// moves the client's phase on, "rejected" and "excluded" end it).
  void event(const char* what, const std::string& id,
             const std::string& detail);
  /// Client `id` registered from `from` at `now`: an event, and logged as
  /// registration_log paces it (the first ten, then sums once a second).
  void registered(const std::string& id, const std::string& from,
                  registration_log::time_point now);
  /// Logs the registrations counted and not yet logged (a round starts).
  void registrations_settled(registration_log::time_point now);
  /// Client `id` resumed its session from `from` (`how`: reconnected, or
  /// same_connection: it registered again on its connection, its transfer
  /// stalled): counted, logged, an event.
  void resumed(const std::string& id, const std::string& from, const char* how);
  /// Counts `e` for `reason`, a token (run_events), in the report, and
  /// logs it in the live view, of client `id` (empty: of none).
  void note(run_event e, const std::string& reason, const std::string& id,
            const std::string& detail);
  /// A Hello from `peer` (its address) was refused with `why`.
  void refused(const std::string& peer, const error& why);
  /// Client `id` said goodbye: `reason` (its token) and `why` (for people);
  /// it leaves the run now.
  void left(const std::string& id, const std::string& reason,
            const std::string& why);
  /// Client `id` lost its connection: `reason` (no_goodbye, or the error
  /// that ended it), `why` for people; it has `grace_ms` to resume.
  void lost(const std::string& id, const std::string& reason,
            const std::string& why, int64_t grace_ms);
  /// Client `id` did not come back within `grace_ms`: dropped.
  void dropped(const std::string& id, int64_t grace_ms);
  /// A simulation's client `id` was sent away as round `round` opened
  /// without it: in the metrics ("left"), no longer in the live view;
  /// neither logged nor counted (a thousand a round are no news).
  void retired(const std::string& id, uint32_t round);
  /// Client `id` evaluated round `round`'s model on `samples` samples.
  void evaluated(const std::string& id, uint32_t round, uint64_t samples);
  /// The run ends, failed iff `failure` is not empty: the report is no
  /// longer saved between rounds.
  void end(const std::string& failure);
  /// The run is over: the end event (once) and the report's totals.
  void close(const report_stamp& now, uint64_t peak_rss_bytes);

private:
  /// The level of its registration lines: debug on an inner node of a
  /// simulated tree (print_rounds off), whose root speaks for the run.
  log_level inner_level() const {
    return options_.print_rounds ? log_level::info : log_level::debug;
  }
  void print_line(const round_record& record) const;
  /// Shows round `record` (published, or with its clients' evaluation
  /// added) in the live view.
  void show(const round_record& record) const;
  /// True iff clients evaluate the model of round `round` before training.
  bool evaluates(uint32_t round) const;
  void log_trimmed(uint32_t round, const model_snapshot& model) const;
  std::optional<client_figures>
  train_figures_of(const std::vector<std::string>& contributors);
  round_record* record_of(uint32_t round);
  void end_event();

  reporter_options options_;
  run_report* report_;
  /// What befell clients and rounds (note), by event and reason: the
  /// report's `events` as it is saved and closed.
  run_event_counts event_counts_;
  uint64_t bytes_up_ = 0;
  uint64_t bytes_down_ = 0;
  uint64_t raw_down_ = 0; ///< the model bytes bytes_down_ carried, decoded
  /// This round's bytes on the wire per client: up (frames), down (payload).
  std::map<std::string, std::pair<uint64_t, uint64_t>> traffic_;
  /// The open round's offers' training figures: samples and values.
  std::map<std::string, std::pair<uint64_t, msg::named_values>> train_figures_;
  std::optional<uint32_t> held_round_;      ///< its line awaits evaluations
  std::set<uint32_t> evaluated_by_clients_; ///< test_accuracy from clients
  bool ended_ = false;                      ///< the report is no longer saved
  bool ended_logged_ = false; ///< the metrics file has its end event
  registration_log registrations_;
};

} // namespace fedcaf
