#pragma once
// The run report: one record per round plus totals, written as JSON.
// Value types only.

#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fedcaf/error.hpp"

namespace fedcaf {

/// Figures clients reported by name, each a mean weighted by the samples
/// of the clients that reported it.
struct client_figures {
  uint32_t clients = 0; ///< clients that reported
  uint64_t samples = 0; ///< their samples, summed
  std::vector<std::pair<std::string, double>> means;

  /// Returns the mean of figure `name`, or nullopt iff none reported it.
  std::optional<double> find(const std::string& name) const;
};

/// Combines clients' named figures, each a mean weighted by the reporters'
/// sample counts (a figure that only clients of 0 samples reported: their
/// plain mean). Where 3 or more clients reported a figure, the reporter of
/// its highest value and the reporter of its lowest are left out, whatever
/// their weights: one client that lies (an accuracy of 0.99, a loss of 0)
/// then moves a figure only within the range of the others'. Value type.
class figures_sum {
public:
  /// Adds one client's figures over `samples` samples.
  void add(uint64_t samples,
           const std::vector<std::pair<std::string, double>>& values);
  bool empty() const { return clients_ == 0; }
  /// Returns the (trimmed) weighted means so far.
  client_figures mean() const;

private:
  /// Per figure: (value, samples) of each client that reported it.
  std::map<std::string, std::vector<std::pair<double, double>>> values_;
  uint32_t clients_ = 0;
  uint64_t samples_ = 0;
};

struct round_record {
  uint32_t round = 0;
  /// server: "completed", or "failed" (secure aggregation could not unmask
  /// the sum: the model stays as it was, `failure` says why).
  std::string status = "completed";
  std::string failure;
  /// server, secure aggregation: the clients excluded from this round for
  /// lying (shares that do not open, a masked upload that is no masked
  /// update, a wrong revealed share), with what they did.
  std::vector<std::pair<std::string, std::string>> excluded;
  std::optional<double> test_accuracy; ///< empty where not evaluated
  std::optional<double> test_loss;
  double wall_seconds = 0;
  uint64_t bytes_up = 0;       ///< update bytes received (server) or sent
  uint64_t bytes_down = 0;     ///< model bytes sent (server) or received
  double train_loss = 0;       ///< mean over clients (server) or own
  uint32_t clients = 0;        ///< updates folded into this round
  double download_seconds = 0; ///< client: receiving the global model
  double train_seconds = 0;    ///< client: local training
  double upload_seconds = 0;   ///< client: offer to stream closed
  double ended_unix_s = 0;     ///< wall-clock time the round ended here
  /// server: clients the run has registered whose update is not in this
  /// round (dropped after losing their connection, late for the deadline,
  /// or joined after the round started).
  std::vector<std::string> missing_clients;
  /// server: the clients whose update is in this model, and (AsyncScheduler)
  /// how many versions old the model each trained on was.
  std::vector<std::string> contributors;
  std::vector<uint32_t> staleness;
  /// server with relays (server_configs.relays): each relay in this round
  /// and the weight of its partial sum (the clients under it that
  /// completed; see "Trees of aggregators").
  std::vector<std::pair<std::string, double>> relay_weights;
  /// server, DP-FedAvg: epsilon spent after this round (RDP accountant,
  /// sample rate = clients per round / clients, at dp_fedavg.delta).
  std::optional<double> dp_epsilon;
  /// DP-SGD (train_configs.dp): epsilon spent on a client's own samples
  /// (record-level, at train_configs.dp.delta, over every local step it has
  /// taken); client: its own; server: the largest of this round's clients.
  std::optional<double> dp_sgd_epsilon;
  /// server, federated evaluation: the clients' evaluation of this round's
  /// model on their own data. Where the server does not evaluate the model,
  /// test_accuracy and test_loss are its "accuracy" and "loss".
  std::optional<client_figures> client_metrics;
  /// server: the training figures this round's contributors reported.
  std::optional<client_figures> client_train_metrics;
  /// Server, robust rules: per client, how many of its values the round
  /// dropped as extreme (TrimmedMean: trim_ratio of each coordinate's from
  /// each end; Median: all but the middle one or two).
  std::optional<std::vector<std::pair<std::string, uint64_t>>> trimmed_values;
  /// Server: per client, the bytes it sent (frames) and received (chunk
  /// payloads) in this round.
  std::vector<std::pair<std::string, std::pair<uint64_t, uint64_t>>>
      client_bytes;
  /// Server, with compression: the model bytes the round's updates (or
  /// downloads) stand for, over the bytes that crossed the wire for them.
  std::optional<double> compression_up;
  std::optional<double> compression_down;
};

struct run_report {
  std::string role; ///< simulate | server | client
  /// running (written between rounds) | completed | failed | interrupted
  /// (SIGINT or SIGTERM); empty: completed or failed, as `failure` says.
  /// server: the checkpoints this run resumed from (their rounds), oldest
  /// first; its rounds before the last of them came from the checkpoint.
  std::vector<uint32_t> resumed_from;
  std::string status;
  std::string aggregator; ///< server_configs.aggregator (server, simulate)
  std::string scheduler;  ///< server_configs.scheduler
  std::string node;       ///< client id, or "server"
  std::vector<round_record> rounds;
  uint64_t peak_rss_bytes = 0;
  uint64_t refusals = 0; ///< frames refused as bad input
  /// Updates refused for their content: NaN or infinite values, or farther
  /// from the global model than aggregator_kwargs.max_update_norm.
  uint64_t poisoned_updates = 0;
  uint32_t peak_in_flight = 0; ///< most chunks unacknowledged on a stream
  uint64_t bytes_sent = 0;     ///< model and update payload bytes sent
  uint64_t bytes_received = 0; ///< model and update payload bytes received
  /// client: failed connection attempts; server: uploads collected again
  /// because a client was dropped mid-round.
  uint64_t retries = 0;
  uint64_t resumes = 0; ///< reconnections that resumed where they stopped
  /// server: what befell clients and rounds, counted by event and reason
  /// ("lost" -> "no_goodbye" -> 1; run_events, the live view's counters).
  std::map<std::string, std::map<std::string, uint64_t>> events;
  /// Payload bytes sent (client) or served (server) a second time after a
  /// reconnect or a collection started again.
  uint64_t bytes_resent = 0;
  double total_seconds = 0;
  std::string failure; ///< empty on success
  /// server: rounds whose status is "failed" (the run went on); with any,
  /// the report's status is "rounds_failed" and ok is false.
  std::vector<uint32_t> failed_rounds;
  std::string config_yaml; ///< effective config, written as JSON
  /// simulate: each client's own report (its rounds, bytes, failure); a
  /// population's (cli/crowd.hpp): those of its clients that failed.
  std::vector<run_report> clients;
  /// simulate with a population: clients spawned (a member each time it
  /// is drawn after a round without it), and the most alive at once
  /// (summed over a tree's relays); 0 without one.
  uint64_t summoned_clients = 0;
  uint64_t peak_clients_alive = 0;
};

/// Returns the report as JSON text (schema in docs/operations.md, "Report").
std::string to_json(const run_report& r);

/// The report's status: its own, else "failed" (a failure), else
/// "rounds_failed" (failed rounds), else "completed".
std::string run_status(const run_report& r);

/// The version of the report's JSON layout: 2 added schema_version,
/// fedcaf_version, status, aggregator, scheduler and the clients' figures.
constexpr int report_schema_version = 2;

/// Writes to_json(r) to `path` atomically (a temporary file renamed over
/// it). Returns an error iff the file cannot be written.
result<void> write_report(const run_report& r, const std::string& path);

/// Returns ok iff a report can be written at `path` (checked before a run,
/// so that a bad path does not lose a long run's figures at its end).
result<void> check_report_path(const std::string& path);

/// Writes `text` to `path` atomically (a temporary file renamed over it).
/// Returns an error ("PATH: cannot write the WHAT") iff it cannot.
result<void> write_file_atomically(const std::string& path,
                                   std::string_view text,
                                   const std::string& what);

/// Returns ok iff a file can be written at `path`; else an error naming
/// `what` ("cannot write the WHAT to PATH: ...").
result<void> check_writable(const std::string& path, const std::string& what);

/// A JSON-lines file of the run's events, one object per line, flushed as
/// each is written, for a tracking tool or a notebook to tail:
///   {"event": "round", "t": <unix s>, ...the round's record as in the report}
///   {"event": "registered" | "lost" | "back" | "dropped" | "left" | "rejected" |
///    "evaluated", "t": ..., "client": "<id>", "detail": "..."}
///   {"event": "end", "t": ..., "status": "...", "failure": "..."}
/// Thread-safety: one writer at a time (the server actor).
class metrics_log {
public:
  /// Opens (truncates) `path`. Returns an error iff it cannot be written.
  static result<std::shared_ptr<metrics_log>> open(const std::string& path);

  void round(const round_record& r);
  void client(const std::string& event, const std::string& client_id,
              const std::string& detail = "");
  void end(const std::string& status, const std::string& failure);

private:
  explicit metrics_log(std::FILE* f) : file_(f, &std::fclose) {}
  void write(const std::string& line);

  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file_;
};

/// Returns the one progress line printed per round ("round r/N ...";
/// num_rounds 0: "round r ...").
std::string progress_line(const round_record& r, uint32_t num_rounds);

/// `rounds` as the report writes them: a JSON array.
std::string rounds_json(const std::vector<round_record>& rounds);

/// The rounds of rounds_json's text. Returns an error iff the text is not
/// such an array.
result<std::vector<round_record>> rounds_from_json(const std::string& text);

} // namespace fedcaf
