// fedcaf dp-epsilon and dp-sigma: the RDP accountant on the command line.

#include <cmath>
#include <cstdio>
#include <map>
#include <stdexcept>
#include <string>

#include "fedcaf/rdp_accountant.hpp"
#include "run.hpp"

namespace fedcaf::cli {

namespace {

/// The numbers a command needs, each checked for its range; the first
/// problem becomes `error`.
struct dp_numbers {
  std::map<std::string, double> values;
  std::string error;

  dp_numbers(const options& opts, std::initializer_list<const char*> needed) {
    for (const auto& [key, text] : opts.numbers) {
      bool known = false;
      for (const auto* n : needed)
        known = known || key == n;
      if (!known) {
        fail("--" + key + " does not apply here");
        return;
      }
      try {
        size_t used = 0;
        values[key] = std::stod(text, &used);
        if (used != text.size())
          throw std::invalid_argument(text);
      } catch (const std::exception&) {
        {
          fail("--" + key + ": '" + text + "' is not a number");
          return;
        }
      }
    }
    for (const auto* n : needed)
      if (!values.count(n)) {
        fail(std::string{"--"} + n + " is required");
        return;
      }
    check("sample-rate",
          values["sample-rate"] > 0 && values["sample-rate"] <= 1,
          "must be in (0, 1]");
    check("delta", values["delta"] > 0 && values["delta"] < 1,
          "must be in (0, 1)");
    auto steps = values["steps"];
    check("steps", steps >= 1 && steps == std::floor(steps),
          "must be a whole number of at least 1");
    if (values.count("noise-multiplier"))
      check("noise-multiplier", values["noise-multiplier"] > 0,
            "must be greater than 0");
    if (values.count("epsilon"))
      check("epsilon", values["epsilon"] > 0, "must be greater than 0");
  }

  void check(const char* key, bool ok, const char* what) {
    if (!ok && error.empty())
      fail(std::string{"--"} + key + " " + what);
  }
  void fail(const std::string& why) {
    if (error.empty())
      error = why;
  }
};

int dp_failed(const std::string& why) {
  std::fprintf(stderr, "fedcaf: bad_config: %s\n", why.c_str());
  return 1;
}

} // namespace

int run_dp_epsilon(const options& opts) {
  dp_numbers n{opts, {"noise-multiplier", "sample-rate", "steps", "delta"}};
  if (!n.error.empty())
    return dp_failed(n.error);
  auto& v = n.values;
  auto spent = epsilon_for(v["sample-rate"], v["noise-multiplier"],
                           static_cast<uint64_t>(v["steps"]), v["delta"]);
  std::printf("sampled Gaussian, RDP over %zu orders, best order %g\n",
              default_rdp_orders().size(), spent.order);
  std::printf("epsilon=%.11g\n", spent.epsilon);
  return 0;
}

int run_dp_sigma(const options& opts) {
  dp_numbers n{opts, {"epsilon", "sample-rate", "steps", "delta"}};
  if (!n.error.empty())
    return dp_failed(n.error);
  auto& v = n.values;
  auto steps = static_cast<uint64_t>(v["steps"]);
  auto sigma =
      noise_multiplier_for(v["epsilon"], v["sample-rate"], steps, v["delta"]);
  if (sigma < 0)
    return dp_failed("no noise multiplier below 1e6 reaches epsilon " +
                     std::to_string(v["epsilon"]));
  auto spent = epsilon_for(v["sample-rate"], sigma, steps, v["delta"]);
  std::printf("epsilon %.6g at best order %g\n", spent.epsilon, spent.order);
  std::printf("noise_multiplier=%.10g\n", sigma);
  return 0;
}

} // namespace fedcaf::cli
