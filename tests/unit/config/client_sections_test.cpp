#include "fedcaf/config/client_sections.hpp"

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

TEST_CASE("a missing dataset directory is named") {
  auto msg = message_of(
      load_config(embedded_simulate_yaml(), "sim.yaml", config_role::simulate,
                  {"data_configs.dataset_path=/nonexistent"}));
  CHECK(contains(msg, "data_configs.dataset_path"));
  CHECK(contains(msg, "/nonexistent"));
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

TEST_CASE("a missing model or tensor file: one short line naming the key, "
          "the absolute path tried and what writes such a file") {
  namespace fs = std::filesystem;
  auto load = [](std::vector<std::string> sets) {
    return load_config(embedded_simulate_yaml(), "embedded",
                       config_role::simulate, sets);
  };
  // A relative path given with --set is the working directory's.
  auto abs = [](const std::string& p) {
    return (fs::current_path() / p).lexically_normal().string();
  };
  auto ts =
      message_of(load({"client_configs.model_configs.name=torchscript",
                       "client_configs.model_configs.path=nowhere/cnn.pt"}));
  CHECK(contains(ts, "--set client_configs.model_configs.path: '" +
                         abs("nowhere/cnn.pt") + "' is not a file ("));
  CHECK(contains(ts, "export_torchscript.py -o FILE writes one)"));
  auto line = ts.substr(ts.find("--set client_configs.model_configs.path"));
  line = line.substr(0, line.find('\n'));
  CHECK(line.size() < 150 + abs("nowhere/cnn.pt").size());
  auto st = message_of(
      load({"client_configs.train_configs.trainer=python",
            "client_configs.model_configs.name=safetensors",
            "client_configs.model_configs.path=/nowhere/m.safetensors"}));
  CHECK(contains(st, "'/nowhere/m.safetensors' is not a file "
                     "(fedcaf.save_safetensors(model.state_dict(), FILE) "
                     "writes one, as python3 "));
  CHECK(contains(st, "fashion_mnist.py --init FILE does)"));
  std::string kw = "data_configs.dataset_kwargs.";
  auto tensors = message_of(load({"data_configs.dataset_name=tensors",
                                  kw + "train_features=/x/train_features.npy",
                                  kw + "train_labels=/x/labels.npy"}));
  CHECK(contains(tensors, "train_features: '/x/train_features.npy' is not a "
                          "file (python3 "));
  CHECK(contains(tensors, "export_tensors.py -o DIR writes Fashion-MNIST"));
  // No example writes a file of another name.
  auto labels = tensors.find("train_labels: '/x/labels.npy' is not a file");
  REQUIRE(labels != std::string::npos);
  auto rest = tensors.substr(labels);
  CHECK(rest.substr(0, rest.find('\n')) ==
        "train_labels: '/x/labels.npy' is not a file");
}

TEST_CASE("a config file's relative paths are read from its own folder, "
          "--set's from the working directory") {
  namespace fs = std::filesystem;
  auto dir = fs::temp_directory_path() /
             ("fedcaf-paths-" + std::to_string(::getpid()));
  fs::create_directories(dir / "out");
  auto cfg = (dir / "server.yaml").string();
  std::ofstream{cfg} << "server_configs:\n"
                        "  storage_dir: .\n"
                        "  save_global_model: out/global-{round}.safetensors\n"
                        "  checkpoint: {dir: ckpt}\n";
  // Read from elsewhere: the working directory is not the config's folder.
  REQUIRE(fs::current_path() != dir);
  auto c = load_config_file(cfg, config_role::server, {});
  REQUIRE(c);
  CHECK(c->server.storage_dir == dir.string());
  CHECK(c->server.checkpoint.dir == (dir / "ckpt").string());
  CHECK(c->server.save_global_model ==
        (dir / "out" / "global-{round}.safetensors").string());
  auto sets =
      load_config_file(cfg, config_role::server,
                       {"server_configs.save_global_model=g.safetensors"});
  REQUIRE(sets);
  CHECK(sets->server.save_global_model == "g.safetensors");
  // A model file beside the config, missing: the path tried is there.
  std::ofstream{cfg} << "client_configs:\n"
                        "  train_configs: {trainer: python}\n"
                        "  model_configs: {name: safetensors, path: "
                        "models/init.safetensors}\n";
  auto missing = message_of(load_config_file(cfg, config_role::server, {}));
  CHECK(contains(missing, cfg + ": client_configs.model_configs.path: '" +
                              (dir / "models" / "init.safetensors").string() +
                              "' is not a file"));
  fs::remove_all(dir);
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
