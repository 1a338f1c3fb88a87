#include "fedcaf/config/aggregator_section.hpp"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include <doctest/doctest.h>

#include "fedcaf/config/load.hpp"
#include "tests/unit/config/config_test_util.hpp"

using namespace fedcaf;
using namespace fedcaf::config_test;

TEST_CASE("dp_fedavg is read, checked, and hands clients the clip norm") {
  auto sim = [](std::vector<std::string> sets) {
    return load_config(embedded_simulate_yaml(), "sim.yaml",
                       config_role::simulate, sets);
  };
  auto dp = sim({"server_configs.aggregator_kwargs.dp_fedavg={clip_norm: 0.5, "
                 "noise_multiplier: 1.2, delta: 1e-6, seed: 3}"});
  REQUIRE(dp);
  CHECK(dp->server.rule.dp_clip_norm == 0.5);
  CHECK(dp->server.rule.dp_noise_multiplier == 1.2);
  CHECK(dp->server.rule.dp_delta == 1e-6);
  auto cc = parse_client_configs(client_configs_yaml(*dp));
  REQUIRE(cc);
  CHECK(cc->train.update_clip_norm == 0.5);
  CHECK(contains(
      message_of(sim({"server_configs.aggregator=FedAdamAggregator",
                      "server_configs.aggregator_kwargs.dp_fedavg={clip_norm: "
                      "1}"})),
      "dp_fedavg: DP-FedAvg needs FedAvgAggregator"));
  CHECK(contains(
      message_of(sim({"server_configs.aggregator_kwargs={client_weights_mode: "
                      "sample_size, dp_fedavg: {clip_norm: 1}}"})),
      "needs client_weights_mode: equal"));
  CHECK(contains(message_of(sim({"server_configs.aggregator_kwargs.dp_fedavg="
                                 "{noise_multiplier: 1}"})),
                 "dp_fedavg.clip_norm: must be greater than 0"));
}

TEST_CASE(
    "the connection and update bounds are read with defaults and ranges") {
  auto sim = [](std::vector<std::string> sets) {
    return load_config(embedded_simulate_yaml(), "sim.yaml",
                       config_role::simulate, sets);
  };
  auto defaults = sim({});
  REQUIRE(defaults);
  CHECK(defaults->server.comm.stream.handshake_timeout_s == 10);
  CHECK(defaults->server.comm.stream.max_unauthenticated == 64);
  CHECK(defaults->server.rule.max_update_norm == 0);
  CHECK(defaults->server.rule.max_sample_size == uint64_t{1} << 20);
  CHECK(defaults->server.rule.max_update_ratio == 10);
  CHECK(defaults->server.rule.update_norm_floor == 1);
  const std::string stream = "server_configs.comm_configs.stream_configs.";
  const std::string rule = "server_configs.aggregator_kwargs.";
  auto set = sim({stream + "handshake_timeout_s=2.5",
                  stream + "max_unauthenticated=65535",
                  rule + "max_update_norm=12.5", rule + "max_sample_size=600"});
  REQUIRE(set);
  CHECK(set->server.comm.stream.handshake_timeout_s == 2.5);
  CHECK(set->server.comm.stream.max_unauthenticated == 65535);
  CHECK(set->server.rule.max_update_norm == 12.5);
  CHECK(set->server.rule.max_sample_size == 600);
  CHECK(contains(message_of(sim({stream + "handshake_timeout_s=0"})),
                 "handshake_timeout_s: must be greater than 0"));
  CHECK(contains(message_of(sim({stream + "max_unauthenticated=0"})),
                 "max_unauthenticated: must be from 1 to 65535, got '0'"));
  CHECK(contains(message_of(sim({stream + "max_unauthenticated=65536"})),
                 "max_unauthenticated: must be from 1 to 65535, got '65536'"));
  CHECK(contains(message_of(sim({rule + "max_update_norm=-1"})),
                 "max_update_norm: must be 0 (off) or positive"));
  CHECK(contains(message_of(sim({rule + "max_sample_size=-1"})),
                 "max_sample_size: must be from 0 to"));
  CHECK(contains(message_of(sim({rule + "max_sample_size=0"})),
                 "max_sample_size: must be positive"));
  CHECK(contains(message_of(sim({rule + "max_update_ratio=-1"})),
                 "max_update_ratio: must be 0 (off) or positive"));
  CHECK(contains(message_of(sim({rule + "update_norm_floor=0"})),
                 "update_norm_floor: must be positive"));
  auto off = sim({rule + "max_update_ratio=0"});
  REQUIRE(off);
  CHECK(off->server.rule.max_update_ratio == 0);
  auto client = load_config_file(
      FEDCAF_SOURCE_DIR "/configs/client_1.yaml", config_role::client,
      {"comm_configs.stream_configs.handshake_timeout_s=3"});
  REQUIRE(client);
  CHECK(client->client.comm.stream.handshake_timeout_s == 3);
}

TEST_CASE("robust rules: trim_ratio, and what they cannot run with") {
  auto sim = [](std::vector<std::string> sets) {
    return load_config(embedded_simulate_yaml(), "sim.yaml",
                       config_role::simulate, sets);
  };
  const std::string agg = "server_configs.aggregator=";
  const std::string rule = "server_configs.aggregator_kwargs.";
  auto trimmed = sim({agg + "TrimmedMeanAggregator", rule + "trim_ratio=0.3"});
  REQUIRE(trimmed);
  CHECK(trimmed->server.rule.trim_ratio == 0.3);
  CHECK(sim({agg + "TrimmedMeanAggregator"})->server.rule.trim_ratio == 0.2);
  REQUIRE(sim({agg + "MedianAggregator", "server_configs.memory_mode=window"}));
  CHECK(contains(
      message_of(sim({agg + "TrimmedMeanAggregator", rule + "trim_ratio=0.5"})),
      "trim_ratio: must be in [0, 0.5)"));
  CHECK(contains(
      message_of(sim({agg + "MedianAggregator", rule + "trim_ratio=0.1"})),
      "trim_ratio: applies to TrimmedMeanAggregator only"));
  CHECK(contains(message_of(sim({agg + "MedianAggregator",
                                 rule + "client_weights_mode=sample_size"})),
                 "does not weight them"));
  CHECK(contains(message_of(sim({agg + "MedianAggregator",
                                 "server_configs.secure_aggregation.enabled="
                                 "true"})),
                 "masked updates hide them"));
  CHECK(contains(message_of(sim({agg + "TrimmedMeanAggregator",
                                 "server_configs.scheduler=AsyncScheduler"})),
                 "needs SyncScheduler"));
}
