// The live view's state: each client's phase and progress follow the
// server's protocol events; only registered ids enter, and at most
// num_clients + 64 of them; the round under way and the rounds completed
// agree; /metrics has each family once, with the figures an operator
// watches; any text survives the Prometheus labels and the JSON.

#include <doctest/doctest.h>

#include <algorithm>
#include <string>

#include "fedcaf/live_status.hpp"

using namespace fedcaf;

namespace {

live_run run_of(uint32_t clients) {
  live_run r;
  r.aggregator = "FedAvgAggregator";
  r.scheduler = "SyncScheduler";
  r.num_rounds = 3;
  r.num_clients = clients;
  return r;
}

/// Client `id` in `s`; REQUIRES: shown.
live_client client(const live_snapshot& s, const std::string& id) {
  auto it = std::find_if(s.clients.begin(), s.clients.end(),
                         [&id](const auto& c) { return c.first == id; });
  REQUIRE(it != s.clients.end());
  return it->second;
}

client_phase phase_of(live_status& l, const std::string& id) {
  return client(l.snapshot(), id).phase;
}

round_record record(uint32_t round) {
  round_record r;
  r.round = round;
  r.test_accuracy = 0.5 + round / 10.0;
  r.test_loss = 1.0 / round;
  r.train_loss = 0.25;
  r.wall_seconds = 2.5;
  return r;
}

} // namespace

TEST_CASE("live status: a client's phase follows the protocol events, "
          "with bytes done of the model's") {
  live_status l;
  l.set_run(run_of(2));
  l.set_model(1000, 300, 4); // chunks of 300, 300, 300, 100 bytes
  l.client_event("A", "registered", "10.0.0.1:5000");
  l.round_started(1, false);
  CHECK(phase_of(l, "A") == client_phase::waiting);
  l.served("A", 150, 300, false); // compressed: 150 bytes for 300
  auto a = client(l.snapshot(), "A");
  CHECK(a.phase == client_phase::downloading);
  CHECK(a.down_bytes == 300);
  CHECK(a.down_wire_bytes == 150);
  l.served("A", 150, 300, false);
  l.served("A", 150, 300, false);
  l.served("A", 50, 100, true);
  a = client(l.snapshot(), "A");
  CHECK(a.phase == client_phase::training);
  CHECK(a.down_bytes == 1000);
  l.received("A", 388);
  auto s = l.snapshot();
  CHECK(client(s, "A").phase == client_phase::uploading);
  CHECK(s.up_bytes(client(s, "A")) == 300);
  l.upload_ended("A"); // an end before every chunk: not done
  CHECK(phase_of(l, "A") == client_phase::uploading);
  for (int i = 0; i < 3; ++i)
    l.received("A", 388);
  l.upload_ended("A");
  s = l.snapshot();
  a = client(s, "A");
  CHECK(a.phase == client_phase::done);
  CHECK(s.up_bytes(a) == 1000);
  CHECK(a.up_wire_bytes == 4 * 388);
  // Entered in order, each once.
  auto at = [&a](client_phase p) {
    return a.entered_s[static_cast<size_t>(p)];
  };
  CHECK(at(client_phase::waiting) == 0);
  CHECK(at(client_phase::downloading) >= 0);
  CHECK(at(client_phase::training) >= at(client_phase::downloading));
  CHECK(at(client_phase::uploading) >= at(client_phase::training));
  CHECK(at(client_phase::done) >= at(client_phase::uploading));
  CHECK(at(client_phase::evaluating) < 0);
  CHECK(at(client_phase::rejected) < 0);
  // The next round starts from zero; its clients evaluate first.
  l.round_started(2, true);
  a = client(l.snapshot(), "A");
  CHECK(a.phase == client_phase::waiting);
  CHECK(a.down_bytes == 0);
  CHECK(a.up_chunks == 0);
  CHECK(a.down_wire_total == 4 * 150 - 100);
  for (int i = 0; i < 4; ++i)
    l.served("A", 300, 300, i == 3);
  CHECK(phase_of(l, "A") == client_phase::evaluating);
  l.evaluated("A");
  CHECK(phase_of(l, "A") == client_phase::training);
  l.evaluated("A"); // a late evaluation of the model before: no change
  CHECK(phase_of(l, "A") == client_phase::training);
  l.received("A", 388);
  l.upload_again("A"); // another client's update taken out: send again
  a = client(l.snapshot(), "A");
  CHECK(a.phase == client_phase::training);
  CHECK(a.up_chunks == 0);
  l.rejected("A");
  CHECK(phase_of(l, "A") == client_phase::rejected);
  l.received("A", 388); // a refused update's chunk in flight
  CHECK(phase_of(l, "A") == client_phase::rejected);
  // The final evaluation: downloaded, evaluated, done.
  l.final_evaluation_started();
  for (int i = 0; i < 4; ++i)
    l.served("A", 300, 300, i == 3);
  CHECK(phase_of(l, "A") == client_phase::evaluating);
  l.evaluated("A");
  CHECK(phase_of(l, "A") == client_phase::done);
  CHECK(l.snapshot().final_evaluation);
}

TEST_CASE("live status: AsyncScheduler tasks restart one client's counts") {
  live_status l;
  auto r = run_of(2);
  r.async = true;
  l.set_run(r);
  l.set_model(100, 100, 1);
  l.client_event("A", "registered", "");
  l.client_event("B", "registered", "");
  l.task_started("A", false);
  l.task_started("B", false);
  CHECK(l.snapshot().round == 1);
  l.served("A", 100, 100, true);
  l.served("B", 100, 100, true);
  l.task_started("B", false);
  auto s = l.snapshot();
  CHECK(client(s, "A").phase == client_phase::training);
  CHECK(client(s, "B").phase == client_phase::waiting);
  CHECK(client(s, "B").down_bytes == 0);
  l.round_finished(record(1));
  s = l.snapshot();
  CHECK(s.round == 2); // the step under way follows the last
  CHECK(s.completed() == 1);
}

TEST_CASE("live status: only a registration adds a client, at most "
          "num_clients + 64, a dropped one gives way") {
  live_status l;
  l.set_run(run_of(2));
  l.set_model(100, 100, 1);
  l.served("X", 100, 100, true); // never registered: not shown
  l.received("X", 100);
  l.client_event("X", "lost", "why");
  l.evaluated("X");
  CHECK(l.snapshot().clients.empty());
  for (int i = 0; i < 66; ++i)
    l.client_event("c" + std::to_string(i), "registered", "a");
  l.client_event("late", "registered", "a");
  auto s = l.snapshot();
  CHECK(s.clients.size() == 66);
  CHECK(s.clients_not_shown == 1);
  l.client_event("c7", "dropped", "");
  l.client_event("later", "registered", "a");
  s = l.snapshot();
  CHECK(s.clients.size() == 66);
  CHECK(std::none_of(s.clients.begin(), s.clients.end(),
                     [](const auto& c) { return c.first == "c7"; }));
  CHECK(client(s, "later").state == "registered");
  // A lost client keeps its address; it says where it came back from.
  l.client_event("c1", "lost", "connection reset");
  CHECK(client(l.snapshot(), "c1").address == "a");
  l.client_event("c1", "back", "b");
  CHECK(client(l.snapshot(), "c1").address == "b");
}

TEST_CASE("live status: the round under way and the rounds completed agree, "
          "a round's late evaluation replaces its record") {
  live_status l;
  auto r = run_of(2);
  r.federated_evaluation = true;
  l.set_run(r);
  l.round_started(1, false);
  auto s = l.snapshot();
  CHECK(s.round == 1);
  CHECK(s.completed() == 0);
  auto one = record(1);
  one.test_accuracy.reset(); // the clients evaluate it in round 2
  l.round_finished(one);
  l.round_started(2, true);
  s = l.snapshot();
  CHECK(s.round == 2);
  CHECK(s.completed() == 1);
  CHECK_FALSE(s.last_accuracy());
  l.round_finished(record(1)); // with the clients' evaluation
  s = l.snapshot();
  CHECK(s.completed() == 1);
  REQUIRE(s.last_accuracy());
  CHECK(*s.last_accuracy() == doctest::Approx(0.6));
  for (uint32_t i = 2; i <= 5000; ++i)
    l.round_finished(record(i));
  s = l.snapshot();
  CHECK(s.rounds.size() <= live_status::max_rounds);
  CHECK(s.rounds.back().round == 5000);
  CHECK(s.rounds.front().round == 1);
}

TEST_CASE("live status: /metrics has each family once, with loss, round "
          "seconds, compression, SecAgg's phase and DP epsilon") {
  live_status l;
  auto r = run_of(2);
  r.secure_aggregation = true;
  r.dp_noise_multiplier = 1.1;
  l.set_run(r);
  l.set_model(100, 100, 1);
  l.client_event("A", "registered", "");
  l.client_event("B", "registered", "");
  l.round_started(1, false);
  l.served("A", 100, 100, true);
  l.set_secagg_phase("shares");
  auto rec = record(1);
  rec.compression_up = 4.0;
  rec.dp_epsilon = 2.5;
  l.round_finished(rec);
  auto text = l.prometheus();
  for (const char* line :
       {"fedcaf_rounds_completed 1\n", "fedcaf_round 1\n",
        "fedcaf_train_loss 0.25\n", "fedcaf_test_loss 1\n",
        "fedcaf_test_accuracy 0.59999999999999998\n",
        "fedcaf_round_seconds 2.5\n",
        "fedcaf_compression_ratio{direction=\"up\"} 4\n",
        "fedcaf_secure_aggregation 1\n",
        "fedcaf_secagg_phase{phase=\"shares\"} 1\n",
        "fedcaf_secagg_phase{phase=\"keys\"} 0\n", "fedcaf_dp_epsilon 2.5\n",
        "fedcaf_clients_in_phase{phase=\"training\"} 1\n",
        "fedcaf_clients_in_phase{phase=\"waiting\"} 1\n",
        "fedcaf_client_round_progress{client=\"A\",direction=\"down\"} 1\n",
        "fedcaf_run_status{status=\"running\"} 1\n",
        "fedcaf_run_status{status=\"failed\"} 0\n", "fedcaf_rss_anon_bytes ",
        "fedcaf_rss_file_bytes ", "fedcaf_registrations_total 0\n"})
    CHECK_MESSAGE(text.find(line) != std::string::npos, line);
  CHECK(text.find("direction=\"down\"} 4") == std::string::npos);
  // Each family's TYPE once.
  size_t types = 0;
  for (size_t at = 0; (at = text.find("# TYPE ", at)) != std::string::npos;
       ++at)
    ++types;
  CHECK(types == 30); // 18, the RSS split, the run's status, 9 events
  // Without secure aggregation the phase family has no sample.
  live_status off;
  off.set_run(run_of(1));
  auto plain = off.prometheus();
  CHECK(plain.find("fedcaf_secure_aggregation 0\n") != std::string::npos);
  CHECK(plain.find("fedcaf_secagg_phase{") == std::string::npos);
  CHECK(plain.find("\nfedcaf_dp_epsilon ") == std::string::npos);
}

TEST_CASE("live status: Prometheus labels and JSON survive any text") {
  live_status s;
  s.set_run(run_of(2));
  s.client_event("a\"b\\c\nd\x1b\xff", "registered", "10.0.0.1:5");
  auto text = s.prometheus();
  CHECK(text.find("client=\"a\\\"b\\\\c\\nd??\"") != std::string::npos);
  auto json = s.json(); // invalid UTF-8 replaced, never thrown on
  CHECK(json.find("registered") != std::string::npos);
  CHECK(json.find("\"phase\":\"waiting\"") != std::string::npos);
}

TEST_CASE("live status: refusals counted as they happen") {
  live_status l;
  l.set_run(run_of(1));
  auto counter = std::make_shared<std::atomic<uint64_t>>(0);
  l.count_refusals(counter);
  CHECK(l.snapshot().refusals == 0);
  counter->fetch_add(3);
  CHECK(l.snapshot().refusals == 3);
  CHECK(l.prometheus().find("fedcaf_refusals_total 3\n") != std::string::npos);
  l.set_refusals(2); // a round's stamp, older: the counter's stands
  CHECK(l.snapshot().refusals == 3);
}
