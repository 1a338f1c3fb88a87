#pragma once
// Renyi differential privacy of the sampled Gaussian mechanism (Mironov,
// Talwar and Zhang 2019, "Renyi Differential Privacy of the Sampled Gaussian
// Mechanism"): each step adds Gaussian noise of std sigma (in units of the
// clipping norm) to a sum over a Poisson sample of rate q. RDP composes by
// addition over steps and converts to (epsilon, delta)-DP with the bound of
// Balle et al. 2020 ("Hypothesis Testing Interpretations and Renyi
// Differential Privacy", Theorem 21), minimised over the orders.
// Thread-safety: pure functions.

#include <cstdint>
#include <vector>

namespace fedcaf {

/// The orders tried by default: 1.1, 1.2, ..., 10.9 and 12, 13, ..., 63.
std::vector<double> default_rdp_orders();

/// Returns the RDP of one step at order `alpha` > 1 (integer or
/// fractional), for sample rate q in [0, 1] and noise multiplier sigma >= 0
/// (infinity when sigma is 0 and q > 0).
double rdp_sampled_gaussian(double q, double sigma, double alpha);

struct privacy_spent {
  double epsilon = 0;
  double order = 0; ///< the order that gave the smallest epsilon
};

/// Returns the smallest epsilon over `orders` after `steps` steps at sample
/// rate q and noise multiplier sigma, for the given delta in (0, 1).
privacy_spent
epsilon_for(double q, double sigma, uint64_t steps, double delta,
            const std::vector<double>& orders = default_rdp_orders());

/// Returns the smallest noise multiplier whose epsilon after `steps` steps at
/// rate q is at most `target_epsilon` (bisection to a relative 1e-9 on
/// sigma), or a negative value iff none below 1e6 reaches it.
double
noise_multiplier_for(double target_epsilon, double q, uint64_t steps,
                     double delta,
                     const std::vector<double>& orders = default_rdp_orders());

} // namespace fedcaf
