// The client's report written by hand with the times passed in: a round's
// record, an update sent again replacing its round's record, the server's
// evaluation attached to the round that produced the model, and the totals.

#include <doctest/doctest.h>

#include "protocol/client_reporter.hpp"

using namespace fedcaf;
using std::chrono::milliseconds;

namespace {

msg::round_start round_of(uint32_t n) {
  msg::round_start rs;
  rs.round = n;
  return rs;
}

} // namespace

TEST_CASE("a round's record holds its bytes and times") {
  run_report report;
  auto progress = std::make_shared<transfer_progress>();
  client_reporter r{&report, "C3", progress};
  CHECK(report.node == "C3");
  client_reporter::time_point t0{milliseconds{5000}};
  r.start(t0);
  r.begin_round(round_of(2), 1000, t0);
  r.downloaded(600);
  r.downloaded(400);
  r.download_done(t0 + milliseconds{500});
  msg::offer o;
  o.train_loss = 0.25;
  o.train_seconds = 1.5;
  r.trained(o, 3.0, t0 + milliseconds{2000});
  r.uploaded(700, false);
  r.uploaded(300, true);
  r.in_flight(3);
  r.in_flight(2);
  r.upload_closed(t0 + milliseconds{2500}, 99.0, 0);
  r.finish(t0 + milliseconds{4000}, 12345);

  REQUIRE(report.rounds.size() == 1);
  const auto& rec = report.rounds[0];
  CHECK(rec.round == 2);
  CHECK(rec.bytes_down == 1000);
  CHECK(rec.bytes_up == 1000);
  CHECK(rec.download_seconds == doctest::Approx(0.5));
  CHECK(rec.train_loss == 0.25);
  CHECK(rec.train_seconds == 1.5);
  REQUIRE(rec.dp_sgd_epsilon);
  CHECK(*rec.dp_sgd_epsilon == 3.0);
  CHECK(rec.upload_seconds == doctest::Approx(0.5));
  CHECK(rec.wall_seconds == doctest::Approx(2.5));
  CHECK(rec.ended_unix_s == 99.0);
  CHECK(report.bytes_received == 1000);
  CHECK(report.bytes_sent == 1000);
  CHECK(report.bytes_resent == 300);
  CHECK(report.peak_in_flight == 3);
  CHECK(report.total_seconds == doctest::Approx(4));
  CHECK(report.peak_rss_bytes == 12345);
  auto seen = progress->read();
  CHECK(seen.round == 2);
  CHECK(seen.down.done == 1000);
  CHECK(seen.up.done == 1000);
}

TEST_CASE("an update sent again replaces its round's record, the server's "
          "evaluation goes to the round that produced the model") {
  run_report report;
  client_reporter r{&report, "C3", nullptr};
  client_reporter::time_point t0{};
  r.begin_round(round_of(1), 10, t0);
  r.upload_closed(t0, 1.0, 0);
  r.uploaded(10, false);
  r.upload_closed(t0, 2.0, 0); // sent again
  REQUIRE(report.rounds.size() == 1);
  CHECK(report.rounds[0].bytes_up == 10);
  CHECK(report.rounds[0].ended_unix_s == 2.0);
  r.begin_round(round_of(2), 10, t0);
  r.upload_closed(t0, 3.0, 0);
  CHECK(report.rounds.size() == 2);

  r.note_metrics(msg::metrics{1, 0.9, 0.1, false}); // not evaluated
  CHECK_FALSE(report.rounds[0].test_accuracy);
  r.note_metrics(msg::metrics{1, 0.9, 0.1, true});
  REQUIRE(report.rounds[0].test_accuracy);
  CHECK(*report.rounds[0].test_accuracy == 0.9);
  CHECK(*report.rounds[0].test_loss == 0.1);
  CHECK_FALSE(report.rounds[1].test_accuracy);
}

TEST_CASE("a failure, retries and resumptions are reported") {
  run_report report;
  client_reporter r{&report, "C3", nullptr};
  r.retried();
  r.retried();
  r.resumed();
  r.resent(64);
  r.failed(error{errc::disconnected, "gone"});
  CHECK(report.retries == 2);
  CHECK(report.resumes == 1);
  CHECK(report.bytes_resent == 64);
  CHECK(report.failure == to_string(error{errc::disconnected, "gone"}));
}
