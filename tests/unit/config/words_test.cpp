#include "fedcaf/config/words.hpp"

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

TEST_CASE("memory_mode is parsed once, into its enum") {
  for (auto mode : {memory_mode::ram, memory_mode::window, memory_mode::disk}) {
    std::string name{name_of(mode)};
    CAPTURE(name);
    auto c =
        load_config(embedded_simulate_yaml(), "embedded", config_role::simulate,
                    {"server_configs.memory_mode=" + name});
    REQUIRE(c);
    CHECK(c->server.memory_mode == mode);
    CHECK(parse_word<memory_mode>(name) == mode);
  }
  CHECK_FALSE(parse_word<memory_mode>("RAM"));
  auto bad =
      load_config(embedded_simulate_yaml(), "embedded", config_role::simulate,
                  {"server_configs.memory_mode=swap"});
  CHECK(contains(message_of(bad), "must be one of ram, window, disk"));
}

TEST_CASE("the scheduler is parsed once, into its enum, and named back") {
  CHECK(name_of(scheduler_kind::sync) == "SyncScheduler");
  CHECK(name_of(scheduler_kind::async) == "AsyncScheduler");
  CHECK(parse_word<scheduler_kind>("AsyncScheduler") == scheduler_kind::async);
  CHECK_FALSE(parse_word<scheduler_kind>("async"));
  auto c =
      load_config(embedded_simulate_yaml(), "embedded", config_role::simulate,
                  {"server_configs.scheduler=AsyncScheduler",
                   "server_configs.aggregator=FedAsyncAggregator"});
  REQUIRE(c);
  CHECK(c->server.scheduler == scheduler_kind::async);
  auto bad =
      load_config(embedded_simulate_yaml(), "embedded", config_role::simulate,
                  {"server_configs.scheduler=RoundRobin"});
  CHECK(contains(message_of(bad), "server_configs.scheduler: must be one of "
                                  "SyncScheduler, AsyncScheduler, got "
                                  "'RoundRobin'"));
}

/// Checks that every word of E's table reads back as its value.
template <class E> void check_round_trip() {
  for (const auto& w : words_of(E{})) {
    CAPTURE(w.name);
    CHECK(name_of(w.value) == w.name);
    CHECK(parse_word<E>(w.name) == w.value);
  }
}

TEST_CASE("every word table names each value once and reads it back") {
  check_round_trip<model_kind>();
  check_round_trip<trainer_kind>();
  check_round_trip<model_storage>();
  check_round_trip<dp_sgd_mode>();
  check_round_trip<client_weighting>();
  check_round_trip<staleness_kind>();
  check_round_trip<partial_updates>();
  check_round_trip<tensor_rule>();
  check_round_trip<checkpoint_failure>();
  check_round_trip<deadline_action>();
  check_round_trip<scheduler_kind>();
  check_round_trip<memory_mode>();
  CHECK(name_of(checkpoint_failure::go_on) == "continue");
  CHECK(name_of(model_kind::cnn) == "CNN");
  CHECK(name_of(trainer_kind::vanilla) == "VanillaTrainer");
}
