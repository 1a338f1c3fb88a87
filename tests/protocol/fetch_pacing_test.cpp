#include "protocol/fetch_pacing.hpp"

#include <doctest/doctest.h>

using namespace fedcaf;
using namespace std::chrono_literals;

TEST_CASE("a window-mode relay's download waits for its slowest child still "
          "fetching, and no longer for one silent past the idle timeout") {
  fetch_pacing p;
  fetch_pacing::time_point t{};
  CHECK_FALSE(p.active());
  p.start(10, {"A", "B"}, t);
  REQUIRE(p.active());
  CHECK(p.low(t, 1000ms) == 0); // nobody fetched yet: the cache waits

  // A fetches 0..3 (out of order), B 0..1: the low is B's.
  for (uint64_t s : {1, 0, 3, 2})
    p.fetched("A", s, t + 10ms);
  p.fetched("B", 0, t + 20ms);
  p.fetched("B", 1, t + 20ms);
  CHECK(p.low(t + 30ms, 1000ms) == 2);
  p.fetched("X", 9, t + 30ms); // not the round's child: paces nobody
  p.fetched("B", 0, t + 40ms); // fetched again (resumed): changes nothing
  CHECK(p.low(t + 40ms, 1000ms) == 2);

  // B falls silent: past the idle timeout it paces no more.
  for (uint64_t s = 4; s < 8; ++s)
    p.fetched("A", s, t + 500ms);
  std::vector<std::string> silent;
  CHECK(p.low(t + 900ms, 1000ms, &silent) == 2);
  CHECK(silent.empty());
  CHECK(p.low(t + 1100ms, 1000ms, &silent) == 8);
  CHECK(silent == std::vector<std::string>{"B"});
  p.fetched("B", 2, t + 1200ms); // back: it does not hold the others again
  CHECK(p.low(t + 1200ms, 1000ms) == 8);

  // A child dropped from the run paces no more.
  fetch_pacing q;
  q.start(4, {"A", "B"}, t);
  q.fetched("A", 0, t);
  CHECK(q.low(t, 1000ms) == 0);
  q.forget("B");
  CHECK(q.low(t, 1000ms) == 1);

  // Once every child still paced has it all, everything is served.
  p.fetched("A", 8, t + 1300ms);
  p.fetched("A", 9, t + 1300ms);
  CHECK(p.low(t + 1300ms, 1000ms) == 10);
  p.stop();
  CHECK_FALSE(p.active());
}
