// The pool a chunk's fold and a round's finalize run their parts on: each
// part once, on the pool's threads and the caller's, run after run.

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "fedcaf/work_pool.hpp"

using namespace fedcaf;

TEST_CASE("a pool calls each part once per run, on its threads and the "
          "caller's, and returns after the last") {
  for (unsigned threads : {0u, 1u, 2u, 4u}) {
    CAPTURE(threads);
    work_pool pool{threads};
    CHECK(pool.threads() == std::max(1u, threads));
    std::mutex mutex;
    std::set<std::thread::id> seen;
    for (unsigned run = 0; run < 300; ++run) {
      auto parts = 1 + run % 9; // fewer and more parts than threads
      std::vector<std::atomic<int>> calls(parts);
      pool.run(parts, [&](unsigned p) {
        calls[p].fetch_add(1);
        if (run % 50 == 0) // long enough that the others take parts too
          std::this_thread::sleep_for(std::chrono::milliseconds(2));
        std::lock_guard lock{mutex};
        seen.insert(std::this_thread::get_id());
      });
      for (unsigned p = 0; p < parts; ++p)
        REQUIRE(calls[p].load() == 1); // all returned, once each
    }
    CHECK(seen.count(std::this_thread::get_id()) == 1);
    CHECK(seen.size() <= pool.threads());
    if (threads >= 2)
      CHECK(seen.size() >= 2);
    pool.run(0, [](unsigned) { FAIL("no part to run"); });
  }
}
