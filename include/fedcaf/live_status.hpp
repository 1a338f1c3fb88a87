#pragma once
// What the live view (--http) and the static page (--report-html) show: the
// run's shape (its rule, secure aggregation, compression, DP), each
// client's phase in the round under way with its transfer progress and
// when it entered each phase, the rounds' history, memory over time, and
// how the run ended. The server actor writes it as protocol events happen
// (per chunk: one lookup by id and a few additions, no allocation);
// renderers read a copy of it (snapshot()).
// Bounded: at most max_clients() clients (an id enters only when it
// registers; past the cap a dropped client gives way, else the newcomer is
// only counted), max_rounds rounds and max_memory_points memory samples
// (the older half thinned), a fixed record per client.
// Thread-safety: every member function locks; safe from any thread.

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fedcaf/report.hpp"
#include "fedcaf/run_events.hpp"

namespace fedcaf {

/// Where a client stands in the round under way, as the server sees it.
enum class client_phase : uint8_t {
  waiting,     ///< not served this round yet (or not chosen for it)
  downloading, ///< served chunks of the model, not its last one yet
  evaluating,  ///< federated evaluation: has the model, not its evaluation
  training,    ///< has the model (and evaluated it); no update chunk yet
  uploading,   ///< sent update chunks, not its end of stream yet
  done,        ///< its update delivered (or its final evaluation in)
  rejected,    ///< its update was refused, or it was excluded: sits out
};
inline constexpr size_t client_phase_count = 7;

/// "waiting", "downloading", "evaluating", "training", "uploading", "done"
/// or "rejected".
const char* to_string(client_phase p);

/// The run's shape, as the page states it.
struct live_run {
  std::string role = "server"; ///< server | simulate
  std::string aggregator;
  std::string scheduler;
  uint32_t num_rounds = 0;
  uint32_t num_clients = 0;
  bool async = false; ///< AsyncScheduler: rounds are server steps
  bool federated_evaluation = false;
  bool secure_aggregation = false;
  std::string upload_encoding = "none";   ///< compression of uploads
  std::string download_encoding = "none"; ///< of downloads
  double zfp_tolerance = 0;               ///< zfp only
  double dp_noise_multiplier = 0;         ///< DP-FedAvg; 0: off
  double dp_delta = 0;
  bool dp_sgd = false; ///< clients train with DP-SGD
  /// server_configs.relays: the clients that are relays, and the most
  /// clients each sums (the page marks them).
  std::map<std::string, uint64_t> relays;
};

/// One client as the page shows it. Counts are of the round under way (a
/// task, under AsyncScheduler) unless named total.
struct live_client {
  std::string state = "registered"; ///< registered | back | lost | dropped
  std::string address;
  client_phase phase = client_phase::waiting;
  uint64_t down_bytes = 0;      ///< model bytes served (as decoded)
  uint64_t down_wire_bytes = 0; ///< payload bytes served on the wire
  uint64_t up_chunks = 0;       ///< update chunks received
  uint64_t up_wire_bytes = 0;   ///< update frame bytes received
  uint64_t down_wire_total = 0; ///< over the run
  uint64_t up_wire_total = 0;   ///< over the run
  double started_unix_s = 0;    ///< when its round (or task) started
  /// Seconds after started_unix_s at which it entered each phase (indexed
  /// by client_phase); negative: not in this round.
  std::array<double, client_phase_count> entered_s{};
  double changed_unix_s = 0; ///< its last event (the oldest dropped goes)
};

/// One round of the history: the figures its record gave.
struct live_round {
  uint32_t round = 0;
  std::string status = "completed";
  std::optional<double> test_accuracy;
  std::optional<double> test_loss;
  double train_loss = 0;
  double wall_seconds = 0;
  uint32_t clients = 0;
  uint64_t bytes_up = 0;
  uint64_t bytes_down = 0;
  std::optional<double> compression_up;
  std::optional<double> compression_down;
  std::optional<double> dp_epsilon;
  std::optional<double> dp_sgd_epsilon;
};

/// Everything the view shows, at one moment: a value.
struct live_snapshot {
  live_run run;
  std::string status = "running"; ///< running | completed | failed |
                                  ///< rounds_failed | interrupted
  std::string failure;            ///< why it failed; empty otherwise
  uint32_t round = 0;             ///< the round under way (or the last)
  bool final_evaluation = false;  ///< clients evaluate the final model
  std::string secagg_phase;       ///< idle | keys | shares | ... (SecAgg on)
  uint64_t model_bytes = 0;
  uint64_t chunk_bytes = 0;
  uint64_t chunk_count = 0;
  uint64_t refusals = 0;
  double started_unix_s = 0;
  double round_started_unix_s = 0;
  double ended_unix_s = 0;        ///< 0 while running
  double now_unix_s = 0;          ///< when the snapshot was taken
  uint64_t clients_not_shown = 0; ///< registrations past the client cap
  std::vector<std::pair<std::string, live_client>> clients; ///< by id
  std::vector<live_round> rounds;                           ///< published
  std::vector<std::pair<double, uint64_t>> memory; ///< (s since start, RSS)
  /// The last memory sample's RSS split: anonymous (the process's own
  /// memory) and file-backed (mapped files such as a model in disk mode,
  /// which the kernel may drop and read again).
  uint64_t rss_anon_bytes = 0;
  uint64_t rss_file_bytes = 0;
  run_event_counts event_counts;        ///< what befell clients and rounds
  std::vector<run_event_entry> events;  ///< the latest, oldest first
  std::vector<run_event_entry> refused; ///< the latest refused Hellos

  /// Rounds published (failed ones included).
  uint32_t completed() const;
  /// The last round's test accuracy, if any round had one.
  std::optional<double> last_accuracy() const;
  /// True iff the run has ended.
  bool ended() const { return status != "running"; }
  /// Model bytes of `c`'s update received, from its chunk count.
  uint64_t up_bytes(const live_client& c) const;
};

class live_status {
public:
  /// The most rounds kept (past it, every other of the older half goes).
  static constexpr size_t max_rounds = 4096;
  /// The most memory samples kept (likewise).
  static constexpr size_t max_memory_points = 2048;

  // -- the run -----------------------------------------------------------
  /// The run's shape: what the page shows before any round.
  void set_run(live_run run);
  /// The model served: its size, chunk size and chunk count.
  void set_model(uint64_t model_bytes, uint64_t chunk_bytes,
                 uint64_t chunk_count);

  // -- clients' connections ----------------------------------------------
  /// Client `id`'s connection changed: registered | back (from `address`)
  /// | lost | dropped. Only "registered" adds a client not shown yet.
  void client_event(const std::string& id, const std::string& state,
                    const std::string& address);
  /// Client `id` is shown no more (a simulation's client sent away).
  void forget_client(const std::string& id);

  /// Counts and logs `e` of client `id` (empty: of none) for `reason` (a
  /// token: run_events), `detail` for people.
  void note_event(run_event e, const std::string& reason, const std::string& id,
                  const std::string& detail);

  // -- rounds and phases (the server's protocol events) ------------------
  /// Round `round` started: every client is waiting, its counts at 0;
  /// `evaluates` iff clients evaluate the model before they train.
  void round_started(uint32_t round, bool evaluates);
  /// AsyncScheduler: client `id` got a task; its counts start at 0.
  void task_started(const std::string& id, bool evaluates);
  /// The run's end: the connected clients evaluate the final model.
  void final_evaluation_started();
  /// Client `id` was served a chunk: `wire_bytes` standing for
  /// `model_bytes` of the model; `last` iff the model's last chunk.
  void served(const std::string& id, uint64_t wire_bytes, uint64_t model_bytes,
              bool last);
  /// Client `id`'s evaluation of a model arrived.
  void evaluated(const std::string& id);
  /// An update chunk of `frame_bytes` arrived from client `id`.
  void received(const std::string& id, uint64_t frame_bytes);
  /// Client `id` ended its upload stream (after every credit).
  void upload_ended(const std::string& id);
  /// Client `id` is to send its update again: its upload counts restart.
  void upload_again(const std::string& id);
  /// Client `id`'s update was refused, or it was excluded from the round.
  void rejected(const std::string& id);
  /// Secure aggregation's phase now.
  void set_secagg_phase(const std::string& phase);

  // -- results and the end -----------------------------------------------
  /// A round's record: added, or put in place of the one of its round
  /// (its clients' evaluation came in later).
  void round_finished(const round_record& r);
  void set_refusals(uint64_t refusals);
  /// The run's refusal counter, read at each snapshot (so /metrics counts
  /// refusals as they happen, not only as rounds end).
  void count_refusals(std::shared_ptr<const std::atomic<uint64_t>> counter);
  /// The run ended: `status` completed | failed | rounds_failed |
  /// interrupted, `failure` why (empty if it did not fail).
  void ended(const std::string& status, const std::string& failure = "");

  // -- reading -----------------------------------------------------------
  /// Returns a copy of everything, the memory sampled now (at most once a
  /// second).
  live_snapshot snapshot();
  /// The Prometheus text exposition (version 0.0.4) of the counters.
  std::string prometheus();
  /// Everything the page shows, as JSON.
  std::string json();

private:
  /// Client `id`'s record, or null iff it is not shown. REQUIRES: lock.
  live_client* find_locked(const std::string& id);
  /// Moves `c` into phase `p` (noting when). REQUIRES: lock.
  void enter_locked(live_client& c, client_phase p);
  /// Starts `c`'s counts of a round or task at `now`. REQUIRES: lock.
  void restart_locked(live_client& c, double now);
  /// A round starts now for every client; `evaluates`: as round_started.
  /// REQUIRES: lock.
  void restart_all_locked(bool evaluates);
  /// Makes room for one more client (at most num_clients + 64 are shown):
  /// false iff none can go. REQUIRES: lock.
  bool make_room_locked();
  /// Samples the process's memory at most once a second. REQUIRES: lock.
  void sample_memory_locked();

  std::mutex mtx_;
  live_snapshot s_;        ///< clients and rounds aside, the state
  bool evaluates_ = false; ///< the round's clients evaluate before training
  std::map<std::string, live_client> clients_;
  std::vector<live_round> rounds_;
  std::vector<std::pair<double, uint64_t>> memory_;
  run_events events_;
  std::shared_ptr<const std::atomic<uint64_t>> refusals_; ///< null: none
};

/// The Prometheus text exposition of `s` (docs/operations.md, "Live view").
std::string prometheus_text(const live_snapshot& s);
/// `s` as the JSON of /status.
std::string status_json(const live_snapshot& s);

} // namespace fedcaf
