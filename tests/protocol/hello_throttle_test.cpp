// Failed Hellos counted by host, time passed by hand: a host past its
// failures is refused unlogged for a back-off that doubles per burst and
// starts again after a quiet window; other hosts are never affected; one
// log line per burst; the hosts remembered are bounded.

#include <doctest/doctest.h>

#include "protocol/client_registry.hpp"
#include "protocol/hello_throttle.hpp"

using namespace fedcaf;
using namespace std::chrono_literals;

namespace {

const hello_throttle::time_point t0 =
    hello_throttle::time_point{} + std::chrono::hours{1};

/// Fails `n` Hellos of `host` at `now`; returns the burst lines logged.
int fail(hello_throttle& t, const std::string& host, int n,
         hello_throttle::time_point now) {
  int lines = 0;
  for (int i = 0; i < n; ++i)
    lines += t.failed(host, now).burst ? 1 : 0;
  return lines;
}

} // namespace

TEST_CASE("hello throttle: the host of an address") {
  CHECK(host_of("10.0.0.7:40318") == "10.0.0.7");
  CHECK(host_of("::1:40318") == "::1");
  CHECK(host_of("[::1]:40318") == "[::1]");
  CHECK(host_of("name") == "name");
}

TEST_CASE("hello throttle: past its failures a host waits, others do not") {
  hello_throttle t{{5, 60s, 1000ms, 8000ms, 16}};
  auto first = t.failed("A", t0);
  CHECK(first.log_refusal); // the first failure of a window is logged
  CHECK_FALSE(first.burst);
  auto second = t.failed("A", t0);
  CHECK_FALSE(second.log_refusal); // the rest of the burst is counted
  CHECK(fail(t, "A", 2, t0) == 0);
  CHECK(t.backoff_left("A", t0) == 0ms);
  auto fifth = t.failed("A", t0);
  REQUIRE(fifth.burst);
  CHECK(*fifth.burst == "A: 5 failed Hellos within 60 s; its failing "
                        "Hellos are refused unlogged for 1000 ms");
  CHECK(t.backoff_left("A", t0) == 1000ms);
  CHECK(t.backoff_left("A", t0 + 400ms) == 600ms);
  // Another host (an honest client elsewhere) is heard at once.
  CHECK(t.backoff_left("B", t0 + 400ms) == 0ms);
  CHECK(t.backoff_left("A", t0 + 1000ms) == 0ms);
  // The next burst waits twice as long; its failures are not logged one
  // by one, and its line counts the Hellos refused unlogged meanwhile (two
  // above).
  CHECK_FALSE(t.failed("A", t0 + 1s).log_refusal);
  CHECK(fail(t, "A", 3, t0 + 1s) == 0);
  auto burst = t.failed("A", t0 + 1s);
  REQUIRE(burst.burst);
  CHECK(burst.burst->find("for 2000 ms (2 refused during its last "
                          "back-off)") != std::string::npos);
  CHECK(t.backoff_left("A", t0 + 2500ms) == 500ms);
  // Doubling stops at max_backoff.
  CHECK(fail(t, "A", 5, t0 + 3s) == 1);
  CHECK(fail(t, "A", 5, t0 + 7s) == 1);
  CHECK(t.backoff_left("A", t0 + 7s) == 8000ms);
  CHECK(fail(t, "A", 5, t0 + 15s) == 1);
  CHECK(t.backoff_left("A", t0 + 15s) == 8000ms);
  // A window without failures after the back-off: it starts from the first.
  CHECK(fail(t, "A", 5, t0 + 90s) == 1);
  CHECK(t.backoff_left("A", t0 + 90s) == 1000ms);
}

TEST_CASE("hello throttle: failures spread over windows never block") {
  hello_throttle t{{3, 10s, 1000ms, 8000ms, 16}};
  for (int i = 0; i < 10; ++i) {
    auto now = t0 + std::chrono::seconds{11 * i};
    CHECK(fail(t, "A", 2, now) == 0);
    CHECK(t.backoff_left("A", now) == 0ms);
  }
}

TEST_CASE("hello throttle: the hosts remembered are bounded") {
  hello_throttle t{{2, 60s, 1000ms, 8000ms, 4}};
  CHECK(fail(t, "blocked", 2, t0) == 1);
  for (int i = 0; i < 1000; ++i)
    t.failed("10.0.0." + std::to_string(i), t0);
  CHECK(t.hosts() == 4);
  // The least recently failed host was forgotten first.
  CHECK(t.backoff_left("blocked", t0) == 0ms);
  CHECK(t.backoff_left("10.0.0.999", t0) == 0ms);
}

TEST_CASE("hello throttle: the registry refuses a guesser's wrong tokens "
          "unlogged, never a right one, from its address or another") {
  client_registry<int> r{{{{"A", "secret-a"}, {"B", "secret-b"}}, false, 4}};
  auto t = t0;
  int logged = 0;
  for (int i = 0; i < 5; ++i) {
    auto g = r.admit(msg::hello{"A", "guess" + std::to_string(i)}, 10 + i,
                     "10.0.0.66:" + std::to_string(4000 + i), "", false, t);
    REQUIRE_FALSE(g);
    CHECK(g.err().code == errc::not_authorized);
    logged += r.log_refusal() ? 1 : 0;
  }
  CHECK(logged == 1);
  // A wrong token from the guesser's host is refused, unlogged.
  auto wrong =
      r.admit(msg::hello{"B", "guess"}, 20, "10.0.0.66:4100", "", false, t);
  REQUIRE_FALSE(wrong);
  CHECK(wrong.err().code == errc::too_many_requests);
  CHECK(wrong.err().message == "B from 10.0.0.66:4100: too many failed "
                               "Hellos from 10.0.0.66: refused for "
                               "another 1000 ms");
  CHECK_FALSE(r.log_refusal());
  // The right token is admitted even from the guesser's host (a client
  // behind the same address).
  CHECK(
      r.admit(msg::hello{"B", "secret-b"}, 21, "10.0.0.66:4101", "", false, t));
  CHECK(r.log_refusal());
  // The honest client A from its own address gets in at once.
  CHECK(
      r.admit(msg::hello{"A", "secret-a"}, 22, "10.0.0.7:5000", "", false, t));
  CHECK(r.log_refusal());
  CHECK(r.throttled_hosts() == 1);
  // In this process nothing is throttled.
  client_registry<int> local{{{{"B", "secret-b"}}, false, 4}};
  for (int i = 0; i < 10; ++i) {
    CHECK_FALSE(local.admit(msg::hello{"B", "wrong"}, 30, "", "", false, t));
    CHECK(local.log_refusal());
  }
  CHECK(local.admit(msg::hello{"B", "secret-b"}, 30, "", "", false, t));
}
