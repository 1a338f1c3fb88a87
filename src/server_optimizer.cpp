#include "fedcaf/server_optimizer.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "fedcaf/dummy_trainer.hpp"
#include "fedcaf/element.hpp"

namespace fedcaf {

double staleness_weight(const rule_config& cfg, uint64_t staleness) {
  auto u = static_cast<double>(staleness);
  if (cfg.staleness_fn == staleness_kind::polynomial)
    return std::pow(u + 1, -cfg.staleness_a);
  if (cfg.staleness_fn == staleness_kind::hinge)
    return u <= cfg.staleness_b
               ? 1.0
               : 1.0 / (cfg.staleness_a * (u - cfg.staleness_b) + 1.0);
  return 1.0;
}

namespace {

/// `x` as a float, saturated at +-FLT_MAX rather than made infinite: a
/// client at the update bound must not leave an infinity in a moment or
/// the model.
float to_float(double x) {
  constexpr double max = std::numeric_limits<float>::max();
  return static_cast<float>(std::clamp(x, -max, max));
}

result<byte_buffer> state_buffer(const std::string& dir, const char* name,
                                 uint64_t bytes) {
  if (dir.empty())
    return byte_buffer::uninitialized(bytes);
  return anonymous_file_buffer(dir + "/fedcaf-" + name + "-" +
                                   std::to_string(::getpid()) + ".bin",
                               bytes);
}

} // namespace

result<std::unique_ptr<server_optimizer>>
server_optimizer::make(server_rule rule, const rule_config& cfg, dtype type,
                       uint64_t elements, const std::string& state_dir) {
  std::unique_ptr<server_optimizer> opt{new server_optimizer(rule, cfg, type)};
  if (is_async(rule) || rule == server_rule::fedavg)
    return opt; // no state
  auto bytes = elements * sizeof(float);
  auto m = state_buffer(state_dir, "optimizer-m", bytes);
  if (!m)
    return m.err();
  opt->m_ = std::move(*m);
  if (rule != server_rule::fedavgm) {
    auto v = state_buffer(state_dir, "optimizer-v", bytes);
    if (!v)
      return v.err();
    opt->v_ = std::move(*v);
  }
  return opt;
}

void server_optimizer::step(uint64_t first, std::span<float> avg,
                            std::span<const std::byte> global,
                            double weight_sum) {
  step_rule(first, avg, global, weight_sum);
  if (noise_scale_ > 0 && weight_sum > 0) {
    std::normal_distribution<double> noise{0.0, noise_scale_ / weight_sum};
    std::seed_seq seeds{seed_ & 0xffffffffu, seed_ >> 32, rounds_, first,
                        first >> 32};
    std::mt19937_64 rng{seeds};
    for (auto& x : avg)
      x = static_cast<float>(x + noise(rng));
  }
}

void server_optimizer::step_rule(uint64_t first, std::span<float> avg,
                                 std::span<const std::byte> global,
                                 double weight_sum) {
  if (rule_ == server_rule::fedavg)
    return;
  if (is_async(rule_)) {
    const double c =
        rule_ == server_rule::fedbuff
            ? cfg_.server_learning_rate /
                  static_cast<double>(std::max<uint64_t>(1, updates_))
            : 1.0;
    for (size_t i = 0; i < avg.size(); ++i) {
      const double x = load_element(type_, global.data(), i);
      avg[i] = static_cast<float>(x + c * weight_sum * (avg[i] - x));
    }
    return;
  }
  auto* m = reinterpret_cast<float*>(m_.data()) + first;
  auto* v = v_.size() ? reinterpret_cast<float*>(v_.data()) + first : nullptr;
  const double eta = cfg_.server_learning_rate;
  const double tau = cfg_.server_adapt_param;
  const double b1 = cfg_.server_momentum_param_1;
  const double b2 = cfg_.server_momentum_param_2;
  const bool fresh = rounds_ == 0; // m_{-1} = 0, v_{-1} = tau^2
  for (size_t i = 0; i < avg.size(); ++i) {
    const double x = load_element(type_, global.data(), i);
    const double d = avg[i] - x;
    const double m_prev = fresh ? 0.0 : m[i];
    if (rule_ == server_rule::fedavgm) {
      const double mv = b1 * m_prev + d;
      m[i] = to_float(mv);
      avg[i] = to_float(x + eta * mv);
      continue;
    }
    const double v_prev = fresh ? tau * tau : v[i];
    const double d2 = d * d;
    const double mv = b1 * m_prev + (1 - b1) * d;
    double vv = 0;
    switch (rule_) {
    case server_rule::fedadagrad:
      vv = v_prev + d2;
      break;
    case server_rule::fedadam:
      vv = b2 * v_prev + (1 - b2) * d2;
      break;
    default: // fedyogi
      vv = v_prev - (1 - b2) * d2 * (v_prev > d2 ? 1.0 : v_prev < d2 ? -1 : 0);
      break;
    }
    m[i] = to_float(mv);
    v[i] = to_float(vv); // an infinite v would freeze the element for good
    avg[i] = to_float(x + eta * mv / (std::sqrt(vv) + tau));
  }
  auto off = first * sizeof(float);
  auto len = avg.size() * sizeof(float);
  m_.release(off, len);
  if (v)
    v_.release(off, len);
}

} // namespace fedcaf
