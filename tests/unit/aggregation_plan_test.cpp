#include "fedcaf/aggregation_plan.hpp"

#include <algorithm>
#include <thread>

#include <doctest/doctest.h>

using namespace fedcaf;
using namespace std::chrono_literals;

namespace {

server_config server(const char* aggregator = "FedAvgAggregator",
                     memory_mode mode = memory_mode::ram) {
  server_config s;
  s.num_clients = 5;
  s.aggregator = rule_of(aggregator);
  s.memory_mode = mode;
  s.storage_dir = "/var/tmp";
  return s;
}

aggregation_plan plan(const server_config& s) {
  auto p = plan_aggregation(s);
  REQUIRE_MESSAGE(p, p.err().message);
  return *p;
}

} // namespace

TEST_CASE("aggregation plan: every rule's name parses to its rule and back") {
  for (auto rule :
       {server_rule::fedavg, server_rule::fedavgm, server_rule::fedadagrad,
        server_rule::fedadam, server_rule::fedyogi, server_rule::fedasync,
        server_rule::fedbuff, server_rule::trimmed_mean, server_rule::median}) {
    auto name = aggregator_name(rule);
    CAPTURE(name);
    CHECK(parse_server_rule(name) == rule);
    CHECK(rule_of(name) == rule);
  }
  CHECK_FALSE(parse_server_rule("fedavg"));
  CHECK(rule_of("NoSuchAggregator") == server_rule::fedavg);
}

TEST_CASE("aggregation plan: the memory mode decides the accumulator, where "
          "it averages and where the model lives") {
  auto ram = plan(server());
  CHECK(ram.accumulator == accumulator_kind::model_sum);
  CHECK_FALSE(ram.in_place);
  CHECK(ram.position_contributors == 0);
  CHECK(ram.storage_dir.empty());
  CHECK(ram.max_contributors == 5);

  auto window = plan(server("FedAvgAggregator", memory_mode::window));
  CHECK(window.accumulator == accumulator_kind::open_positions);
  CHECK(window.in_place);
  CHECK(window.position_contributors == 5); // every client, sync rounds
  CHECK(window.storage_dir.empty());

  auto disk = plan(server("FedAvgAggregator", memory_mode::disk));
  CHECK(disk.accumulator == accumulator_kind::open_positions);
  CHECK(disk.in_place);
  CHECK(disk.storage_dir == "/var/tmp");
  CHECK(global_model_file(disk, 42) == "/var/tmp/fedcaf-global-42.bin");
  CHECK(global_model_file(ram, 42).empty()); // the model stays in memory
  CHECK(global_model_file(window, 42).empty());
}

TEST_CASE("aggregation plan: a relay in window mode holds its parent's model "
          "position by position, with a cache of `window` chunks") {
  auto s = server("FedAvgAggregator", memory_mode::window);
  s.comm.stream.window = 6;
  CHECK(plan(s).relay_cache_chunks == 6);
  s.memory_mode = memory_mode::ram; // the whole model
  CHECK(plan(s).relay_cache_chunks == 0);
  s.memory_mode = memory_mode::disk; // the whole model, in files
  auto disk = plan(s);
  CHECK(disk.relay_cache_chunks == 0);
  CHECK(disk.storage_dir == "/var/tmp");
}

TEST_CASE("aggregation plan: robust rules keep every value of the round's "
          "sample at an open position, in the next model's memory in ram "
          "mode") {
  auto s = server("TrimmedMeanAggregator");
  s.rule.trim_ratio = 0.3;
  auto trimmed = plan(s);
  CHECK(trimmed.accumulator == accumulator_kind::open_positions);
  CHECK_FALSE(trimmed.in_place);
  CHECK(trimmed.position_contributors == 5);
  CHECK(trimmed.robust.rule == position_rule::trimmed_mean);
  CHECK(trimmed.robust.trim_ratio == 0.3);
  CHECK_FALSE(trimmed.server_optimizer);

  s = server("MedianAggregator");
  s.clients_per_round = 3;
  auto median = plan(s);
  CHECK(median.robust.rule == position_rule::median);
  CHECK(median.position_contributors == 3); // the sample, not every client

  s.memory_mode = memory_mode::window; // in place: every client
  CHECK(plan(s).position_contributors == 5);

  CHECK_FALSE(plan(server()).robust.robust());
}

TEST_CASE("aggregation plan: a server optimizer runs for the adaptive and "
          "momentum rules and for DP-FedAvg's noise, not for plain FedAvg") {
  CHECK_FALSE(plan(server()).server_optimizer);
  for (auto name :
       {"FedAvgMAggregator", "FedAdamAggregator", "FedYogiAggregator",
        "FedAdagradAggregator", "FedAsyncAggregator", "FedBuffAggregator"})
    CHECK_MESSAGE(plan(server(name)).server_optimizer, name);
  auto noisy = server();
  noisy.rule.dp_noise_multiplier = 1.1;
  CHECK(plan(noisy).server_optimizer);
  CHECK(plan(server("FedBuffAggregator")).async);
  CHECK_FALSE(plan(server("FedAdamAggregator")).async);
}

TEST_CASE("aggregation plan: the round deadline bounds the offers, or under "
          "secure aggregation the keys phase") {
  auto s = server();
  s.round_deadline_s = 2.5;
  auto plain = plan(s);
  CHECK(plain.scheduler_deadline == 2500ms);
  CHECK_FALSE(plain.secure);

  s.secure_aggregation.enabled = true;
  auto secure = plan(s);
  CHECK(secure.secure);
  CHECK(secure.scheduler_deadline == 0ms); // nobody offers before the keys
  CHECK(secure.secagg_keys_deadline == 2500ms);
}

TEST_CASE("aggregation plan: the config's words become enums once") {
  auto s = server();
  auto defaults = plan(s);
  CHECK(defaults.weights == client_weighting::equal);
  CHECK(defaults.on_deadline == deadline_action::fail);
  CHECK(defaults.partial == partial_updates::discard);
  s.rule.client_weights_mode = client_weighting::sample_size;
  s.on_deadline = deadline_action::wait;
  s.rule.partial_updates = partial_updates::keep;
  auto chosen = plan(s);
  CHECK(chosen.weights == client_weighting::sample_size);
  CHECK(chosen.on_deadline == deadline_action::wait);
  CHECK(chosen.partial == partial_updates::keep);
}

TEST_CASE("aggregation plan: combinations that cannot run are refused with "
          "the reason") {
  auto refused = [](const server_config& s, const char* words) {
    auto p = plan_aggregation(s);
    REQUIRE_FALSE(p);
    CHECK(p.err().code == errc::bad_config);
    CHECK_MESSAGE(p.err().message.find(words) != std::string::npos,
                  p.err().message);
  };
  refused(server("FedAsyncAggregator", memory_mode::window), "ram mode only");
  auto s = server("MedianAggregator");
  s.secure_aggregation.enabled = true;
  refused(s, "unmasked");
  s = server("FedAdamAggregator", memory_mode::disk);
  s.secure_aggregation.enabled = true;
  refused(s, "FedAvg only");
  s = server();
  s.num_clients = 0;
  refused(s, "at least 1");
}

TEST_CASE("aggregation plan: fold_threads as given, else a quarter of the "
          "host's cores and at least the aggregator's own") {
  auto s = server();
  auto cores = std::thread::hardware_concurrency();
  CHECK(plan(s).fold_threads == std::max(1u, std::min(16u, cores / 4)));
  for (uint32_t n : {1u, 3u, 64u}) {
    s.fold_threads = n;
    CHECK(plan(s).fold_threads == n);
  }
}
