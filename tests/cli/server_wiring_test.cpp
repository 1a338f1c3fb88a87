#include "cli/server_wiring.hpp"

#include <string>
#include <vector>

#include <doctest/doctest.h>

using namespace fedcaf;
using namespace fedcaf::cli;
using namespace std::chrono_literals;

namespace {

/// A server's file: 4 clients, tokens for two of them, a synthetic model
/// and the dummy trainer (nothing read from disk).
constexpr const char* server_yaml = R"(
server_configs:
  num_clients: 4
  num_global_epochs: 5
  scheduler_kwargs:
    registration_deadline_s: 30
    clients_per_round: 2
    min_clients: 2
    seed: 7
  comm_configs:
    grpc_configs:
      server_uri: 127.0.0.1:50051
      use_authenticator: true
      authenticator_args:
        tokens: {Client1: secret-1, Client2: secret-2}
    stream_configs:
      chunk_bytes: 65536
      window: 3
      idle_timeout_s: 20
      reconnect_grace_s: 10
      min_rate_bytes_per_s: 1000
      rate_window_s: 100
client_configs:
  train_configs:
    trainer: dummy
  model_configs:
    name: synthetic
    num_tensors: 4
    total_bytes: 4096
)";

config loaded(const char* yaml, const std::vector<std::string>& sets = {}) {
  auto c = load_config(yaml, "server.yaml", config_role::server, sets);
  REQUIRE_MESSAGE(c, c.err().message);
  return *c;
}

server_side_options options_of(const config& cfg, uint64_t chunk_bytes,
                               bool remote) {
  auto plan = plan_of(cfg);
  REQUIRE_MESSAGE(plan, plan.err().message);
  return options_from(cfg, *plan, chunk_bytes, remote);
}

/// What a parent's Welcome tells a relay.
msg::client_terms parent_terms() {
  msg::client_terms t;
  t.idle_timeout_ms = 8000;
  t.reconnect_grace_ms = 4000;
  t.heartbeat_ms = 1234;
  return t;
}

} // namespace

TEST_CASE("server wiring: the rounds, the sample and the deadlines come from "
          "server_configs") {
  auto cfg = loaded(server_yaml);
  auto so = options_of(cfg, 65536, true);
  CHECK(so.scheduler.num_clients == 4);
  CHECK(so.scheduler.num_rounds == 5);
  CHECK(so.scheduler.clients_per_round == 2);
  CHECK(so.scheduler.min_clients == 2);
  CHECK(so.scheduler.sampling_seed == 7);
  CHECK(so.scheduler.registration_deadline == 30s);
  CHECK(so.scheduler.first_round == 1); // not resumed: the caller's
  CHECK(so.server.num_clients == 4);
  CHECK(so.server.num_rounds == 5);
  CHECK(so.server.dp_sample_rate == doctest::Approx(0.5));
  CHECK(so.server.chunk_bytes == 65536);
  CHECK(so.server.window == 3);
  // Silent while connected, or lost for its reconnect grace: rejected.
  CHECK(so.idle_timeout == 30s);
  CHECK(so.server.reconnect_grace == 10s);
  CHECK(so.server.fetch_silence == 20s);
  CHECK(so.server.evaluation_timeout == 20s);
  CHECK(so.server.terms.idle_timeout_ms == 20000);
  CHECK(so.server.terms.reconnect_grace_ms == 10000);
  CHECK(so.server.client_configs_yaml == client_configs_yaml(cfg));
  CHECK(so.server.config_yaml == cfg.effective_yaml);
  CHECK_FALSE(so.server.relay);
  CHECK_FALSE(so.plan.partial_sums);
  // What the process adds is the caller's.
  CHECK(so.server.report_path.empty());
  CHECK_FALSE(so.server.metrics);
  CHECK_FALSE(so.resume);
}

TEST_CASE("server wiring: tokens and expected clients only when clients come "
          "over the network") {
  auto cfg = loaded(server_yaml);
  auto remote = options_of(cfg, 65536, true);
  REQUIRE(remote.server.tokens.size() == 2);
  CHECK(remote.scheduler.expected_clients ==
        std::vector<std::string>{"Client1", "Client2"});
  CHECK_FALSE(remote.server.require_certificate_name); // no use_ssl

  auto local = options_of(cfg, 65536, false);
  CHECK(local.server.tokens.empty());
  CHECK(local.scheduler.expected_clients.empty());
  CHECK_FALSE(local.server.require_certificate_name);

  auto open = loaded(server_yaml, {"server_configs.comm_configs.grpc_configs."
                                   "use_authenticator=false"});
  auto any_id = options_of(open, 65536, true);
  CHECK(any_id.server.tokens.empty());
  CHECK(any_id.scheduler.expected_clients.empty());
}

TEST_CASE("server wiring: the rate window is at least two chunks at the "
          "minimum rate") {
  auto cfg = loaded(server_yaml);
  CHECK(options_of(cfg, 65536, true).rate_window == 131072ms); // 2 x 65.5 s
  CHECK(options_of(cfg, 1000, true).rate_window == 100s);      // rate_window_s
  CHECK(options_of(cfg, 65536, true).min_rate_bytes_per_s == 1000);
}

TEST_CASE("server wiring: a disk-mode server keeps its model in a file of "
          "storage_dir and averages in place") {
  auto cfg = loaded(server_yaml,
                    {"server_configs.memory_mode=disk",
                     "server_configs.storage_dir=/tmp",
                     "server_configs.scheduler_kwargs.clients_per_round=4",
                     "server_configs.scheduler_kwargs.min_clients=4"});
  auto so = options_of(cfg, 65536, false);
  CHECK(so.plan.memory_mode == memory_mode::disk);
  CHECK(so.plan.accumulator == accumulator_kind::open_positions);
  CHECK(so.plan.in_place);
  CHECK(so.plan.storage_dir == "/tmp");
  CHECK(so.plan.relay_cache_chunks == 0);
  CHECK(global_model_file(so.plan, 7) == "/tmp/fedcaf-global-7.bin");

  auto ram = options_of(loaded(server_yaml), 65536, false);
  CHECK(ram.plan.storage_dir.empty());
  CHECK(global_model_file(ram.plan, 7).empty());
}

TEST_CASE("server wiring: a relay's children's side runs its parent's rounds "
          "on its parent's terms") {
  auto cfg = loaded(server_yaml);
  auto parent = loaded(server_yaml,
                       {"client_configs.comm_configs.compression.method=fp16",
                        "client_configs.comm_configs.compression.direction="
                        "down"});
  auto own = options_of(cfg, 65536, true);
  auto relay = relay_children_options(own, parent_terms(),
                                      client_configs_yaml(parent), cfg.source);
  REQUIRE_MESSAGE(relay, relay.err().message);
  CHECK(relay->scheduler.num_rounds == relay_rounds);
  CHECK(relay->plan.partial_sums);
  CHECK(relay->server.relay);
  CHECK(relay->server.terms == parent_terms());
  CHECK(relay->server.client_configs_yaml == client_configs_yaml(parent));
  CHECK(relay->server.compression.method == compression_method::fp16);
  CHECK(relay->server.compression.down);
  CHECK_FALSE(relay->server.compression.up);
  CHECK_FALSE(relay->server.federated_evaluation);
  CHECK(relay->idle_timeout == own.idle_timeout); // ram: its sum goes up whole
  CHECK(relay->server.tokens == own.server.tokens); // its own children's
}

TEST_CASE("server wiring: a streaming relay cuts a silent child within half "
          "its parent's patience") {
  auto cfg = loaded(server_yaml, {"server_configs.memory_mode=window",
                                  "server_configs.scheduler_kwargs."
                                  "clients_per_round=4",
                                  "server_configs.scheduler_kwargs."
                                  "min_clients=4"});
  auto own = options_of(cfg, 65536, false);
  CHECK(own.plan.relay_cache_chunks == 3); // the window
  CHECK(own.idle_timeout == 30s);
  auto relay = relay_children_options(own, parent_terms(),
                                      client_configs_yaml(cfg), cfg.source);
  REQUIRE_MESSAGE(relay, relay.err().message);
  CHECK(relay->plan.streams_sums());
  CHECK(relay->idle_timeout == 6s); // (8 s + 4 s) / 2

  auto patient = parent_terms();
  patient.idle_timeout_ms = 60000; // half of it is above the relay's own
  auto kept = relay_children_options(own, patient, client_configs_yaml(cfg),
                                     cfg.source);
  REQUIRE(kept);
  CHECK(kept->idle_timeout == 30s);
}

TEST_CASE("server wiring: a relay refuses compressed uploads it cannot "
          "decode, and a parent's client_configs it cannot read") {
  auto window = loaded(server_yaml, {"server_configs.memory_mode=window",
                                     "server_configs.scheduler_kwargs."
                                     "clients_per_round=4",
                                     "server_configs.scheduler_kwargs."
                                     "min_clients=4"});
  auto parent = loaded(server_yaml,
                       {"client_configs.comm_configs.compression.method=int8"});
  auto refused =
      relay_children_options(options_of(window, 65536, true), parent_terms(),
                             client_configs_yaml(parent), window.source);
  REQUIRE_FALSE(refused);
  CHECK(refused.err().code == errc::bad_config);
  CHECK(refused.err().message ==
        "server.yaml: server_configs.memory_mode: the parent's clients "
        "compress their uploads (deltas), which a relay decodes in "
        "memory_mode ram only");

  auto ram = loaded(server_yaml);
  auto decoded =
      relay_children_options(options_of(ram, 65536, true), parent_terms(),
                             client_configs_yaml(parent), ram.source);
  REQUIRE_MESSAGE(decoded, decoded.err().message);
  CHECK(decoded->server.compression.up);

  auto garbled = relay_children_options(
      options_of(ram, 65536, true), parent_terms(), "[not: a map", ram.source);
  REQUIRE_FALSE(garbled);
  CHECK(garbled.err().message.starts_with("the parent's client_configs: "));
}
