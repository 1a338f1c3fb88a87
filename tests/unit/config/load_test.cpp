#include "fedcaf/config/load.hpp"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include <doctest/doctest.h>

#include "tests/unit/config/config_test_util.hpp"

using namespace fedcaf;
using namespace fedcaf::config_test;

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

TEST_CASE("min_clients: a round goes on without one of its clients unless "
          "the config says otherwise, and every shipped server config says "
          "it") {
  // The embedded config with its min_clients left out.
  std::string yaml{embedded_simulate_yaml()};
  auto at = yaml.find("    min_clients: 1\n");
  REQUIRE(at != std::string::npos);
  yaml.erase(at, 19);
  auto per_round = [&](uint32_t n, uint32_t sampled) {
    auto n_text = std::to_string(n);
    auto c = load_config(yaml, "sim.yaml", config_role::simulate,
                         {"server_configs.num_clients=" + n_text,
                          "data_configs.dataset_kwargs.num_clients=" + n_text,
                          "server_configs.scheduler_kwargs.clients_per_round=" +
                              std::to_string(sampled)});
    if (!c)
      FAIL(c.err().message);
    return c->server.min_clients;
  };
  CHECK(per_round(1, 1) == 1);
  CHECK(per_round(2, 2) == 1);
  CHECK(per_round(3, 3) == 2);
  CHECK(per_round(10, 10) == 9);
  CHECK(per_round(200, 100) == 90);
  CHECK(per_round(1000, 1000) == 900);
  std::string dir = FEDCAF_SOURCE_DIR "/configs/";
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    std::ifstream in{e.path()};
    std::string text{std::istreambuf_iterator<char>{in}, {}};
    if (text.find("scheduler_kwargs:") == std::string::npos)
      continue;
    CAPTURE(e.path().string());
    CHECK(text.find("min_clients:") != std::string::npos);
  }
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

namespace {

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

TEST_CASE("a Python client's config needs no data_configs, fedcaf client's "
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
