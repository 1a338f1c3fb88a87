// The server's account of a run: traffic and offers' figures in a round's
// record; its line printed at once or held for the clients' evaluations;
// the report saved between rounds but not once the run ended; client
// events and the totals at the end, read back from the metrics file.

#include <doctest/doctest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include <unistd.h>

#include "protocol/round_reporter.hpp"

using namespace fedcaf;

namespace {

namespace fs = std::filesystem;

/// A folder of its own for each test, removed at the end.
struct scratch {
  fs::path dir;
  scratch() {
    dir = fs::temp_directory_path() /
          ("round_reporter_test." + std::to_string(::getpid()) + "." +
           std::to_string(counter()++));
    fs::create_directories(dir);
  }
  ~scratch() { fs::remove_all(dir); }
  std::string path(const char* name) const { return (dir / name).string(); }
  static int& counter() {
    static int n = 0;
    return n;
  }
};

std::string read(const std::string& path) {
  std::ifstream in{path};
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// How many lines of the metrics file at `path` contain `what`.
int lines_with(const std::string& path, const std::string& what) {
  std::ifstream in{path};
  int n = 0;
  for (std::string line; std::getline(in, line);)
    n += line.find(what) != std::string::npos ? 1 : 0;
  return n;
}

model_snapshot model_of(uint64_t bytes) {
  model_snapshot s;
  s.layout.tensors = {make_tensor_info("w", dtype::float32, {bytes / 4})};
  s.bytes = byte_buffer::zeroed(bytes);
  return s;
}

round_outcome outcome(uint32_t round, std::vector<std::string> contributors) {
  round_outcome o;
  o.round = round;
  o.clients = static_cast<uint32_t>(contributors.size());
  o.loss = 0.5;
  o.contributors = std::move(contributors);
  return o;
}

} // namespace

TEST_CASE("round reporter: traffic and the offers' figures go into the "
          "round's record") {
  run_report report;
  reporter_options o;
  o.compression.method = compression_method::fp16;
  o.compression.up = o.compression.down = true;
  round_reporter r{o, &report};
  r.round_started(1, 200);
  r.count_down("A", 50, 100, true);
  r.count_down("B", 50, 100, true);
  r.count_up("A", 30);
  r.count_up("B", 20);
  r.note_offer("A", 10, {{"loss", 1.0}});
  r.note_offer("C", 10, {{"loss", 3.0}}); // not a contributor
  auto o1 = outcome(1, {"A", "B"});
  o1.missing = {"D"};
  auto rec = r.open_record(o1, model_of(100));
  CHECK(rec.round == 1);
  CHECK(rec.bytes_down == 100);
  CHECK(rec.bytes_up == 50);
  CHECK(rec.client_bytes ==
        decltype(rec.client_bytes){{"A", {30, 50}}, {"B", {20, 50}}});
  REQUIRE(rec.compression_down);
  CHECK(*rec.compression_down == doctest::Approx(2.0));
  REQUIRE(rec.compression_up);
  CHECK(*rec.compression_up == doctest::Approx(4.0)); // 2 x 100 B / 50 B
  CHECK(rec.missing_clients == std::vector<std::string>{"D"});
  REQUIRE(rec.client_train_metrics);
  CHECK(*rec.client_train_metrics->find("loss") == doctest::Approx(1.0));
  CHECK_FALSE(rec.dp_epsilon);
  CHECK(report.bytes_sent == 100);
  CHECK(report.bytes_received == 50);
  // The figures went with their round; the counts start again.
  r.start_traffic();
  auto rec2 = r.open_record(outcome(2, {"A"}), model_of(100));
  CHECK_FALSE(rec2.client_train_metrics);
  CHECK(rec2.bytes_down == 0);
}

TEST_CASE("round reporter: DP-FedAvg records the epsilon spent") {
  run_report report;
  reporter_options o;
  o.dp_noise_multiplier = 1.0;
  o.dp_sample_rate = 0.5;
  round_reporter r{o, &report};
  auto one = r.open_record(outcome(1, {}), model_of(8));
  auto five = r.open_record(outcome(5, {}), model_of(8));
  REQUIRE(one.dp_epsilon);
  REQUIRE(five.dp_epsilon);
  CHECK(*one.dp_epsilon > 0);
  CHECK(*five.dp_epsilon > *one.dp_epsilon);
}

TEST_CASE("round reporter: a round's line waits for its evaluations iff "
          "federated evaluation is on") {
  scratch s;
  auto metrics = metrics_log::open(s.path("m.jsonl"));
  REQUIRE(metrics);
  run_report report;
  reporter_options o;
  o.num_rounds = 2;
  o.metrics = *metrics;
  SUBCASE("off: printed at once") {
    round_reporter r{o, &report};
    r.finish_round(r.open_record(outcome(1, {}), model_of(8)), 1.5, 100, {});
    CHECK(lines_with(s.path("m.jsonl"), "\"event\":\"round\"") == 1);
    CHECK_FALSE(r.held());
    REQUIRE(report.rounds.size() == 1);
    CHECK(report.rounds[0].wall_seconds == 1.5);
    CHECK(report.rounds[0].ended_unix_s == 100);
  }
  SUBCASE("on: held until the clients evaluated the round's model") {
    o.federated_evaluation = true;
    round_reporter r{o, &report};
    r.finish_round(r.open_record(outcome(1, {}), model_of(8)), 1.5, 100, {});
    CHECK(lines_with(s.path("m.jsonl"), "\"event\":\"round\"") == 0);
    CHECK(r.held() == 1u);
    model_evaluations of{1, {"A"}, {}};
    of.sum.add(10, {{"accuracy", 0.8}, {"loss", 0.3}});
    CHECK_FALSE(r.note_evaluations(of, false, false, {}));
    CHECK(r.held() == 1u);
    REQUIRE(report.rounds[0].client_metrics);
    CHECK(r.note_evaluations(of, true, true, {}));
    CHECK_FALSE(r.held());
    CHECK(lines_with(s.path("m.jsonl"), "\"event\":\"round\"") == 1);
    REQUIRE(report.rounds[0].test_accuracy);
    CHECK(*report.rounds[0].test_accuracy == doctest::Approx(0.8));
    CHECK(*report.rounds[0].test_loss == doctest::Approx(0.3));
  }
  SUBCASE("the initial model's evaluations are no round of the report") {
    round_reporter r{o, &report};
    model_evaluations of{0, {"A"}, {}};
    of.sum.add(10, {{"accuracy", 0.1}});
    CHECK_FALSE(r.note_evaluations(of, true, true, {}));
    CHECK(report.rounds.empty());
  }
}

TEST_CASE("round reporter: the live view counts a round once published, "
          "its accuracy once its clients evaluated it, phases follow") {
  scratch s;
  run_report report;
  reporter_options o;
  o.num_rounds = 3;
  o.federated_evaluation = true;
  o.live = std::make_shared<live_status>();
  o.report_html_path = s.path("run.html");
  live_run run;
  run.num_clients = 1;
  o.live->set_run(run);
  o.live->set_model(8, 8, 1);
  round_reporter r{o, &report};
  r.registered("A", "10.0.0.1:1", {});
  r.round_started(1, 8);
  r.count_down("A", 8, 8, true);
  CHECK(o.live->snapshot().clients[0].second.phase == client_phase::training);
  r.count_up("A", 96);
  r.upload_ended("A");
  CHECK(o.live->snapshot().clients[0].second.phase == client_phase::done);
  r.finish_round(r.open_record(outcome(1, {"A"}), model_of(8)), 1, 1, {});
  r.round_started(2, 8); // its clients evaluate round 1's model first
  auto live = o.live->snapshot();
  CHECK(live.round == 2);
  CHECK(live.completed() == 1); // the round is in, its line held
  CHECK(r.held() == 1u);
  CHECK_FALSE(live.last_accuracy());
  auto page = read(o.report_html_path); // written with the round
  CHECK(page.find("<b id=\"completed\">1</b>") != std::string::npos);
  r.count_down("A", 8, 8, true);
  CHECK(o.live->snapshot().clients[0].second.phase == client_phase::evaluating);
  r.evaluated("A", 1, 10);
  CHECK(o.live->snapshot().clients[0].second.phase == client_phase::training);
  model_evaluations of{1, {"A"}, {}};
  of.sum.add(10, {{"accuracy", 0.8}});
  CHECK(r.note_evaluations(of, true, true, {}));
  live = o.live->snapshot();
  CHECK(live.completed() == 1);
  REQUIRE(live.last_accuracy());
  CHECK(*live.last_accuracy() == doctest::Approx(0.8));
  r.event("rejected", "A", "poisoned_update: ...");
  CHECK(o.live->snapshot().clients[0].second.phase == client_phase::rejected);
}

TEST_CASE("round reporter: the server's own evaluation is kept over the "
          "clients'") {
  run_report report;
  round_reporter r{reporter_options{}, &report};
  auto rec = r.open_record(outcome(1, {}), model_of(8));
  rec.test_accuracy = 0.9;
  r.finish_round(rec, 1, 1, {});
  figures_sum sum;
  sum.add(10, {{"accuracy", 0.2}});
  CHECK(r.put_client_metrics(1, sum.mean()));
  CHECK(*report.rounds[0].test_accuracy == doctest::Approx(0.9));
  REQUIRE(report.rounds[0].client_metrics);
  CHECK_FALSE(r.put_client_metrics(2, sum.mean()));
}

TEST_CASE("round reporter: the report is saved between rounds, not once the "
          "run ended") {
  scratch s;
  run_report report;
  reporter_options o;
  o.report_path = s.path("report.json");
  round_reporter r{o, &report};
  r.finish_round(r.open_record(outcome(1, {}), model_of(8)), 1, 1, {2.5, 7});
  auto saved = read(o.report_path);
  CHECK(saved.find("\"running\"") != std::string::npos);
  CHECK(report.status.empty()); // only the file says running
  CHECK(report.refusals == 7);
  CHECK(report.total_seconds == 2.5);
  r.end("interrupted by SIGINT");
  fs::remove(o.report_path);
  r.finish_round(r.open_record(outcome(2, {}), model_of(8)), 1, 1, {});
  CHECK_FALSE(fs::exists(o.report_path));
  CHECK(report.failure == "interrupted by SIGINT");
}

TEST_CASE("round reporter: client events and the end go to the metrics "
          "file, the totals to the report") {
  scratch s;
  auto metrics = metrics_log::open(s.path("m.jsonl"));
  REQUIRE(metrics);
  run_report report;
  reporter_options o;
  o.metrics = *metrics;
  o.poisoned = make_refusal_counter();
  o.poisoned->store(3);
  o.live = std::make_shared<live_status>();
  round_reporter r{o, &report};
  r.registered("A", "h:1", {});
  r.resumed("A", "h:2", "reconnected");
  r.lost("A", "no_goodbye", "connection reset", 30000);
  r.dropped("A", 30000);
  r.evaluated("B", 4, 100);
  r.registered("B", "h:3", {});
  r.left("B", "interrupted", "interrupted: Ctrl-C");
  r.refused("10.0.0.9:4000", error{errc::not_authorized, "wrong token"});
  CHECK(report.resumes == 1);
  // The live view counts each event by its reason, and logs them.
  auto live = o.live->snapshot();
  auto count = [&live](run_event e, const std::string& reason) {
    auto it = live.event_counts.find({e, reason});
    return it == live.event_counts.end() ? uint64_t{0} : it->second;
  };
  CHECK(count(run_event::registered, "joined") == 2);
  CHECK(count(run_event::resumed, "reconnected") == 1);
  CHECK(count(run_event::lost, "no_goodbye") == 1);
  CHECK(count(run_event::dropped, "no_resume") == 1);
  CHECK(count(run_event::left, "interrupted") == 1);
  CHECK(count(run_event::refused, "not_authorized") == 1);
  // Refused Hellos are logged apart, under the peer's address.
  REQUIRE(live.events.size() == 5); // B's registration folded into A's
  CHECK(live.events[0].count == 2);
  CHECK(live.events[2].detail == "connection reset");
  REQUIRE(live.refused.size() == 1);
  CHECK(live.refused[0].client == "10.0.0.9:4000");
  auto text = prometheus_text(live);
  CHECK(text.find("fedcaf_clients_lost_total{reason=\"no_goodbye\"} 1\n") !=
        std::string::npos);
  CHECK(text.find("fedcaf_registrations_total 2\n") != std::string::npos);
  auto m = s.path("m.jsonl");
  CHECK(lines_with(m, "\"event\":\"registered\"") == 2);
  CHECK(lines_with(m, "\"event\":\"back\"") == 1);
  CHECK(lines_with(m, "\"detail\":\"connection reset\"") == 1);
  CHECK(lines_with(m, "\"event\":\"dropped\"") == 1);
  CHECK(lines_with(m, "\"detail\":\"round 4, 100 samples\"") == 1);
  r.end("boom");
  r.close({12.5, 4}, 999);
  r.close({12.5, 4}, 999); // one end event
  CHECK(lines_with(m, "\"status\":\"failed\"") == 1);
  CHECK(report.node == "server");
  CHECK(report.total_seconds == 12.5);
  CHECK(report.refusals == 4);
  CHECK(report.peak_rss_bytes == 999);
  CHECK(report.poisoned_updates == 3);
  // The report counts the events too (the counters after the run).
  CHECK(report.events["lost"]["no_goodbye"] == 1);
  CHECK(report.events["registered"]["joined"] == 2);
  CHECK(report.events["refused"]["not_authorized"] == 1);
}
