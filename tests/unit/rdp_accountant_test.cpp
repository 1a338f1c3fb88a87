#include "fedcaf/rdp_accountant.hpp"

#include <cmath>

#include <doctest/doctest.h>

using namespace fedcaf;

TEST_CASE("the accountant reproduces the published reference values") {
  // sigma 1.5, sample rate 0.04, 2250 steps, delta 1e-5 (Opacus' RDP).
  auto spent = epsilon_for(0.04, 1.5, 2250, 1e-5);
  CHECK(std::fabs(spent.epsilon / 7.32911117143 - 1) < 1e-6);
  CHECK(spent.order > 1);
  // The inverse, for epsilon 8: 90 epochs (2250 steps) and 2000 steps.
  auto s90 = noise_multiplier_for(8, 0.04, 2250, 1e-5);
  CHECK(s90 == doctest::Approx(1.416).epsilon(1e-3));
  auto s2000 = noise_multiplier_for(8, 0.04, 2000, 1e-5);
  CHECK(s2000 == doctest::Approx(1.3562).epsilon(1e-4));
  // It is the smallest such sigma: epsilon at it is the target.
  CHECK(epsilon_for(0.04, s2000, 2000, 1e-5).epsilon ==
        doctest::Approx(8).epsilon(1e-6));
}

TEST_CASE("RDP of the sampled Gaussian: limits and continuity in the order") {
  // q = 1 is the Gaussian mechanism: alpha / (2 sigma^2).
  CHECK(rdp_sampled_gaussian(1, 2, 5) == doctest::Approx(5.0 / 8));
  CHECK(rdp_sampled_gaussian(0, 1, 5) == 0);
  CHECK(std::isinf(rdp_sampled_gaussian(0.1, 0, 5)));
  // The fractional series meets the integer expansion.
  for (double q : {0.01, 0.2}) {
    auto at3 = rdp_sampled_gaussian(q, 1.1, 3);
    CHECK(rdp_sampled_gaussian(q, 1.1, 3 - 1e-7) ==
          doctest::Approx(at3).epsilon(1e-5));
    CHECK(rdp_sampled_gaussian(q, 1.1, 3 + 1e-7) ==
          doctest::Approx(at3).epsilon(1e-5));
  }
  // More noise, less privacy loss; more steps, more.
  CHECK(epsilon_for(0.01, 2, 1000, 1e-5).epsilon <
        epsilon_for(0.01, 1, 1000, 1e-5).epsilon);
  CHECK(epsilon_for(0.01, 1, 2000, 1e-5).epsilon >
        epsilon_for(0.01, 1, 1000, 1e-5).epsilon);
}
