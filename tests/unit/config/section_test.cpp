#include "fedcaf/config/section.hpp"

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

TEST_CASE("--set overrides a key by its dotted path") {
  auto c =
      load_config(embedded_simulate_yaml(), "embedded", config_role::simulate,
                  {"server_configs.num_global_epochs=7",
                   "client_configs.train_configs.optim_args.lr=0.2"});
  REQUIRE(c);
  CHECK(c->server.num_global_epochs == 7);
  CHECK(c->clients.train.optim.lr == doctest::Approx(0.2));
  CHECK(contains(c->effective_yaml, "num_global_epochs: 7"));
}

TEST_CASE("an unknown key from --set is blamed on --set, with its path") {
  auto msg = message_of(load_config(embedded_simulate_yaml(), "sim.yaml",
                                    config_role::simulate,
                                    {"server_configs.num_global_epoch=2"}));
  CHECK(contains(msg, "--set server_configs.num_global_epoch: unknown key"));
  CHECK_FALSE(contains(msg, "sim.yaml")); // not the file's mistake
  auto in_file = message_of(load_config("server_configs: {bogus: 1}\n",
                                        "sim.yaml", config_role::simulate));
  CHECK(contains(in_file, "sim.yaml: server_configs.bogus: unknown key"));
}

TEST_CASE("an unknown key near a known one says which: did you mean") {
  auto msg = message_of(load_config(embedded_simulate_yaml(), "sim.yaml",
                                    config_role::simulate,
                                    {"server_configs.num_global_epoch=2"}));
  CHECK(contains(msg, "unknown key (did you mean 'num_global_epochs'?)"));
  auto typo =
      message_of(load_config("client_configs: {train_configs: {optm: SGD}}\n",
                             "sim.yaml", config_role::simulate));
  CHECK(contains(typo, "client_configs.train_configs.optm: unknown key (did "
                       "you mean 'optim'?)"));
  // Nothing near: no guess.
  auto far = message_of(load_config("server_configs: {bogus: 1}\n", "sim.yaml",
                                    config_role::simulate));
  CHECK_FALSE(contains(far, "did you mean"));
}

TEST_CASE("a wrong type names the key path and the value") {
  auto msg = message_of(load_config(embedded_simulate_yaml(), "sim.yaml",
                                    config_role::simulate,
                                    {"server_configs.num_global_epochs=abc"}));
  CHECK(contains(msg, "server_configs.num_global_epochs"));
  CHECK(contains(msg, "'abc'"));
  auto neg = message_of(load_config(embedded_simulate_yaml(), "sim.yaml",
                                    config_role::simulate,
                                    {"server_configs.num_clients=0"}));
  CHECK(contains(neg, "server_configs.num_clients: must be from 1 to"));
}

TEST_CASE("a value outside its choices lists the choices") {
  auto msg = message_of(load_config(
      embedded_simulate_yaml(), "sim.yaml", config_role::simulate,
      {"server_configs.aggregator_kwargs.client_weights_mode=sizes"}));
  CHECK(
      contains(msg, "client_weights_mode: must be one of equal, sample_size"));
}

TEST_CASE("integer keys are range-checked before they are narrowed") {
  auto msg = [](const std::string& set) {
    return message_of(load_config(embedded_simulate_yaml(), "sim.yaml",
                                  config_role::simulate, {set}));
  };
  const std::string stream = "server_configs.comm_configs.stream_configs.";
  // 2^32 + 1 would be 1 as a uint32_t.
  CHECK(contains(msg(stream + "window=4294967297"),
                 "stream_configs.window: must be from 1 to 1024, got "
                 "'4294967297'"));
  CHECK(contains(msg("server_configs.num_clients=-1"),
                 "server_configs.num_clients: must be from 1 to 1048576, got "
                 "'-1'"));
  CHECK(contains(msg(stream + "chunk_bytes=1e30"),
                 "stream_configs.chunk_bytes: expected a whole number from 64 "
                 "to 536870911, got '1e30'"));
  CHECK(contains(msg("server_configs.num_global_epochs=99999999999"),
                 "num_global_epochs: must be from 1 to 4294967295"));
  CHECK(contains(msg("server_configs.num_global_epochs=4294967296"),
                 "num_global_epochs: must be from 1 to 4294967295"));
  CHECK(contains(msg("client_configs.train_configs.num_threads=4294967295"),
                 "num_threads: must be from 0 to 1024"));
  CHECK(contains(msg("client_configs.model_configs.seed=18446744073709551616"),
                 "model_configs.seed: must be from 0 to 18446744073709551615"));
  CHECK(contains(msg("data_configs.dataset_kwargs.classes_per_client=257"),
                 "classes_per_client: must be from 1 to 256"));
  CHECK(contains(msg(stream + "idle_timeout_s=.inf"),
                 "idle_timeout_s: expected a finite number, got '.inf'"));
  CHECK(contains(msg(stream + "reconnect_grace_s=1e300"),
                 "reconnect_grace_s: must be at most 1e9 seconds"));
  auto wide =
      load_config(embedded_simulate_yaml(), "sim.yaml", config_role::simulate,
                  {"client_configs.model_configs.seed="
                   "18446744073709551615",
                   "server_configs.num_global_epochs=+4294967295"});
  REQUIRE(wide);
  CHECK(wide->clients.model.seed == 18446744073709551615ull);
  CHECK(wide->server.num_global_epochs == 4294967295u);
}

TEST_CASE("whole numbers are read in 64 bits, signs and hex included") {
  using config_reader::parse_whole;
  using config_reader::whole_number;
  uint64_t out = 0;
  CHECK(parse_whole("42", out) == whole_number::ok);
  CHECK(out == 42);
  CHECK(parse_whole("+0x10", out) == whole_number::ok);
  CHECK(out == 16);
  CHECK(parse_whole("-0", out) == whole_number::ok);
  CHECK(parse_whole("-1", out) == whole_number::out_of_range);
  CHECK(parse_whole("18446744073709551616", out) == whole_number::out_of_range);
  CHECK(parse_whole("1e3", out) == whole_number::not_whole);
  CHECK(parse_whole("", out) == whole_number::not_whole);
  CHECK(parse_whole("0x", out) == whole_number::not_whole);
}
