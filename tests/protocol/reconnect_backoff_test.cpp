// Reconnection delays and the deadline, with the time passed in by hand.

#include <doctest/doctest.h>

#include <vector>

#include "protocol/reconnect_backoff.hpp"

using namespace fedcaf;
using std::chrono::milliseconds;

TEST_CASE("delays double from 100 ms up to 2 s, and start again on a new "
          "loss") {
  reconnect_backoff b{milliseconds{30000}, "h:7"};
  reconnect_backoff::time_point t0{milliseconds{1000}};
  CHECK(b.lost(t0, "eof") == "lost the server (eof); reconnecting to h:7");
  std::vector<long> delays;
  for (int i = 0; i < 7; ++i) {
    auto d = b.next_delay(t0, "refused");
    REQUIRE(d);
    delays.push_back(d->count());
  }
  CHECK(delays == std::vector<long>{100, 200, 400, 800, 1600, 2000, 2000});
  b.lost(t0 + milliseconds{5000}, "eof");
  CHECK(b.next_delay(t0 + milliseconds{5000}, "x")->count() == 100);
}

TEST_CASE("a server gone longer than the client waits is given up") {
  reconnect_backoff b{milliseconds{3000}, "h:7"};
  reconnect_backoff::time_point t0{milliseconds{1000}};
  b.lost(t0, "eof");
  CHECK(b.next_delay(t0 + milliseconds{3000}, "refused")); // not longer
  auto late = b.next_delay(t0 + milliseconds{3001}, "refused");
  REQUIRE_FALSE(late);
  CHECK(late.err().code == errc::disconnected);
  CHECK(late.err().message ==
        "the server at h:7 was not back within 3000 ms: refused");
}
