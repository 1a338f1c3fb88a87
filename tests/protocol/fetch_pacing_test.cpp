#include "protocol/fetch_pacing.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <functional>
#include <map>

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

  // Fetching one chunk again and again is no progress.
  fetch_pacing d;
  d.start(4, {"A", "B"}, t);
  d.fetched("A", 0, t);
  d.fetched("A", 1, t + 900ms);
  for (int i = 1; i < 10; ++i)
    d.fetched("B", 3, t + i * 200ms); // far ahead, never its prefix
  CHECK(d.low(t + 900ms, 1000ms) == 0);
  CHECK(d.low(t + 1100ms, 1000ms) == 2); // B silent since the start

  // Children ahead of the low wait for the cache: not silent. When the
  // silent one at the low goes, their clocks start again.
  fetch_pacing w;
  w.start(8, {"X", "C1", "C2"}, t);
  w.fetched("X", 0, t);
  for (uint64_t s : {0, 1, 2})
    for (const char* c : {"C1", "C2"})
      w.fetched(c, s, t + 10ms); // then they wait at the cache's end
  std::vector<std::string> gone;
  CHECK(w.low(t + 1500ms, 1000ms, &gone) == 3);
  CHECK(gone == std::vector<std::string>{"X"});
  CHECK(w.low(t + 2000ms, 1000ms) == 3); // C1 and C2 stay paced
  CHECK(w.low(t + 2600ms, 1000ms) == 8); // silent since the low moved

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

TEST_CASE("a child that drips one new chunk just under the idle timeout, "
          "holding its siblings a cache or more behind, is let go after the "
          "idle timeout, one that keeps up is not") {
  fetch_pacing p;
  fetch_pacing::time_point t{};
  p.start(100, {"A", "B", "D"}, t, 4); // cache: 4 chunks
  // A and B fetch as fast as the cache lets them (4 ahead of the low);
  // D fetches one new chunk every 900 ms (the idle timeout is 1000 ms).
  std::vector<std::string> let_go;
  uint64_t d = 0;
  auto now = t;
  for (int step = 0; step < 5; ++step) {
    now = t + std::chrono::milliseconds{900 * step};
    p.fetched("D", d++, now);
    auto low = p.low(now, 1000ms, &let_go);
    for (uint64_t s = 0; s < low + 4; ++s) {
      p.fetched("A", s, now);
      p.fetched("B", s, now);
    }
    p.low(now, 1000ms, &let_go);
  }
  CHECK(let_go == std::vector<std::string>{"D"}); // held A and B > 1 s
  // Without D the low is A's and B's: the download goes on.
  CHECK(p.low(now, 1000ms) >= 8);

  // Children that keep up with each other (within the cache) are never
  // let go, however long the round takes.
  fetch_pacing q;
  q.start(100, {"A", "B"}, t, 4);
  std::vector<std::string> none;
  for (uint64_t s = 0; s < 50; ++s) {
    auto at = t + std::chrono::milliseconds{500 * s};
    q.fetched("A", s, at);
    q.fetched("B", s, at);
    q.low(at, 1000ms, &none);
  }
  CHECK(none.empty());
}

namespace {

/// Plays a window-mode relay's round of `chunks` chunks, cache `cache`,
/// idle timeout 4 s, in 10 ms steps for `ms` ms: each child fetches its
/// next chunk every `period` ms when the cache lets it (the chunk below
/// low + cache); `next` may say otherwise (returns whether child `id` at
/// `prefix` fetches now). Returns the children let go, in order.
std::vector<std::string> play_round(
    uint64_t chunks, uint64_t cache, const std::map<std::string, int>& period,
    int ms, std::optional<int> deadline_ms = std::nullopt,
    const std::function<bool(const std::string&, uint64_t, int,
                             const std::map<std::string, uint64_t>&)>& next =
        {}) {
  fetch_pacing p;
  fetch_pacing::time_point t{};
  std::set<std::string> ids;
  for (const auto& [id, ms_each] : period)
    ids.insert(id);
  std::optional<fetch_pacing::time_point> deadline;
  if (deadline_ms)
    deadline = t + std::chrono::milliseconds{*deadline_ms};
  p.start(chunks, ids, t, cache, deadline);
  std::map<std::string, uint64_t> at;
  std::map<std::string, int> due;
  for (const auto& id : ids)
    at[id] = 0;
  std::vector<std::string> let_go;
  for (int now = 0; now <= ms; now += 10) {
    auto when = t + std::chrono::milliseconds{now};
    auto low = p.low(when, 4000ms, &let_go);
    for (const auto& [id, each] : period) {
      auto& s = at[id];
      bool gone = std::find(let_go.begin(), let_go.end(), id) != let_go.end();
      if (s >= chunks || (!gone && s >= low + cache) || now < due[id])
        continue;
      bool go = next ? next(id, s, now, at) : true;
      if (!go)
        continue;
      p.fetched(id, s++, when);
      due[id] = now + each;
    }
  }
  return let_go;
}

} // namespace

TEST_CASE("relay pacing: an honest child slower than a sibling, or two in "
          "step beside a fast one, are never let go, two that pass the low "
          "back and forth, or a group too slow for the deadline, are") {
  // 10 and 9 chunks per idle timeout, cache 2: the slower moves the low
  // far more than a cache per idle timeout.
  CHECK(play_round(200, 2, {{"H1", 100}, {"H2", 110}}, 20000).empty());
  // A fast child beside two in step (0.2 s and 0.23 s a chunk).
  CHECK(
      play_round(120, 2, {{"F", 10}, {"S1", 200}, {"S2", 230}}, 25000).empty());
  // One chunk every 0.4 s, within a 40 s deadline for 22 chunks.
  CHECK(play_round(22, 2, {{"C", 10}, {"S", 400}}, 20000, 40000).empty());

  // Leapfrog: every 3 s the one of A and B behind jumps one past the
  // other; C1 and C2 wait a cache ahead. Both are let go, the others not.
  auto leap = [](const std::string& id, uint64_t s, int now,
                 const std::map<std::string, uint64_t>& at) {
    if (id != "A" && id != "B")
      return true;
    if (now % 3000 != 0)
      return false;
    auto other = at.at(id == "A" ? "B" : "A");
    return s <= other; // the one behind (or level) steps
  };
  auto gone = play_round(22, 2, {{"A", 10}, {"B", 10}, {"C1", 10}, {"C2", 10}},
                         40000, 40000, leap);
  std::sort(gone.begin(), gone.end());
  CHECK(gone == std::vector<std::string>{"A", "B"});

  // A chunk every 1.5 s moves the low more than a cache (2) per idle
  // timeout, but 100 chunks cannot be done by a 60 s deadline that way.
  auto slow = play_round(100, 2, {{"C", 10}, {"D", 1500}}, 20000, 60000);
  CHECK(slow == std::vector<std::string>{"D"});
  CHECK(play_round(100, 2, {{"C", 10}, {"D", 1500}}, 20000).empty());
}
