#pragma once
// server_configs.aggregator_kwargs: what the named aggregator does with the
// updates. A part of the server's sections in a header of its own, because
// the server optimizers (fedcaf/server_optimizer.hpp, whose tests build with
// LibTorch) take it and nothing else of the server's configuration. Value
// types only.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "fedcaf/config/words.hpp"

namespace fedcaf {

/// server_configs.aggregator_kwargs: what the named aggregator does with the
/// updates. Keys and meanings as APPFL names them.
struct rule_config {
  client_weighting client_weights_mode = client_weighting::equal;
  /// Defaults: with each rule's, the default 3-round run reaches 0.85 or more
  /// (0.865 - 0.898; configs/simulate.yaml: CNN, Fashion-MNIST, 2 clients, SGD lr
  /// 0.05 momentum 0.9), as FedAvg does, and lies in its paper's range.
  ///
  /// eta, when aggregator_kwargs names none: FedAdam and FedYogi 0.1 =
  /// 10^-1, FedAdagrad 1 = 10^0 (Reddi et al. 2021 sweep 10^-3 .. 10^1 in
  /// half-decades; in 3 rounds an adaptive step moves an element by about
  /// eta per round, FedAdagrad's by about eta/10, so smaller etas stop near
  /// 0.8), FedAvgM and FedBuff 1 (Hsu et al. 2019; Nguyen et al. 2022).
  double server_learning_rate = 1.0;
  /// tau (adaptive rules): 10^-3, Reddi et al.'s default.
  double server_adapt_param = 1e-3;
  /// beta1: 0.9 (Reddi et al.; FedAvgM's beta, Hsu et al.).
  double server_momentum_param_1 = 0.9;
  double server_momentum_param_2 = 0.99; ///< beta2 (FedAdam, FedYogi): 0.99
  /// FedAsync, FedBuff: mixing weight; 0.9 (Xie et al. 2019 use 0.6 - 0.9).
  double alpha = 0.9;
  /// staleness_fn (FedAsync, FedBuff): constant | polynomial | hinge, with
  /// staleness_fn_kwargs a (and b for hinge), as in Xie et al. 2019.
  staleness_kind staleness_fn = staleness_kind::constant;
  double staleness_a = 0.5;
  double staleness_b = 4;
  uint32_t buffer_k = 3; ///< FedBuff: K, updates per server step
  /// An update that was cut off (its client dropped mid-upload): keep its
  /// delivered chunks (every position averages the updates that reached it),
  /// or discard it whole (the others send theirs again). Read from a
  /// config without the key: keep for a server's own clients (a drop costs
  /// the others nothing), discard under secure aggregation and in trees
  /// (a partial masked update, or a relay's partial sum, cannot stay).
  fedcaf::partial_updates partial_updates = fedcaf::partial_updates::discard;
  /// The config gave partial_updates (else its default was resolved).
  bool partial_updates_given = false;
  /// dp_fedavg (user-level DP-FedAvg, McMahan et al. 2018): clients clip
  /// their update to L2 norm clip_norm; the server adds Gaussian noise of
  /// std noise_multiplier * clip_norm / m to each averaged element (m: the
  /// updates averaged there). 0: off.
  double dp_clip_norm = 0;
  double dp_noise_multiplier = 0;
  double dp_delta = 1e-5;
  uint64_t dp_seed = 0;
  /// Refuse an update whose L2 distance from the global model exceeds this;
  /// 0: no bound.
  double max_update_norm = 0;
  /// On by default: refuse an update whose L2 distance from the global
  /// model g exceeds max_update_ratio * max(||g||, update_norm_floor); 0:
  /// off. Honest updates measured at most 1.89 ||g|| (docs/design.md,
  /// "Bounded influence"): 10 leaves a margin of 5. Not applied under
  /// secure aggregation (masked updates), where clipping_range bounds each
  /// element instead.
  double max_update_ratio = 10;
  /// The least ||g|| the ratio is taken of, so that a model near zero (a
  /// zero initialisation) still takes updates; must be positive.
  double update_norm_floor = 1;
  /// The norm the ratio is taken of is not ||g|| itself, which an update
  /// at the bound moves (x = 10.5 g every round multiplied ||g|| by 1,097
  /// in 4 rounds): it follows ||g|| down at once and up by at most this
  /// factor per published model (the first model's ||g|| to start with);
  /// 0: off (||g|| itself). Honest runs grow ||g|| by a few percent a round.
  double max_norm_growth = 1.25;
  /// Sample counts a client claims (its offer's weight under
  /// client_weights_mode sample_size, the weight of its evaluations) are
  /// capped at this; must be positive (default 2^20 = 1,048,576).
  uint64_t max_sample_size = uint64_t{1} << 20;
  /// Averaging rules (Sun et al. 2019, norm bounding): an update further
  /// than this (L2) from the model its client received is scaled back to
  /// it, x' = g + (x - g) min(1, norm_bound / ||x - g||); 0: off. The
  /// client declares ||x - g|| in its offer; the server measures it as the
  /// chunks arrive and refuses an update that exceeds what it declared.
  double norm_bound = 0;
  /// TrimmedMeanAggregator: the fraction of a coordinate's values dropped
  /// from each end, in [0, 0.5); 0.2 as Flower's FedTrimmedAvg.
  double trim_ratio = 0.2;
  /// tensor_rules: per tensor name pattern (fnmatch: *, ?, [...]), in the
  /// config's order, the rule for the tensors it matches (the first
  /// pattern that matches decides); a tensor no pattern matches is
  /// averaged. Every pattern must match a tensor of the model.
  std::vector<std::pair<std::string, tensor_rule>> tensor_rules;
};

} // namespace fedcaf
