#include "fedcaf/config.hpp"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include <doctest/doctest.h>

using namespace fedcaf;

namespace {

/// Writes `text` to a fresh file under the temporary directory.
std::string temp_file(const std::string& name, const std::string& text) {
  auto path =
      (std::filesystem::temp_directory_path() /
       ("fedcaf_config_test_" + std::to_string(::getpid()) + "_" + name))
          .string();
  std::ofstream{path} << text;
  return path;
}

/// A "billion laughs": nine levels of mappings of ten aliases each, 10^9
/// leaves when walked, in under a kilobyte, placed at `key`.
std::string billion_laughs(const std::string& key) {
  std::string doc = "l0: &l0 {a: lol}\n";
  for (int level = 1; level <= 9; ++level) {
    auto prev = "*l" + std::to_string(level - 1);
    doc += "l" + std::to_string(level) + ": &l" + std::to_string(level) + " {";
    for (int i = 0; i < 10; ++i)
      doc += (i ? ", k" : "k") + std::to_string(i) + ": " + prev;
    doc += "}\n";
  }
  return doc + key + ": *l9\n";
}

std::string message_of(const result<config>& c) {
  REQUIRE_FALSE(c);
  return c.err().message;
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

} // namespace

TEST_CASE("the embedded default config is valid") {
  auto c =
      load_config(embedded_simulate_yaml(), "embedded", config_role::simulate);
  REQUIRE(c);
  CHECK(c->server.num_clients >= 2);
  CHECK(c->server.aggregator == server_rule::fedavg);
  CHECK(c->data.partition_strategy == "iid");
  CHECK(c->clients.train.optim.name == "SGD");
}

TEST_CASE("the shipped configs load in their roles") {
  std::string dir = FEDCAF_SOURCE_DIR "/configs/";
  CHECK(load_config_file(dir + "simulate.yaml", config_role::simulate));
  CHECK(load_config_file(dir + "server.yaml", config_role::server));
  auto c1 = load_config_file(dir + "client_1.yaml", config_role::client);
  REQUIRE(c1);
  CHECK(c1->client.client_id == "Client1");
  CHECK(c1->client.data.client_index == 0);
  auto c2 = load_config_file(dir + "client_2.yaml", config_role::client);
  REQUIRE(c2);
  CHECK(c2->client.data.client_index == 1);
}

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

TEST_CASE("a missing dataset directory is named") {
  auto msg = message_of(
      load_config(embedded_simulate_yaml(), "sim.yaml", config_role::simulate,
                  {"data_configs.dataset_path=/nonexistent"}));
  CHECK(contains(msg, "data_configs.dataset_path"));
  CHECK(contains(msg, "/nonexistent"));
}

TEST_CASE("a chunk that does not fit max_message_size is refused") {
  auto msg = message_of(load_config(
      embedded_simulate_yaml(), "sim.yaml", config_role::simulate,
      {"server_configs.comm_configs.grpc_configs.max_message_size=4096",
       "server_configs.comm_configs.stream_configs.chunk_bytes=8192"}));
  CHECK(contains(msg, "stream_configs.chunk_bytes"));
}

TEST_CASE(
    "use_model_chunking off sends the model whole, within max_message_size") {
  comm_config c;
  c.use_model_chunking = false;
  c.max_message_size = 1 << 20;
  auto fits = c.chunk_bytes_for(1000);
  REQUIRE(fits);
  CHECK(*fits == 1000);
  CHECK_FALSE(c.chunk_bytes_for(2 << 20));
  c.use_model_chunking = true;
  CHECK(*c.chunk_bytes_for(2 << 20) == c.stream.chunk_bytes);
}

TEST_CASE("a client file needs client_id and a partition below num_clients") {
  auto msg = message_of(load_config(
      "data_configs: {dataset_kwargs: {num_clients: 2, client_id: 2}}\n",
      "client.yaml", config_role::client));
  CHECK(contains(msg, "client_id"));
  auto c = load_config("client_id: A\n"
                       "data_configs: {dataset_kwargs: {num_clients: 2, "
                       "client_id: 2}}\n",
                       "client.yaml", config_role::client);
  CHECK(contains(message_of(c),
                 "data_configs.dataset_kwargs.client_id: must be below"));
  auto spaced = load_config("client_id: Client 1\n"
                            "data_configs: {dataset_kwargs: {num_clients: 2, "
                            "client_id: 1}}\n",
                            "client.yaml", config_role::client);
  CHECK(contains(message_of(spaced), "client_id: a client id may hold "
                                     "printable ASCII other than space"));
}

TEST_CASE("client_configs survive the trip to a client") {
  auto c =
      load_config(embedded_simulate_yaml(), "embedded", config_role::simulate,
                  {"client_configs.train_configs.optim=Adam",
                   "client_configs.train_configs.optim_args.lr=0.003"});
  REQUIRE(c);
  auto back = parse_client_configs(client_configs_yaml(*c));
  REQUIRE(back);
  CHECK(back->train.optim.name == "Adam");
  CHECK(back->train.optim.lr == doctest::Approx(0.003));
  CHECK(back->model.seed == c->clients.model.seed);
}

TEST_CASE("malformed YAML is an error, not an exception") {
  auto msg = message_of(load_config("server_configs: [unclosed", "bad.yaml",
                                    config_role::server));
  CHECK(contains(msg, "bad.yaml"));
}

TEST_CASE(
    "a synthetic model takes its size and dtype, and needs the dummy trainer") {
  auto c =
      load_config(embedded_simulate_yaml(), "sim.yaml", config_role::simulate,
                  {"client_configs.model_configs={name: synthetic, "
                   "num_tensors: 8, total_bytes: 4096, dtype: bfloat16}",
                   "client_configs.train_configs={trainer: dummy, add: 0.5}"});
  REQUIRE(c);
  CHECK(c->clients.model.model_name == model_kind::synthetic);
  CHECK(c->clients.model.dtype == "bfloat16");
  CHECK(c->clients.train.add == doctest::Approx(0.5));
  auto back = parse_client_configs(client_configs_yaml(*c));
  REQUIRE(back);
  CHECK(back->model.total_bytes == 4096);
  auto msg = message_of(
      load_config(embedded_simulate_yaml(), "sim.yaml", config_role::simulate,
                  {"client_configs.model_configs.name=synthetic"}));
  CHECK(contains(msg, "use trainer: dummy"));
  CHECK(contains(
      message_of(load_config(embedded_simulate_yaml(), "sim.yaml",
                             config_role::simulate,
                             {"client_configs.model_configs.dtype=int8"})),
      "dtype: must be one of float32, bfloat16, float16"));
}

TEST_CASE("use_ssl without certificates stops the command") {
  auto msg = message_of(
      load_config(embedded_simulate_yaml(), "sim.yaml", config_role::simulate,
                  {"server_configs.comm_configs.grpc_configs.use_ssl=true"}));
  CHECK(contains(msg, "grpc_configs.server_certificate: is required with "
                      "use_ssl: true"));
  CHECK(contains(msg, "never falls back"));
  std::string dir = FEDCAF_SOURCE_DIR "/configs/";
  auto client = load_config_file(
      dir + "client_1.yaml", config_role::client,
      {"comm_configs.grpc_configs.use_ssl=true",
       "comm_configs.grpc_configs.client_certificate=/nonexistent.pem"});
  CHECK(contains(message_of(client), "'/nonexistent.pem' is not a file"));
}

TEST_CASE("tokens are read per client, required when on, and redacted") {
  const std::string prefix = "server_configs.comm_configs.grpc_configs.";
  auto missing =
      load_config(embedded_simulate_yaml(), "sim.yaml", config_role::simulate,
                  {prefix + "use_authenticator=true"});
  CHECK(contains(message_of(missing), "needs a token per client"));
  auto c = load_config(
      embedded_simulate_yaml(), "sim.yaml", config_role::simulate,
      {prefix + "use_authenticator=true",
       prefix + "authenticator_args={tokens: {Client1: s3cret-1, Client2: "
                "s3cret-2}}"});
  REQUIRE(c);
  REQUIRE(c->server.comm.auth.tokens.size() == 2);
  CHECK(c->server.comm.auth.tokens[1].second == "s3cret-2");
  CHECK_FALSE(contains(c->effective_yaml, "s3cret"));
  CHECK(contains(c->effective_yaml, "<redacted>"));
  std::string dir = FEDCAF_SOURCE_DIR "/configs/";
  auto client = load_config_file(dir + "client_1.yaml", config_role::client,
                                 {"comm_configs.grpc_configs.use_authenticator="
                                  "true"});
  CHECK(contains(message_of(client), "needs auth_token or auth_token_file"));
}

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
  CHECK(adam->server.rule.partial_updates == partial_updates::discard);
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
  CHECK(async->server.scheduler == "AsyncScheduler");
  auto adagrad = sim({"server_configs.aggregator=FedAdagradAggregator"});
  REQUIRE(adagrad);
  CHECK(adagrad->server.scheduler == "SyncScheduler");
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

TEST_CASE("compression, norm_bound and proximal_mu: their keys, and what "
          "they cannot run with") {
  auto sim = [](std::vector<std::string> sets) {
    return load_config(embedded_simulate_yaml(), "sim.yaml",
                       config_role::simulate, sets);
  };
  const std::string z = "client_configs.comm_configs.compression.";
  auto c = sim({z + "method=int8", z + "direction=both",
                z + "zfp_tolerance=0.01", z + "error_feedback=false"});
  REQUIRE(c);
  const auto& k = c->clients.compression;
  CHECK(k.method == compression_method::int8);
  CHECK((k.up && k.down && !k.error_feedback && k.zfp_tolerance == 0.01));
  auto down = sim({z + "method=fp16", z + "direction=down",
                   "server_configs.memory_mode=window"});
  REQUIRE(down); // downloads only: any memory mode
  CHECK((!down->clients.compression.up && down->clients.compression.down));
  CHECK_FALSE(sim({})->clients.compression.up);
  CHECK(contains(message_of(sim({z + "method=lz4"})), "method"));
  CHECK(contains(
      message_of(sim({z + "method=int8", "server_configs.memory_mode=window"})),
      "need memory_mode ram"));
  CHECK(contains(message_of(sim({z + "method=int8",
                                 "server_configs.secure_aggregation.enabled="
                                 "true"})),
                 "cannot be masked"));
  const std::string rule = "server_configs.aggregator_kwargs.";
  auto bounded = sim({rule + "norm_bound=2.5"});
  REQUIRE(bounded);
  CHECK(bounded->server.rule.norm_bound == 2.5);
  CHECK(bounded->clients.train.declare_update_norm);
  CHECK(contains(bounded->client_configs_text, "declare_update_norm: true"));
  CHECK(contains(message_of(sim({rule + "norm_bound=-1"})),
                 "norm_bound: must be 0 (off) or positive"));
  CHECK(contains(message_of(sim({rule + "norm_bound=1",
                                 "server_configs.memory_mode=window"})),
                 "needs memory_mode ram"));
  CHECK(
      contains(message_of(sim({rule + "norm_bound=1",
                               "server_configs.aggregator=MedianAggregator"})),
               "is not one"));
  CHECK(contains(message_of(sim({rule + "norm_bound=1", z + "method=fp16"})),
                 "use one or the other"));
  auto prox = sim({"client_configs.train_configs.proximal_mu=0.01"});
  REQUIRE(prox);
  CHECK(prox->clients.train.proximal_mu == 0.01);
  CHECK(
      contains(message_of(sim({"client_configs.train_configs.proximal_mu=-1"})),
               "proximal_mu: must be 0 (off) or positive"));
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

TEST_CASE("list elements are range-checked one by one") {
  auto path = temp_file("matrix.yaml", "base: " FEDCAF_SOURCE_DIR
                                       "/configs/synthetic_dummy.yaml\n"
                                       "clients: [2, 0]\n");
  auto m = load_profile_matrix(path);
  REQUIRE_FALSE(m);
  CHECK(contains(m.err().message, "clients[1]: must be from 1 to 1048576"));
  std::filesystem::remove(path);
}

TEST_CASE("YAML anchors and aliases are refused before anything expands") {
  auto start = std::chrono::steady_clock::now();
  auto msg = message_of(load_config(billion_laughs("server_configs"),
                                    "laughs.yaml", config_role::server));
  CHECK(contains(msg, "laughs.yaml"));
  CHECK(contains(msg, "anchors and aliases"));
  auto clients = parse_client_configs(billion_laughs("train_configs"));
  REQUIRE_FALSE(clients);
  CHECK(contains(clients.err().message, "anchors and aliases"));
  // One anchor and one alias, in a --set value.
  auto set = message_of(load_config(
      embedded_simulate_yaml(), "sim.yaml", config_role::simulate,
      {"server_configs.scheduler_kwargs={min_clients: &n 1, seed: *n}"}));
  CHECK(contains(set, "anchors and aliases"));
  auto tokens = temp_file("tokens.yaml", billion_laughs("Client1"));
  const std::string grpc = "server_configs.comm_configs.grpc_configs.";
  auto from_file = message_of(
      load_config(embedded_simulate_yaml(), "sim.yaml", config_role::simulate,
                  {grpc + "use_authenticator=true",
                   grpc + "authenticator_args.tokens_file=" + tokens}));
  CHECK(contains(from_file, "tokens_file: " + tokens));
  CHECK(contains(from_file, "anchors and aliases"));
  auto file = temp_file("laughs.yaml", billion_laughs("server_configs"));
  CHECK(contains(message_of(load_config_file(file, config_role::server)),
                 "anchors and aliases"));
  std::filesystem::remove(tokens);
  std::filesystem::remove(file);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds{2});
}

TEST_CASE("a config file past 16 MiB is refused unread") {
  auto path = temp_file("huge.yaml", "# " + std::string(17 << 20, 'x') + "\n");
  auto msg = message_of(load_config_file(path, config_role::server));
  CHECK(contains(msg, "larger than 16777216 bytes"));
  std::filesystem::remove(path);
}

TEST_CASE("APPFL's keys naming Python files are refused, not ignored") {
  for (std::string set :
       {"client_configs.model_configs.model_path=resources/model/cnn.py",
        "client_configs.train_configs.loss_fn_path=resources/loss/celoss.py",
        "client_configs.train_configs.metric_path=resources/metric/acc.py",
        "data_configs.dataset_path=resources/dataset/mnist_dataset.py"}) {
    CAPTURE(set);
    auto c = load_config(embedded_simulate_yaml(), "embedded",
                         config_role::simulate, {set});
    auto message = message_of(c);
    CHECK(contains(message, set.substr(0, set.find('='))));
    CHECK(contains(message, "Python file"));
    CHECK(contains(message, "examples/python/fashion_mnist.py"));
    CHECK(contains(message, "model_configs.name: torchscript"));
  }
}

TEST_CASE("memory_mode is parsed once, into its enum") {
  for (auto mode : {memory_mode::ram, memory_mode::window, memory_mode::disk}) {
    std::string name = to_string(mode);
    CAPTURE(name);
    auto c =
        load_config(embedded_simulate_yaml(), "embedded", config_role::simulate,
                    {"server_configs.memory_mode=" + name});
    REQUIRE(c);
    CHECK(c->server.memory_mode == mode);
    CHECK(parse_memory_mode(name) == mode);
  }
  CHECK_FALSE(parse_memory_mode("RAM"));
  auto bad =
      load_config(embedded_simulate_yaml(), "embedded", config_role::simulate,
                  {"server_configs.memory_mode=swap"});
  CHECK(contains(message_of(bad), "must be one of ram, window, disk"));
}

TEST_CASE("torchscript models, the tensors dataset, loss_fn and device are "
          "read and checked") {
  auto load = [](std::vector<std::string> sets) {
    return load_config(embedded_simulate_yaml(), "embedded",
                       config_role::simulate, sets);
  };
  auto appfl = load({"client_configs.train_configs.loss_fn=NLLLoss"});
  REQUIRE(appfl);
  CHECK(appfl->clients.train.loss_fn == "nll");
  CHECK(load({"client_configs.train_configs.loss_fn=mse"}));
  CHECK(contains(message_of(load({"client_configs.train_configs.loss_fn=l1"})),
                 "train_configs.loss_fn: must be one of cross_entropy"));
  // Refused unless this build's LibTorch has CUDA (Debian's has not).
  if (auto cuda = load({"client_configs.train_configs.device=cuda"}); !cuda) {
    CHECK(contains(cuda.err().message, "train_configs.device"));
    CHECK(contains(cuda.err().message, "has no CUDA"));
    CHECK(contains(cuda.err().message, "examples/python/fashion_mnist.py"));
  }
  CHECK(contains(
      message_of(load({"client_configs.model_configs.model_name=torchscript"})),
      "model_configs.path: is required for a torchscript model"));
  auto pt = temp_file("model.pt", "not checked here");
  auto ts = load({"client_configs.model_configs.model_name=torchscript",
                  "client_configs.model_configs.path=" + pt});
  REQUIRE(ts);
  CHECK(*ts->server.federated_evaluation); // the server cannot evaluate it
  // The tensors dataset: training files required, test files in pairs.
  auto npy = temp_file("x.npy", "");
  std::string kw = "data_configs.dataset_kwargs.";
  auto no_files = message_of(load({"data_configs.dataset_name=tensors"}));
  CHECK(contains(no_files, kw + "train_features: is required"));
  auto missing = message_of(
      load({"data_configs.dataset_name=tensors", kw + "train_features=" + npy,
            kw + "train_labels=/nonexistent.npy"}));
  CHECK(contains(missing, kw + "train_labels: '/nonexistent.npy' is not"));
  auto half = message_of(
      load({"data_configs.dataset_name=tensors", kw + "train_features=" + npy,
            kw + "train_labels=" + npy, kw + "test_features=" + npy}));
  CHECK(contains(half, kw + "test_labels: is required"));
  CHECK(load({"data_configs.dataset_name=tensors", kw + "train_features=" + npy,
              kw + "train_labels=" + npy + ":labels"})
            .err()
            .message.find("is not a file") != std::string::npos);
  CHECK(contains(message_of(load({kw + "train_features=" + npy})),
                 "tensor files need dataset_name: tensors"));
  std::filesystem::remove(pt);
  std::filesystem::remove(npy);
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

TEST_CASE("tensor counts and model dimensions are bounded at load") {
  auto msg = message_of(
      load_config(embedded_simulate_yaml(), "embedded", config_role::simulate,
                  {"client_configs.train_configs.trainer=dummy",
                   "client_configs.model_configs.model_name=synthetic",
                   "client_configs.model_configs.num_tensors=100000000"}));
  CHECK(contains(msg, "client_configs.model_configs.num_tensors: must be "
                      "from 1 to 65536, got '100000000'"));
  CHECK(load_config(embedded_simulate_yaml(), "embedded", config_role::simulate,
                    {"client_configs.train_configs.trainer=dummy",
                     "client_configs.model_configs.model_name=synthetic",
                     "client_configs.model_configs.num_tensors=65536"}));
}

namespace {

/// APPFL's shipped example configs, Python-file keys removed.
const std::string appfl_dir = FEDCAF_SOURCE_DIR "/tests/fixtures/appfl/";

/// The keys of APPFL's layout that fedcaf ignores in each server fixture,
/// under the prefixes they share.
std::vector<std::string> appfl_ignored(std::vector<std::string> server,
                                       std::vector<std::string> train,
                                       std::vector<std::string> compressor,
                                       std::vector<std::string> clients) {
  std::vector<std::string> keys;
  for (const auto& k : server)
    keys.push_back("server_configs." + k);
  for (const auto& k : train)
    keys.push_back("client_configs.train_configs." + k);
  for (const auto& k : compressor)
    keys.push_back("client_configs.comm_configs.compressor_configs." + k);
  for (const auto& k : clients)
    keys.push_back("client_configs." + k);
  return keys;
}

const std::vector<std::string> appfl_compressor_unused{
    "lossy_compressor", "lossless_compressor", "error_bounding_mode",
    "error_bound", "param_cutoff"};

} // namespace

TEST_CASE("APPFL's server_fedavg.yaml loads with one warning naming exactly "
          "the keys fedcaf ignores") {
  auto c =
      load_config_file(appfl_dir + "server_fedavg.yaml", config_role::server);
  REQUIRE(c);
  CHECK(
      c->ignored_keys ==
      appfl_ignored({"logging_output_dirname", "logging_output_filename"},
                    {"do_validation", "do_pre_validation", "metric_name",
                     "clip_grad", "clip_value", "clip_norm",
                     "train_data_shuffle", "val_data_shuffle", "loss_fn_name"},
                    appfl_compressor_unused, {}));
  auto warning = ignored_keys_warning(*c);
  CHECK(warning.rfind("warning: " + appfl_dir +
                          "server_fedavg.yaml: ignored "
                          "16 keys fedcaf does not use: "
                          "server_configs.logging_output_dirname, ",
                      0) == 0);
  CHECK(contains(warning, "compressor_configs.param_cutoff (--strict"));
  // What it says is read as fedcaf's keys: FedAvg over 2 clients, 100
  // steps of Adam at lr 0.001, batch 64, Opacus's DP-SGD, no compression.
  CHECK(c->server.aggregator == server_rule::fedavg);
  CHECK(c->server.num_clients == 2);
  CHECK(c->server.num_global_epochs == 10);
  CHECK(c->clients.train.mode == "step");
  CHECK(c->clients.train.num_local_steps == 100);
  CHECK(c->clients.train.optim.name == "Adam");
  CHECK(c->clients.train.optim.lr == doctest::Approx(0.001));
  CHECK(c->clients.train.train_batch_size == 64);
  CHECK(c->clients.train.dp.mode == dp_sgd_mode::fused);
  CHECK(c->clients.train.dp.noise_multiplier == 1.0);
  CHECK(c->clients.train.dp.max_grad_norm == 1.0);
  CHECK(c->clients.compression.method == compression_method::none);
  CHECK(c->server.comm.max_message_size == 1048576);
}

TEST_CASE("APPFL's server_fedadam.yaml loads with one warning naming exactly "
          "the keys fedcaf ignores") {
  auto c =
      load_config_file(appfl_dir + "server_fedadam.yaml", config_role::server);
  REQUIRE(c);
  CHECK(c->ignored_keys ==
        appfl_ignored({"logging_output_dirname", "logging_output_filename"},
                      {"use_dp", "do_validation", "do_pre_validation",
                       "metric_name", "epsilon", "clip_grad", "clip_value",
                       "clip_norm", "train_data_shuffle", "val_data_shuffle",
                       "loss_fn_name"},
                      appfl_compressor_unused, {"data_readiness_configs"}));
  CHECK(contains(ignored_keys_warning(*c), "ignored 19 keys"));
  CHECK(c->server.aggregator == server_rule::fedadam);
  CHECK(c->server.rule.server_learning_rate == doctest::Approx(0.1));
  CHECK(c->server.rule.server_adapt_param == doctest::Approx(1e-3));
  CHECK(c->server.rule.server_momentum_param_1 == doctest::Approx(0.9));
  CHECK(c->server.rule.server_momentum_param_2 == doctest::Approx(0.99));
  CHECK(c->clients.train.dp.mode == dp_sgd_mode::none);
}

TEST_CASE("APPFL's client configs load for fedcaf client and the Python "
          "client") {
  for (int i : {1, 2}) {
    auto file = appfl_dir + "client_" + std::to_string(i) + ".yaml";
    CAPTURE(file);
    auto c = load_config_file(file, config_role::client);
    REQUIRE(c);
    CHECK(c->client.client_id == "Client" + std::to_string(i)); // logging_id
    CHECK(c->client.data.num_clients == 2);
    CHECK(c->client.data.client_index == static_cast<uint32_t>(i - 1));
    CHECK(c->client.data.partition_strategy == "class_noniid");
    CHECK(c->ignored_keys ==
          std::vector<std::string>{
              "train_configs.logging_output_dirname",
              "train_configs.logging_output_filename",
              "data_configs.dataset_kwargs.visualization",
              "data_configs.dataset_kwargs.output_dirname",
              "data_configs.dataset_kwargs.output_filename"});
    // The Python client's code reads data_configs, if anything does.
    auto py = load_config_file(file, config_role::python_client);
    REQUIRE(py);
    CHECK(py->ignored_keys ==
          std::vector<std::string>{"train_configs.logging_output_dirname",
                                   "train_configs.logging_output_filename"});
  }
  // APPFL's Python dataset loader stays refused for fedcaf's client.
  auto py_data = load_config_file(
      appfl_dir + "client_1.yaml", config_role::client,
      {"data_configs.dataset_path=./resources/dataset/mnist_dataset.py"});
  CHECK(contains(message_of(py_data), "data_configs.dataset_path: names a "
                                      "Python file"));
  // client_id wins over logging_id, which then only names logs.
  auto both = load_config_file(appfl_dir + "client_1.yaml", config_role::client,
                               {"client_id=Site7"});
  REQUIRE(both);
  CHECK(both->client.client_id == "Site7");
  CHECK(both->ignored_keys.front() == "train_configs.logging_id");
}

TEST_CASE("a Python client's config needs no data_configs; fedcaf client's "
          "says what is missing") {
  std::string text = "client_id: Client1\n"
                     "comm_configs: {grpc_configs: {server_uri: "
                     "127.0.0.1:50051}}\n";
  auto py = load_config(text, "py.yaml", config_role::python_client);
  REQUIRE(py);
  CHECK(py->ignored_keys.empty());
  // Whatever its own code reads there is its own, the device too (its own
  // torch picks it, whatever LibTorch fedcaf was built with).
  CHECK(load_config(text + "data_configs: {dataset_name: get_cifar10, "
                           "dataset_kwargs: {shards: 8}}\n"
                           "train_configs: {device: 'cuda:1'}\n",
                    "py.yaml", config_role::python_client));
  auto msg = message_of(load_config(text, "c.yaml", config_role::client));
  CHECK(contains(msg, "c.yaml: data_configs.dataset_kwargs.num_clients: is "
                      "required"));
  CHECK(contains(msg, "a Python client (import fedcaf) brings its own data"));
  CHECK_FALSE(contains(msg, "client_id: must be below"));
}

TEST_CASE("APPFL's compressor_configs map to compression where they mean "
          "the same") {
  const std::string key = "client_configs.comm_configs.compressor_configs";
  auto fedavg = [&](std::vector<std::string> sets) {
    return load_config_file(appfl_dir + "server_fedavg.yaml",
                            config_role::server, sets);
  };
  auto on = [&](std::string lossy, std::string mode) {
    return std::vector<std::string>{key + ".enable_compression=true",
                                    key + ".lossy_compressor=" + lossy,
                                    key + ".error_bounding_mode=" + mode};
  };
  // An error-bounded lossy compressor with an absolute bound: zfp on
  // uploads, every value within error_bound.
  for (std::string lossy : {"ZFPCompressor", "SZ2Compressor", "SZ3"}) {
    CAPTURE(lossy);
    auto c = fedavg(on(lossy, "ABS"));
    REQUIRE(c);
    const auto& z = c->clients.compression;
    CHECK(z.method == compression_method::zfp);
    CHECK(z.up);
    CHECK_FALSE(z.down);
    CHECK(z.zfp_tolerance == doctest::Approx(1e-3));
    CHECK_FALSE(z.error_feedback);
    // Of the block only what has no counterpart is ignored.
    auto ignored = c->ignored_keys;
    ignored.erase(ignored.begin(), ignored.end() - 2);
    CHECK(ignored == std::vector<std::string>{key + ".lossless_compressor",
                                              key + ".param_cutoff"});
    CHECK(c->ignored_keys.size() == 13);
    // Clients receive fedcaf's key, read the same way.
    CHECK_FALSE(contains(c->client_configs_text, "compressor_configs"));
    auto sent = parse_client_configs(c->client_configs_text);
    REQUIRE(sent);
    CHECK(sent->compression.method == compression_method::zfp);
    CHECK(sent->compression.up);
    CHECK_FALSE(sent->compression.down);
    CHECK(sent->compression.zfp_tolerance == doctest::Approx(1e-3));
    CHECK_FALSE(sent->compression.error_feedback);
  }
  // A REL bound (times each tensor's range) has no counterpart: the whole
  // block is ignored, enable_compression with it, and nothing compressed.
  auto rel = fedavg(on("SZ2Compressor", "REL"));
  REQUIRE(rel);
  CHECK(rel->clients.compression.method == compression_method::none);
  CHECK(std::find(rel->ignored_keys.begin(), rel->ignored_keys.end(),
                  key + ".enable_compression") != rel->ignored_keys.end());
  // Off: only the keys used when on are ignored.
  auto off = fedavg({});
  REQUIRE(off);
  CHECK(std::find(off->ignored_keys.begin(), off->ignored_keys.end(),
                  key + ".enable_compression") == off->ignored_keys.end());
  CHECK(contains(message_of(fedavg(on("Blosc", "ABS"))),
                 key + ".lossy_compressor: must be one of SZ2Compressor"));
  CHECK(contains(message_of(fedavg(on("ZFP", "PW_REL"))),
                 key + ".error_bounding_mode: must be ABS or REL"));
  CHECK(contains(
      message_of(fedavg({"client_configs.comm_configs.compression={method: "
                         "int8}"})),
      key + ": give compression (fedcaf's) or compressor_configs"));
  // What compressed uploads cannot run with names the key the file gave.
  auto sets = on("ZFP", "ABS");
  sets.push_back("server_configs.memory_mode=window");
  CHECK(contains(message_of(fedavg(sets)),
                 key + ": compressed uploads (deltas) need memory_mode ram"));
}

TEST_CASE("APPFL's use_dp is DP-SGD with opacus and refused otherwise") {
  auto fedadam = [](std::vector<std::string> sets) {
    return load_config_file(appfl_dir + "server_fedadam.yaml",
                            config_role::server, sets);
  };
  const std::string train = "client_configs.train_configs.";
  auto opacus = fedadam({train + "use_dp=true", train + "dp_mechanism=opacus",
                         train + "dp_config={noise_multiplier: 0.8, "
                                 "max_grad_norm: 2}"});
  REQUIRE(opacus);
  CHECK(opacus->clients.train.dp.mode == dp_sgd_mode::fused);
  CHECK(opacus->clients.train.dp.noise_multiplier == doctest::Approx(0.8));
  CHECK(opacus->clients.train.dp.max_grad_norm == doctest::Approx(2));
  for (std::string mechanism : {"", "laplace", "gaussian"}) {
    CAPTURE(mechanism);
    std::vector<std::string> sets{train + "use_dp=true"};
    if (!mechanism.empty())
      sets.push_back(train + "dp_mechanism=" + mechanism);
    auto msg = message_of(fedadam(sets));
    CHECK(contains(msg, train + "use_dp: APPFL's '" +
                            (mechanism.empty() ? "laplace" : mechanism) +
                            "' mechanism perturbs the trained model"));
  }
  CHECK(contains(
      message_of(fedadam({train + "use_dp=true", train + "dp_mechanism=opacus",
                          train + "dp={mode: ghost}"})),
      "not both"));
}

TEST_CASE("a missing model or tensor file names the absolute path tried and "
          "the example that writes it") {
  namespace fs = std::filesystem;
  auto load = [](std::vector<std::string> sets) {
    return load_config(embedded_simulate_yaml(), "embedded",
                       config_role::simulate, sets);
  };
  // Relative paths are the working directory's.
  auto abs = [](const std::string& p) {
    return (fs::current_path() / p).lexically_normal().string();
  };
  auto ts =
      message_of(load({"client_configs.model_configs.name=torchscript",
                       "client_configs.model_configs.path=nowhere/cnn.pt"}));
  CHECK(contains(ts, "model_configs.path: '" + abs("nowhere/cnn.pt") +
                         "' is not a file (a relative path is read from the "
                         "working directory)"));
  CHECK(contains(ts, "export_torchscript.py -o " + abs("nowhere/cnn.pt")));
  CHECK(contains(ts, "--set client_configs.model_configs.path=FILE"));
  auto st = message_of(
      load({"client_configs.train_configs.trainer=python",
            "client_configs.model_configs.name=safetensors",
            "client_configs.model_configs.path=/nowhere/m.safetensors"}));
  CHECK(contains(st, "'/nowhere/m.safetensors' is not a file; write"));
  CHECK(contains(st, "fashion_mnist.py --init /nowhere/m.safetensors"));
  CHECK(contains(st, "causal_lm_bf16.py --init /nowhere/m.safetensors"));
  std::string kw = "data_configs.dataset_kwargs.";
  auto tensors = message_of(load({"data_configs.dataset_name=tensors",
                                  kw + "train_features=/x/train_features.npy",
                                  kw + "train_labels=/x/labels.npy"}));
  CHECK(contains(tensors, "train_features: '/x/train_features.npy' is not a "
                          "file; write it with"));
  CHECK(contains(tensors, "export_tensors.py -o /x'"));
  // No example writes a file of another name.
  CHECK(contains(tensors, "train_labels: '/x/labels.npy' is not a file; "
                          "name another with --set " +
                              kw + "train_labels=FILE"));
}

TEST_CASE("a Python client takes the server's client_configs without the "
          "server's model file") {
  auto python = parse_client_configs(
      "train_configs: {trainer: python}\n"
      "model_configs: {name: safetensors, path: /server/only.safetensors}\n");
  REQUIRE(python);
  CHECK(python->model.path == "/server/only.safetensors");
  // A dummy trainer lays the model out from the file: it must be here.
  auto dummy = parse_client_configs(
      "train_configs: {trainer: dummy}\n"
      "model_configs: {name: safetensors, path: /server/only.safetensors}\n");
  REQUIRE_FALSE(dummy);
  CHECK(contains(dummy.err().message, "'/server/only.safetensors' is not"));
}

TEST_CASE("a profile matrix's relative base is looked for beside it, then in "
          "the working directory; --set overrides its keys") {
  namespace fs = std::filesystem;
  auto dir = fs::temp_directory_path() /
             ("fedcaf_matrix_test_" + std::to_string(::getpid()));
  fs::create_directories(dir / "matrices");
  std::ofstream{dir / "matrices" / "base.yaml"} << "server_configs: {}\n";
  std::ofstream{dir / "cwd_base.yaml"} << "server_configs: {}\n";
  auto matrix = (dir / "matrices" / "m.yaml").string();
  std::ofstream{matrix} << "base: base.yaml\nsizes_mib: [8]\n";
  auto beside = load_profile_matrix(matrix);
  REQUIRE(beside);
  CHECK(beside->base == (dir / "matrices" / "base.yaml").string());
  auto set = load_profile_matrix(matrix, {"sizes_mib=[1, 2]", "rounds=1"});
  REQUIRE(set);
  CHECK(set->sizes_mib == std::vector<uint64_t>{1, 2});
  CHECK(set->rounds == 1);
  auto bad = load_profile_matrix(matrix, {"rounds=0"});
  REQUIRE_FALSE(bad);
  CHECK(contains(bad.err().message, "--set rounds: must be"));
  // Not beside the matrix: the working directory's, as before.
  auto cwd = fs::current_path();
  fs::current_path(dir);
  std::ofstream{matrix} << "base: cwd_base.yaml\n";
  auto fallback = load_profile_matrix(matrix);
  std::ofstream{matrix} << "base: nowhere.yaml\n";
  auto missing = load_profile_matrix(matrix);
  fs::current_path(cwd);
  REQUIRE(fallback);
  CHECK(fallback->base == "cwd_base.yaml");
  REQUIRE_FALSE(missing);
  CHECK(contains(missing.err().message,
                 "base: 'nowhere.yaml' is not a file (a relative base is "
                 "looked for beside the matrix file, then in the working "
                 "directory)"));
  fs::remove_all(dir);
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
