// A stream's rate over the time it could send, with a clock the test moves:
// time the server held its credits back is left out, a slow drip is below
// the minimum once the window has passed, and nothing is judged before.

#include <doctest/doctest.h>

#include "protocol/send_rate.hpp"

using namespace fedcaf;
using namespace std::chrono_literals;

namespace {
const send_rate::time_point t0{};
}

TEST_CASE("a stream is not judged before it could send for a whole window") {
  send_rate r{10s};
  r.set_can_send(true, t0);
  CHECK_FALSE(r.rate(t0 + 9s));
  REQUIRE(r.rate(t0 + 10s));
  CHECK(*r.rate(t0 + 10s) == 0.0);
  send_rate off; // a zero window: never judged
  off.set_can_send(true, t0);
  off.moved(100, t0 + 1s);
  CHECK_FALSE(off.rate(t0 + 1000s));
}

TEST_CASE("the rate counts the bytes of the last window of sendable time") {
  send_rate r{10s};
  r.set_can_send(true, t0);
  for (int k = 1; k <= 20; ++k) // 1000 bytes a second for 20 s
    r.moved(1000, t0 + k * 1s);
  REQUIRE(r.rate(t0 + 20s));
  CHECK(*r.rate(t0 + 20s) == doctest::Approx(1000.0));
  // Then one chunk of 1000 every 5 s: 200 bytes/s once the window is past.
  for (int k = 1; k <= 4; ++k)
    r.moved(1000, t0 + 20s + k * 5s);
  CHECK(*r.rate(t0 + 40s) == doctest::Approx(200.0));
}

TEST_CASE("time the server withheld credits does not count against a "
          "stream") {
  send_rate r{10s};
  r.set_can_send(true, t0);
  r.moved(5000, t0 + 5s);
  r.set_can_send(false, t0 + 5s); // the window holds its credits
  CHECK(r.sendable(t0 + 100s) == 5s);
  CHECK_FALSE(r.rate(t0 + 100s)); // 5 s of sendable time: not judged
  r.set_can_send(true, t0 + 100s);
  r.moved(5000, t0 + 105s);
  CHECK(r.sendable(t0 + 105s) == 10s);
  REQUIRE(r.rate(t0 + 105s));
  CHECK(*r.rate(t0 + 105s) == doctest::Approx(1000.0)); // not 10000 / 105
}

TEST_CASE("a slow drip stays below the minimum, a stream at twice the "
          "minimum with whole chunks does not") {
  // A chunk of 1 MiB every 59 s (one just before each idle timeout).
  send_rate drip{120s};
  drip.set_can_send(true, t0);
  for (int k = 1; k <= 4; ++k)
    drip.moved(1 << 20, t0 + k * 59s);
  REQUIRE(drip.rate(t0 + 240s));
  CHECK(*drip.rate(t0 + 240s) < 65536.0);
  // 128 KiB/s in 1 MiB chunks: one every 8 s.
  send_rate fine{120s};
  fine.set_can_send(true, t0);
  for (int k = 1; k <= 40; ++k) {
    fine.moved(1 << 20, t0 + k * 8s);
    if (auto rate = fine.rate(t0 + k * 8s + 7s))
      CHECK(*rate >= 65536.0);
  }
}
