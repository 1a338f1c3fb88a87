#include "fedcaf/rdp_accountant.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace fedcaf {

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();

/// log(exp(a) + exp(b)).
double log_add(double a, double b) {
  if (a == -inf)
    return b;
  if (b == -inf)
    return a;
  auto hi = std::max(a, b);
  return hi + std::log1p(std::exp(std::min(a, b) - hi));
}

/// log(exp(a) - exp(b)), for a >= b.
double log_sub(double a, double b) {
  if (b == -inf)
    return a;
  if (a <= b)
    return -inf; // the difference vanished at double precision
  return a + std::log1p(-std::exp(b - a));
}

/// log(erfc(x)), accurate where erfc underflows (x > ~26).
double log_erfc(double x) {
  if (x < 25)
    return std::log(std::erfc(x));
  // Asymptotic series: erfc(x) = e^{-x^2} / (x sqrt(pi)) (1 - 1/(2x^2) +
  // 3/(4x^4) - 15/(8x^6) + ...).
  auto r = 1 / (x * x);
  return -x * x - std::log(x) - 0.5 * std::log(M_PI) +
         std::log1p(-0.5 * r + 0.75 * r * r - 1.875 * r * r * r);
}

/// log(A_alpha) for integer alpha: the binomial expansion of the moment.
double log_a_integer(double q, double sigma, int alpha) {
  double log_a = -inf;
  for (int i = 0; i <= alpha; ++i) {
    auto log_coef = std::lgamma(alpha + 1.0) - std::lgamma(i + 1.0) -
                    std::lgamma(alpha - i + 1.0);
    auto s = log_coef + i * std::log(q) + (alpha - i) * std::log1p(-q) +
             (static_cast<double>(i) * i - i) / (2 * sigma * sigma);
    log_a = log_add(log_a, s);
  }
  return log_a;
}

/// log(A_alpha) for fractional alpha: the two series of Mironov et al.
/// (Section 3.3), summed until their terms fall below e^-30.
double log_a_fractional(double q, double sigma, double alpha) {
  double log_a0 = -inf, log_a1 = -inf;
  const double z0 = sigma * sigma * std::log(1 / q - 1) + 0.5;
  double coef = 1; // binom(alpha, i), by its recurrence
  for (int i = 0;; ++i) {
    if (i > 0)
      coef *= (alpha - i + 1) / i;
    const double j = alpha - i;
    const double log_coef = std::log(std::fabs(coef));
    const double log_t0 = log_coef + i * std::log(q) + j * std::log1p(-q);
    const double log_t1 = log_coef + j * std::log(q) + i * std::log1p(-q);
    const double log_e0 =
        std::log(0.5) + log_erfc((i - z0) / (std::sqrt(2.0) * sigma));
    const double log_e1 =
        std::log(0.5) + log_erfc((z0 - j) / (std::sqrt(2.0) * sigma));
    const double log_s0 =
        log_t0 + (static_cast<double>(i) * i - i) / (2 * sigma * sigma) +
        log_e0;
    const double log_s1 = log_t1 + (j * j - j) / (2 * sigma * sigma) + log_e1;
    if (coef > 0) {
      log_a0 = log_add(log_a0, log_s0);
      log_a1 = log_add(log_a1, log_s1);
    } else {
      log_a0 = log_sub(log_a0, log_s0);
      log_a1 = log_sub(log_a1, log_s1);
    }
    if (std::max(log_s0, log_s1) < -30 || i > 100000)
      break;
  }
  return log_add(log_a0, log_a1);
}

} // namespace

std::vector<double> default_rdp_orders() {
  std::vector<double> out;
  for (int x = 1; x < 100; ++x)
    out.push_back(1 + x / 10.0);
  for (int x = 12; x < 64; ++x)
    out.push_back(x);
  return out;
}

double rdp_sampled_gaussian(double q, double sigma, double alpha) {
  if (q == 0)
    return 0;
  if (sigma == 0)
    return inf;
  if (q == 1) // the Gaussian mechanism itself
    return alpha / (2 * sigma * sigma);
  auto log_a = alpha == std::floor(alpha)
                   ? log_a_integer(q, sigma, static_cast<int>(alpha))
                   : log_a_fractional(q, sigma, alpha);
  return log_a / (alpha - 1);
}

privacy_spent epsilon_for(double q, double sigma, uint64_t steps, double delta,
                          const std::vector<double>& orders) {
  privacy_spent best{inf, 0};
  for (auto a : orders) {
    auto rdp = static_cast<double>(steps) * rdp_sampled_gaussian(q, sigma, a);
    auto eps =
        rdp - (std::log(delta) + std::log(a)) / (a - 1) + std::log((a - 1) / a);
    if (eps < best.epsilon)
      best = {eps, a};
  }
  best.epsilon = std::max(0.0, best.epsilon);
  return best;
}

double noise_multiplier_for(double target_epsilon, double q, uint64_t steps,
                            double delta, const std::vector<double>& orders) {
  auto eps = [&](double s) {
    return epsilon_for(q, s, steps, delta, orders).epsilon;
  };
  double lo = 0, hi = 1;
  while (eps(hi) > target_epsilon) {
    lo = hi;
    hi *= 2;
    if (hi > 1e6)
      return -1;
  }
  while (hi - lo > 1e-9 * hi) {
    auto mid = (lo + hi) / 2;
    (eps(mid) > target_epsilon ? lo : hi) = mid;
  }
  return hi;
}

} // namespace fedcaf
