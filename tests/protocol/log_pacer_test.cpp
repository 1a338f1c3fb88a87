// Refusals logged per source: the first few a period, the rest counted and
// summed up in one line once the period is over; sources past the limit
// share one entry.

#include <doctest/doctest.h>

#include "protocol/log_pacer.hpp"

using namespace fedcaf;
using namespace std::chrono_literals;

TEST_CASE("log pacer: a source's first lines a period are logged, the rest "
          "summed up once the period is over, other sources are not held "
          "back") {
  log_pacer p{{3, 10s, 8}};
  log_pacer::time_point t{};
  int logged = 0;
  for (int i = 0; i < 1000; ++i) {
    auto v = p.note("10.0.0.9", t + std::chrono::milliseconds{i});
    logged += v.log ? 1 : 0;
    CHECK(v.summaries.empty());
  }
  CHECK(logged == 3);
  CHECK(p.note("10.0.0.1", t + 1s).log); // an honest client's host
  auto later = p.note("10.0.0.9", t + 11s);
  CHECK(later.log);
  REQUIRE(later.summaries.size() == 1);
  CHECK(later.summaries[0] ==
        "997 more refused from 10.0.0.9 in the last 11 s (logged: the first 3 "
        "per source every 10 s)");
}

TEST_CASE("log pacer: rotating addresses share one entry past max_sources, "
          "and a quiet source's count is summed up by the next sweep") {
  log_pacer p{{2, 10s, 4}};
  log_pacer::time_point t{};
  int logged = 0;
  for (int i = 0; i < 2400; ++i)
    logged += p.note("10.1." + std::to_string(i / 256) + "." +
                         std::to_string(i % 256),
                     t + std::chrono::milliseconds{i / 100})
                  .log;
  CHECK(p.sources() == 5); // 4 and "other sources"
  CHECK(logged == 4 + 2);  // one each, and 2 of the shared entry
  auto v = p.note("10.9.9.9", t + 30s);
  CHECK(v.log);
  REQUIRE(v.summaries.size() == 1);
  CHECK(v.summaries[0].starts_with("2394 more refused from other sources"));
  CHECK(p.sources() == 1);
}

TEST_CASE("log pacer: flush sums up a flood that stopped, once") {
  log_pacer p{{2, 10s, 8}};
  log_pacer::time_point t{};
  for (int i = 0; i < 50; ++i)
    p.note("10.0.0.9", t);
  CHECK(p.flush(t + 5s).empty()); // its period is not over
  auto out = p.flush(t + 11s);
  REQUIRE(out.size() == 1);
  CHECK(out[0].starts_with("48 more refused from 10.0.0.9"));
  CHECK(p.flush(t + 30s).empty());
  CHECK(p.sources() == 0);
}
