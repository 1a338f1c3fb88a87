#pragma once
// Server optimizers on the pseudo-gradient, element by element, so that they
// run per chunk as the round's average of each position becomes known:
//
//   delta_t = avg_t - x_t   (the mean client update; APPFL's "step")
//
//   FedAvgM   (Hsu et al. 2019, "Measuring the effects of non-identical data
//             distribution..."): v_t = beta1 v_{t-1} + delta_t,
//             x_{t+1} = x_t + eta v_t
//   FedAdagrad, FedAdam, FedYogi (Reddi et al. 2021, "Adaptive Federated
//             Optimization", Algorithm 2):
//             m_t = beta1 m_{t-1} + (1 - beta1) delta_t
//             Adagrad: v_t = v_{t-1} + delta_t^2
//             Adam:    v_t = beta2 v_{t-1} + (1 - beta2) delta_t^2
//             Yogi:    v_t = v_{t-1} - (1 - beta2) delta_t^2
//                                      sign(v_{t-1} - delta_t^2)
//             x_{t+1} = x_t + eta m_t / (sqrt(v_t) + tau)
//             with m_{-1} = 0 and v_{-1} = tau^2 (the paper's v_{-1} >= tau^2,
//             as APPFL sets it).
//
//   FedAsync  (Xie et al. 2019, "Asynchronous Federated Optimization"): one
//             update per step, x_{t+1} = (1 - a_t) x_t + a_t x_new with
//             a_t = alpha s(t - tau); the update is folded with weight a_t.
//   FedBuff   (Nguyen et al. 2022, "Federated Learning with Buffered
//             Asynchronous Aggregation"): K updates per step,
//             x_{t+1} = x_t + eta / K sum_i s(t - tau_i) (x_i - x_t); each
//             update is folded with weight s(t - tau_i).
//             Both: x_{t+1} = x_t + c W (avg - x_t) per element, W the
//             weights folded there (so a cut-off update counts exactly where
//             it arrived), c = 1 (FedAsync) or eta / K (FedBuff).
//
// DP-FedAvg (McMahan et al. 2018, "Learning Differentially Private Recurrent
// Language Models"): after the rule, every element gets Gaussian noise of std
// z S / W (W: the equal weights, that is the updates, averaged there).
//
// The state (v, or m and v) is one float per model element, on the heap or
// in a file whose pages are given back after each chunk (disk memory mode),
// like the model it belongs to. Thread-safety: none; owned by the aggregator.

#include <cstdint>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "fedcaf/aggregation_rule.hpp"
#include "fedcaf/byte_buffer.hpp"
#include "fedcaf/config/aggregator_section.hpp"
#include "fedcaf/error.hpp"
#include "fedcaf/manifest.hpp"

namespace fedcaf {

/// The staleness weight s(u) of an update trained on a model u versions old
/// (Xie et al. 2019): constant 1; polynomial (u + 1)^-a; hinge 1 if u <= b,
/// else 1 / (a (u - b) + 1).
double staleness_weight(const rule_config& cfg, uint64_t staleness);

class server_optimizer {
public:
  /// Returns an optimizer of `rule` (fedavg only with DP-FedAvg noise) for
  /// models of `elements`
  /// floating elements of dtype `type`. With `state_dir` non-empty its state
  /// lives in files there (removed at once, held open by their mappings).
  /// Returns an error iff a state file cannot be created.
  static result<std::unique_ptr<server_optimizer>>
  make(server_rule rule, const rule_config& cfg, dtype type, uint64_t elements,
       const std::string& state_dir);

  /// Computes the new global value of elements [first, first + avg.size()):
  /// `avg` holds this round's average there and receives the new values;
  /// `global` holds the current model's bytes of those elements (dtype as
  /// made); `weight_sum` the weights folded there. Advances the optimizer
  /// state of those elements.
  void step(uint64_t first, std::span<float> avg,
            std::span<const std::byte> global, double weight_sum);

  /// FedBuff: the step about to be finalized holds `n` updates.
  void set_updates(uint64_t n) { updates_ = n; }

  /// Ends a round: the next step() of every element is that round's.
  void finish_round() { ++rounds_; }

  /// DP-FedAvg: from now on every element stepped gets N(0, (z S / W)^2),
  /// drawn in element order from a generator seeded with `seed`, the round
  /// and the first element of the step: a run resumed from a checkpoint
  /// draws the same noise.
  void set_noise(double multiplier, double clip_norm, uint64_t seed) {
    noise_scale_ = multiplier * clip_norm;
    seed_ = seed;
  }

  /// Checkpoints: the rounds stepped so far, and the state buffers by name
  /// (none for FedAvg and the asynchronous rules).
  uint64_t steps() const { return rounds_; }
  void restore_steps(uint64_t n) { rounds_ = n; }
  std::vector<std::pair<std::string, byte_buffer*>> moments() {
    std::vector<std::pair<std::string, byte_buffer*>> out;
    if (m_.size())
      out.emplace_back("m", &m_);
    if (v_.size())
      out.emplace_back("v", &v_);
    return out;
  }

  /// Bytes of optimizer state (for reports).
  uint64_t state_bytes() const { return m_.size() + v_.size(); }

private:
  server_optimizer(server_rule rule, const rule_config& cfg, dtype type)
      : rule_(rule), cfg_(cfg), type_(type) {}

  void step_rule(uint64_t first, std::span<float> avg,
                 std::span<const std::byte> global, double weight_sum);

  server_rule rule_;
  rule_config cfg_;
  dtype type_;
  uint64_t rounds_ = 0;
  uint64_t updates_ = 1;
  double noise_scale_ = 0; ///< z S; 0: no noise
  uint64_t seed_ = 0;
  byte_buffer m_; ///< first moment (FedAvgM: the momentum v)
  byte_buffer v_; ///< second moment (adaptive rules only)
};

} // namespace fedcaf
