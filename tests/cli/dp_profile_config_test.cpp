#include "cli/dp_profile_config.hpp"

#include <filesystem>

#include <doctest/doctest.h>

#include "tests/unit/config/config_test_util.hpp"

using namespace fedcaf;
using namespace fedcaf::config_test;
using fedcaf::cli::load_dp_profile_config;

TEST_CASE("a dp-profile file is read with its keys, ranges and modes checked") {
  auto path =
      temp_file("dp_profile.yaml", "model: {d_model: 64, num_heads: 4}\n"
                                   "seq_lengths: [16, 32]\n"
                                   "modes: [none, fused]\n");
  auto d = load_dp_profile_config(path, {"num_iter=2"});
  REQUIRE(d);
  CHECK(d->d_model == 64);
  CHECK(d->seq_lengths == std::vector<uint32_t>{16, 32});
  CHECK(d->modes == std::vector<std::string>{"none", "fused"});
  CHECK(d->num_iter == 2);
  auto bad =
      load_dp_profile_config(path, {"modes=[none, fast]", "model.d_model=10",
                                    "model.layers=2", "model.num_layers=1000"});
  REQUIRE_FALSE(bad);
  const auto& msg = bad.err().message;
  CHECK(contains(msg, "4 problems in the configuration:"));
  CHECK(contains(msg, "--set model.num_layers: must be from 1 to 256"));
  // Not a key a --set gave: blamed on the file.
  CHECK(contains(msg, path + ": model.num_heads: must divide d_model (10)"));
  CHECK(contains(msg, "--set model.layers: unknown key"));
  CHECK(contains(msg, "--set modes: 'fast' is not none, per_sample, ghost "
                      "or fused"));
  std::filesystem::remove(path);
  auto missing = load_dp_profile_config(path);
  REQUIRE_FALSE(missing);
  CHECK(contains(missing.err().message, "cannot open the config file"));
}
