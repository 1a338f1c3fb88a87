#include "fedcaf/config/yaml_safety.hpp"

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

TEST_CASE("malformed YAML is an error, not an exception") {
  auto msg = message_of(load_config("server_configs: [unclosed", "bad.yaml",
                                    config_role::server));
  CHECK(contains(msg, "bad.yaml"));
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

TEST_CASE("parse_yaml refuses what load_config refuses, as an error naming "
          "the source") {
  auto ok = parse_yaml("a: 1\nb: [x, y]\n", "ok.yaml");
  REQUIRE(ok);
  CHECK((*ok)["a"].as<int>() == 1);
  CHECK((*ok)["b"].size() == 2);
  auto bad = parse_yaml("a: [unclosed", "bad.yaml");
  REQUIRE_FALSE(bad);
  CHECK(bad.err().code == errc::bad_config);
  CHECK(bad.err().message.rfind("bad.yaml: ", 0) == 0);
  auto laughs = parse_yaml(billion_laughs("k"), "laughs.yaml");
  REQUIRE_FALSE(laughs);
  CHECK(laughs.err().code == errc::bad_config);
  CHECK(laughs.err().message.rfind("laughs.yaml: ", 0) == 0);
  CHECK(contains(laughs.err().message, "anchors and aliases"));
  CHECK_FALSE(parse_yaml("a: &x 1\n", "anchor.yaml"));
  CHECK_FALSE(parse_yaml("a: 1\nb: {<<: *x}\n", "merge.yaml"));
  auto huge = parse_yaml("# " + std::string(17 << 20, 'x') + "\n", "huge.yaml");
  REQUIRE_FALSE(huge);
  CHECK(huge.err().message.rfind("huge.yaml: ", 0) == 0);
  CHECK(contains(huge.err().message, "larger than 16777216 bytes"));
}

TEST_CASE("read_yaml_file names the file it cannot read or that is too "
          "large") {
  auto missing = read_yaml_file("/nonexistent/relay.yaml", "relay config");
  REQUIRE_FALSE(missing);
  CHECK(missing.err().code == errc::bad_config);
  CHECK(missing.err().message ==
        "/nonexistent/relay.yaml: cannot open the relay config");
  auto path = temp_file("big.yaml", "# " + std::string(17 << 20, 'x') + "\n");
  auto big = read_yaml_file(path, "relay config");
  REQUIRE_FALSE(big);
  CHECK(big.err().message ==
        path + ": the relay config is larger than 16777216 bytes");
  std::filesystem::remove(path);
  auto small = temp_file("small.yaml", "a: 1\n");
  auto text = read_yaml_file(small, "relay config");
  REQUIRE(text);
  CHECK(*text == "a: 1\n");
  std::filesystem::remove(small);
}
