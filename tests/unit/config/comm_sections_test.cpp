#include "fedcaf/config/comm_sections.hpp"

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
