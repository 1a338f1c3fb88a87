#include "fedcaf/config/server_sections.hpp"

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

TEST_CASE("min_clients and the round deadline are checked") {
  auto c = load_config(
      embedded_simulate_yaml(), "sim.yaml", config_role::simulate,
      {"server_configs.scheduler_kwargs={min_clients: 1, round_deadline_s: "
       "2.5}"});
  REQUIRE(c);
  CHECK(c->server.min_clients == 1);
  CHECK(c->server.round_deadline_s == doctest::Approx(2.5));
  auto too_many =
      load_config(embedded_simulate_yaml(), "sim.yaml", config_role::simulate,
                  {"server_configs.scheduler_kwargs.min_clients=9"});
  CHECK(
      contains(message_of(too_many), "must not exceed the clients of a round"));
  auto heartbeat = load_config(
      embedded_simulate_yaml(), "sim.yaml", config_role::simulate,
      {"server_configs.comm_configs.stream_configs.connection_timeout_s=1",
       "server_configs.comm_configs.stream_configs.heartbeat_s=2"});
  CHECK(contains(message_of(heartbeat), "must exceed heartbeat_s"));
}

TEST_CASE("aggregators, schedulers and sampling keys are read and checked") {
  auto sim = [](std::vector<std::string> sets) {
    return load_config(embedded_simulate_yaml(), "sim.yaml",
                       config_role::simulate, sets);
  };
  auto adam = sim({"server_configs.aggregator=FedAdamAggregator",
                   "server_configs.aggregator_kwargs={server_learning_rate: "
                   "0.02, server_adapt_param: 0.01, server_momentum_param_2: "
                   "0.9}"});
  REQUIRE(adam);
  CHECK(adam->server.rule.server_learning_rate == doctest::Approx(0.02));
  CHECK(adam->server.rule.server_adapt_param == doctest::Approx(0.01));
  CHECK(adam->server.rule.server_momentum_param_2 == doctest::Approx(0.9));
  // partial_updates unset: keep for a server's own clients (a drop costs
  // the others no upload), discard in a tree and under secure aggregation.
  CHECK(adam->server.rule.partial_updates == partial_updates::keep);
  CHECK_FALSE(adam->server.rule.partial_updates_given);
  auto tree = sim({"server_configs.num_clients=4",
                   "data_configs.dataset_kwargs.num_clients=4",
                   "server_configs.simulated_relays=2"});
  REQUIRE(tree);
  CHECK(tree->server.rule.partial_updates == partial_updates::discard);
  auto secure = sim({"server_configs.secure_aggregation.enabled=true",
                     "server_configs.aggregator_kwargs.max_update_ratio=0"});
  if (!secure)
    FAIL(secure.err().message);
  CHECK(secure->server.rule.partial_updates == partial_updates::discard);
  auto told = sim({"server_configs.aggregator_kwargs.partial_updates=discard"});
  REQUIRE(told);
  CHECK(told->server.rule.partial_updates == partial_updates::discard);
  // FedAvgM's step defaults to 1 (the plain momentum of Hsu et al.).
  auto avgm = sim({"server_configs.aggregator=FedAvgMAggregator"});
  REQUIRE(avgm);
  CHECK(avgm->server.rule.server_learning_rate == 1.0);
  auto buff = sim({"server_configs.scheduler=AsyncScheduler",
                   "server_configs.aggregator=FedBuffAggregator",
                   "server_configs.aggregator_kwargs={K: 5, staleness_fn: "
                   "hinge, staleness_fn_kwargs: {a: 10, b: 4}}"});
  REQUIRE(buff);
  CHECK(buff->server.rule.buffer_k == 5);
  CHECK(buff->server.rule.staleness_fn == staleness_kind::hinge);
  CHECK(buff->server.rule.partial_updates == partial_updates::keep);
  // An aggregator set without a scheduler brings the scheduler it needs;
  // one named beside it must match.
  auto async = sim({"server_configs.aggregator=FedAsyncAggregator"});
  REQUIRE(async);
  CHECK(async->server.scheduler == scheduler_kind::async);
  auto adagrad = sim({"server_configs.aggregator=FedAdagradAggregator"});
  REQUIRE(adagrad);
  CHECK(adagrad->server.scheduler == scheduler_kind::sync);
  CHECK(contains(message_of(sim({"server_configs.aggregator=FedAsyncAggregator",
                                 "server_configs.scheduler=SyncScheduler"})),
                 "FedAsyncAggregator needs AsyncScheduler"));
  CHECK(contains(message_of(sim({"server_configs.scheduler=AsyncScheduler"})),
                 "FedAvgAggregator needs SyncScheduler"));
  CHECK(contains(
      message_of(sim({"server_configs.scheduler=AsyncScheduler",
                      "server_configs.aggregator=FedAsyncAggregator",
                      "server_configs.aggregator_kwargs.partial_updates="
                      "discard"})),
      "partial_updates: FedAsyncAggregator keeps"));
  CHECK(contains(message_of(sim({"server_configs.aggregator=FedProx"})),
                 "aggregator: must be one of FedAvgAggregator"));
  CHECK(
      contains(message_of(sim({"server_configs.aggregator_kwargs.alpha=1.5"})),
               "alpha: must be in (0, 1]"));
  auto sampled =
      sim({"server_configs.scheduler_kwargs={client_fraction: 0.5, seed: 3}"});
  REQUIRE(sampled);
  CHECK(sampled->server.clients_per_round == 1);
  CHECK(sampled->server.sampling_seed == 3);
  CHECK(sampled->server.min_clients == 1);
  CHECK(contains(message_of(sim({"server_configs.scheduler_kwargs."
                                 "clients_per_round=3"})),
                 "clients_per_round: must not exceed num_clients (2)"));
}

TEST_CASE("secure_aggregation: what it cannot run with is refused at load") {
  auto refused = [](std::vector<std::string> sets, const char* why) {
    sets.push_back("server_configs.secure_aggregation.enabled=true");
    auto c = load_config(embedded_simulate_yaml(), "embedded",
                         config_role::simulate, sets);
    CHECK(contains(message_of(c), why));
  };
  refused({"server_configs.memory_mode=window",
           "server_configs.aggregator=FedAdamAggregator"},
          "FedAvgAggregator only");
  refused({"server_configs.aggregator_kwargs.max_update_norm=10"},
          "cannot measure a masked update");
  refused({"server_configs.scheduler_kwargs.round_deadline_s=30",
           "server_configs.scheduler_kwargs.on_deadline=wait"},
          "on_deadline: wait does not apply");
  refused({"server_configs.aggregator=FedAsyncAggregator"},
          "SyncScheduler only");
  refused({"server_configs.secure_aggregation.quantization_bits=31",
           "server_configs.num_clients=4"},
          "overflow the 32-bit sum");
  refused({"server_configs.secure_aggregation.quantization_bits=40"},
          "must be from 1 to 31");
  refused({"server_configs.aggregator_kwargs.partial_updates=keep"},
          "partial_updates: keep");
  auto ok =
      load_config(embedded_simulate_yaml(), "embedded", config_role::simulate,
                  {"server_configs.secure_aggregation.enabled=true"});
  REQUIRE(ok);
  CHECK(ok->server.secure_aggregation.enabled);
  CHECK(ok->server.secure_aggregation.quantization_bits == 22);
  for (const char* mode : {"window", "disk"})
    CHECK(load_config(embedded_simulate_yaml(), "embedded",
                      config_role::simulate,
                      {"server_configs.secure_aggregation.enabled=true",
                       std::string{"server_configs.memory_mode="} + mode}));
  CHECK(load_config(
      embedded_simulate_yaml(), "embedded", config_role::simulate,
      {"server_configs.secure_aggregation.enabled=true",
       "server_configs.aggregator_kwargs.dp_fedavg.clip_norm=1",
       "server_configs.aggregator_kwargs.dp_fedavg.noise_multiplier=1"}));
}

TEST_CASE("simulated_relays: simulate only, within the round's clients, and "
          "with the rules a tree refuses refused") {
  auto sim = [](std::vector<std::string> set) {
    set.push_back("server_configs.num_clients=4");
    set.push_back("data_configs.dataset_kwargs.num_clients=4");
    return load_config(embedded_simulate_yaml(), "sim.yaml",
                       config_role::simulate, set);
  };
  auto c = sim({"server_configs.simulated_relays=2"});
  REQUIRE(c);
  CHECK(c->server.simulated_relays == 2);
  CHECK(c->server.relays.empty()); // named when the tree is built
  CHECK(contains(message_of(sim({"server_configs.simulated_relays=5"})),
                 "at most 4"));
  CHECK(contains(message_of(sim({"server_configs.simulated_relays=2",
                                 "server_configs.relays.R1=2"})),
                 "give relays or simulated_relays"));
  CHECK(
      contains(message_of(sim({"server_configs.simulated_relays=2",
                               "server_configs.aggregator=MedianAggregator"})),
               "does not decompose"));
  auto server =
      load_config(embedded_simulate_yaml(), "s.yaml", config_role::server,
                  {"server_configs.simulated_relays=2"});
  CHECK(contains(message_of(server), "simulate only"));
}

TEST_CASE("relays: each needs a token where tokens are on, and a cut-off "
          "update is not kept where a relay's sum could be") {
  const std::string prefix = "server_configs.comm_configs.grpc_configs.";
  auto root = [&](std::vector<std::string> set) {
    set.push_back("server_configs.num_clients=2");
    set.push_back("server_configs.relays={RA: 4, RB: 4}");
    return load_config(embedded_simulate_yaml(), "root.yaml",
                       config_role::server, set);
  };
  REQUIRE(root({}));
  auto tokens = prefix + "authenticator_args={tokens: {RA: a-1, RB: b-2}}";
  auto with_tokens = root({prefix + "use_authenticator=true", tokens});
  REQUIRE(with_tokens);
  CHECK(with_tokens->server.relays.at("RB") == 4);
  auto one_missing =
      root({prefix + "use_authenticator=true",
            prefix + "authenticator_args={tokens: {RA: a-1, Client2: c-2}}"});
  CHECK(contains(message_of(one_missing), "relays.RB"));
  CHECK(contains(message_of(one_missing), "could never register"));
  auto keep = root({"server_configs.aggregator_kwargs.partial_updates=keep"});
  CHECK(contains(message_of(keep), "partial_updates"));
  CHECK(contains(message_of(keep), "relay's sum"));
}
