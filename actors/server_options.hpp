#pragma once
// What a server is made with: its options (from the configuration, see
// cli/server_wiring.cpp's options_from) and the handles it routes to.
// Value types only.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "actors/interfaces.hpp"
#include "fedcaf/config.hpp"
#include "fedcaf/live_status.hpp"
#include "fedcaf/progress.hpp"
#include "fedcaf/report.hpp"
#include "protocol/population.hpp"
#include "protocol/refusal_log.hpp"

namespace fedcaf {

/// A simulation's population (see protocol/population.hpp) and what spawns
/// a member: `summon(the server, member index)`, in this process; it then
/// registers as any client does.
struct summoning {
  std::shared_ptr<const population> members;
  std::function<void(const server_actor&, uint32_t)> summon;
};

struct server_options {
  uint32_t num_clients = 2;
  /// server_configs.relays: client id -> the most clients under it. Only
  /// these may offer partial sums; their evaluations weigh at most that.
  std::map<std::string, uint64_t> relays;
  uint32_t max_shard_ranks = 64; ///< the most ranks of one sharded client
  uint32_t num_rounds = 3;
  /// A robust rule (TrimmedMean, Median): rounds report the values each
  /// client had dropped as extreme.
  bool robust = false;
  /// client_configs.comm_configs.compression: downloads are served encoded
  /// (down); offers must name the encoding of uploads (up).
  compression_config compression;
  uint64_t chunk_bytes = 1 << 20; ///< the plan both ends derive
  uint32_t window = 4;
  std::string client_configs_yaml; ///< handed to every client in Welcome
  msg::client_terms terms;         ///< typed in every Welcome
  /// A simulation's population (members null: none): as a round opens,
  /// its drawn members that are not registered are summoned, and those
  /// registered and not drawn are sent away (Done), forgotten.
  summoning drawn;
  /// After the run, how long to wait for clients to disconnect.
  std::chrono::milliseconds linger{5000};
  /// After a run that ends early (interrupted, or failed), how long to wait
  /// for them at most: the Done frames leave at once, and a client that is
  /// training reads its own only after the last step.
  std::chrono::milliseconds early_end_linger{100};
  /// How long a client that lost its connection may take to come back and
  /// resume before it is dropped from the run.
  std::chrono::milliseconds reconnect_grace{30000};
  /// Client id -> token; empty: no token is asked for.
  std::vector<std::pair<std::string, std::string>> tokens;
  /// With TLS: a remote client's verified certificate must name the client
  /// id it registers as.
  bool require_certificate_name = false;
  /// AsyncScheduler: clients get tasks one by one (task_atom) and may
  /// download different model versions at once.
  bool async = false;
  /// DP-FedAvg: the noise multiplier (0: off), the chance a client is in a
  /// round and delta, for the epsilon each round's report gives.
  double dp_noise_multiplier = 0;
  double dp_sample_rate = 1;
  double dp_delta = 1e-5;
  /// Federated evaluation: a round's line is printed once the clients of
  /// the next round have evaluated its model (or that round ends), and
  /// after the last round every connected client is asked to evaluate the
  /// final model, for at most evaluation_timeout.
  bool federated_evaluation = false;
  std::chrono::milliseconds evaluation_timeout{60000};
  /// An evaluation's (and an offer's figures') claimed samples are capped
  /// at this; 0: no cap.
  uint64_t max_sample_size = 0;
  /// server_configs.checkpoint (dir empty: none): after every
  /// every_rounds-th round and the last, the aggregator writes the model
  /// and its optimizer's state, and this the run's: `config_yaml` (the
  /// config it runs with), `resumed_from` (the rounds this run resumed
  /// from, oldest first) and the report's rounds.
  checkpoint_config checkpoint;
  std::string config_yaml;
  std::vector<uint32_t> resumed_from;
  /// Where the report is written after every round (atomically), so that
  /// an interrupted run keeps its figures; empty: only at the end.
  std::string report_path;
  /// Where the live view's static page is written with the report
  /// (--report-html); empty: not written. REQUIRES: live set where this is.
  std::string report_html_path;
  /// Its round lines on stdout; false (a relay inside simulate): at debug
  /// level in the log, so that stdout shows the root's alone.
  bool print_rounds = true;
  /// The JSON-lines metrics file (--metrics); null: none.
  std::shared_ptr<metrics_log> metrics;
  /// What the live view (--http) shows; null: no live view.
  std::shared_ptr<live_status> live;
  /// Counts the round's transfer bytes for the console; null: not kept.
  std::shared_ptr<transfer_progress> progress;
  /// SecAgg+ (server_configs.secure_aggregation); enabled false: off. The
  /// weights come from the clients' advertised sample counts iff
  /// secagg_by_samples (capped at max_sample_size): client_weights_mode
  /// sample_size, which also weighs evaluations by capped counts (else each
  /// client's evaluation weighs 1, as its update does).
  secure_aggregation_config secure_aggregation;
  bool secagg_by_samples = false;
  /// The fewest updates a secure round's sum may hold (min_clients): while
  /// an upload out of range is traced, suspects are held out only above it.
  uint32_t secagg_least_in_sum = 2;
  /// How long each SecAgg+ setup phase waits for the slowest client.
  std::chrono::milliseconds secagg_phase_timeout{60000};
  /// Secure aggregation: the keys phase ends this long after the round
  /// started (scheduler_kwargs.round_deadline_s; zero: when every chosen
  /// client advertised or was lost).
  std::chrono::milliseconds secagg_keys_timeout{0};
  /// A relay's children's side (fedcaf relay): each round waits for its
  /// parent's model (relay_atom), and its partial sum answers that request
  /// (protocol/relay_flow).
  bool relay = false;
  /// A window-mode relay (it holds its parent's model position by
  /// position): sharded clients are refused under it.
  bool relay_window = false;
  /// A window-mode relay: a child that fetched nothing for this long paces
  /// its download no more (stream_configs.idle_timeout_s). Zero: never.
  std::chrono::milliseconds fetch_silence{0};
  /// The round deadline (scheduler_kwargs.round_deadline_s) counted from
  /// when a round opens, armed by the server, which tells the scheduler
  /// when it passes (scheduler_options::deadline_from_server): a relay's,
  /// whose round opens with its parent's model. Zero: none here (the
  /// scheduler arms its own).
  std::chrono::milliseconds deadline_from_open{0};
  /// Counts refused frames of the whole server side, for the report.
  refusal_counter refusals;
  /// Counts updates the aggregator refused for their content.
  refusal_counter poisoned;
};

/// The handles the server routes to.
struct server_peers {
  scheduler_actor scheduler;
  aggregator_actor aggregator;
  evaluator_actor evaluator;
};

} // namespace fedcaf
