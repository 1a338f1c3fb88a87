#pragma once
// server_configs: the rounds and their scheduler, the aggregator and its
// kwargs, the server's memory mode, checkpoints, secure aggregation, relays
// and the server's comm_configs. Value types only.

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "fedcaf/aggregation_rule.hpp"
#include "fedcaf/config/aggregator_section.hpp"
#include "fedcaf/config/comm_sections.hpp"
#include "fedcaf/config/words.hpp"

namespace fedcaf {

/// The most threads `fold_threads` may name.
inline constexpr uint32_t max_fold_threads = 64;

/// server_configs.checkpoint: after every every_rounds-th round (and the
/// last) the server writes what the run needs to go on into dir (see
/// fedcaf/checkpoint.hpp), keeping the last `keep`; a checkpoint that
/// cannot be written stops the run (on_error: stop) or is logged and
/// skipped (continue). Empty dir: none.
struct checkpoint_config {
  std::string dir;
  uint32_t every_rounds = 1;
  uint32_t keep = 2;
  checkpoint_failure on_error = checkpoint_failure::stop;
};

/// server_configs.secure_aggregation: SecAgg+ (Bell et al. 2020). Each
/// client shares its secrets with `neighbours` others (the paper: O(log n)
/// suffices against a fraction of dropouts and corrupt clients; 0: every
/// other client), any `threshold` of whom can unmask it (more than half of
/// its neighbours, so that the server cannot get both of a client's
/// secrets from different halves; 0: floor(neighbours / 2) + 1). Weighted
/// models are clipped to [-clipping_range, clipping_range] and quantized to
/// quantization_bits bits; the mean of n clients is within n 2c / ((2^b -
/// 1) W) of the exact one per element.
struct secure_aggregation_config {
  bool enabled = false;
  uint32_t threshold = 0;
  double clipping_range = 8.0;
  uint32_t quantization_bits = 22;
  uint32_t neighbours = 0;
};

/// server_configs.
struct server_config {
  uint32_t num_clients = 2;
  /// The most ranks one sharded client may have (each a connection of its
  /// own): a client of more is refused at its ranks' Hellos.
  uint32_t max_shard_ranks = 64;
  uint32_t num_global_epochs = 3;
  /// SyncScheduler | AsyncScheduler; unnamed, the one the aggregator needs
  /// (AsyncScheduler for FedAsync and FedBuff).
  scheduler_kind scheduler = scheduler_kind::sync;
  /// scheduler_kwargs.min_clients: a round may finalize with this many
  /// updates when clients were dropped or missed the deadline (default:
  /// the clients of a round less one, or less a tenth of many: see
  /// default_min_clients in src/config/server_sections.cpp).
  uint32_t min_clients = 0;
  /// scheduler_kwargs.round_deadline_s: how long a round may take, from its
  /// start to the last update: clients that have not delivered their whole
  /// update by then (not offered, or still uploading) are cut off and sit
  /// the round out; 0: none.
  double round_deadline_s = 600;
  /// scheduler_kwargs.registration_deadline_s: how long the server waits,
  /// from its start, for num_clients to register; then the run starts with
  /// those registered if they are at least min_clients, else fails naming
  /// the clients that never came. 0: no deadline.
  double registration_deadline_s = 600;
  /// scheduler_kwargs.on_deadline: fail | wait, when the deadline passes
  /// with fewer than min_clients updates offered.
  deadline_action on_deadline = deadline_action::fail;
  /// scheduler_kwargs.clients_per_round (or client_fraction of num_clients):
  /// the clients sampled for each round, drawn with scheduler_kwargs.seed;
  /// 0: every registered client.
  uint32_t clients_per_round = 0;
  uint64_t sampling_seed = 42;
  /// FedAvgAggregator | FedAvgMAggregator | FedAdamAggregator |
  /// FedYogiAggregator | FedAdagradAggregator | FedAsyncAggregator |
  /// FedBuffAggregator
  server_rule aggregator = server_rule::fedavg;
  rule_config rule;     ///< aggregator_kwargs
  bool evaluate = true; ///< evaluate each global model on the test set
  /// Clients evaluate each global model on their own data and the server
  /// averages their figures, weighted by sample count, into the round's
  /// client_metrics (and test_accuracy where the server has no evaluator).
  /// Unset: on iff the clients train (not the dummy trainer) a model the
  /// server cannot evaluate (not the built-in CNN). Resolved by load_config.
  std::optional<bool> federated_evaluation;
  /// ram | window | disk: see memory_mode (fedcaf/config/words.hpp).
  fedcaf::memory_mode memory_mode = fedcaf::memory_mode::ram;
  /// disk mode: where the global model's file lives (removed at exit).
  std::string storage_dir = "/tmp";
  /// The threads a chunk's checks, fold and settling may use, the
  /// aggregator's own included; 0: a quarter of the host's cores, at
  /// most 16.
  uint32_t fold_threads = 0;
  /// Write each new global model to this safetensors file ("{round}" is
  /// replaced by the round number); empty: do not save.
  std::string save_global_model;
  checkpoint_config checkpoint;
  secure_aggregation_config secure_aggregation;
  /// relays: client id -> the most clients under it (fedcaf relay; see
  /// docs/design.md, "Trees of aggregators"). Such a client offers its
  /// group's partial sum, weighing as many clients as it folded.
  std::map<std::string, uint64_t> relays;
  /// simulate only: run the num_clients clients under this many relays in
  /// the one process (Relay1..R, the clients in R blocks of consecutive
  /// ids, clients_per_round shared among them); 0: a flat run.
  uint32_t simulated_relays = 0;
  comm_config comm;
};

} // namespace fedcaf
