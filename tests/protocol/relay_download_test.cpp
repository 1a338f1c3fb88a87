// A relay's download as its children see it, driven by hand: bytes that
// arrive in any order and more than once, fetches that wait for them and
// are released as soon as their bytes are in, a model handed whole, and a
// download given up (nothing waits on it any more).

#include <doctest/doctest.h>

#include "protocol/relay_download.hpp"

using namespace fedcaf;

TEST_CASE("relay download: a fetch waits until every byte of its chunk is "
          "in, in whatever order the bytes come") {
  relay_download d;
  d.start(100, true);
  CHECK_FALSE(d.complete());
  CHECK(d.has(0, 0));
  CHECK_FALSE(d.has(0, 10));
  auto first = d.wait(0, 40);   // chunk 0
  auto second = d.wait(40, 40); // chunk 1
  auto tail = d.wait(80, 20);   // chunk 2
  CHECK(d.waiting() == 3);
  CHECK(d.arrived(50, 30).empty()); // part of chunk 1
  CHECK(d.arrived(0, 30).empty());  // part of chunk 0
  CHECK(d.has(0, 30));
  CHECK_FALSE(d.has(0, 31));
  CHECK(d.arrived(40, 10) == std::vector<uint64_t>{second}); // [40, 80) in
  CHECK(d.arrived(30, 10) == std::vector<uint64_t>{first});  // [0, 80) in
  CHECK(d.has(0, 80));
  CHECK_FALSE(d.complete());
  CHECK(d.arrived(20, 20).empty()); // again: counted once
  CHECK_FALSE(d.complete());
  CHECK(d.arrived(80, 500) == std::vector<uint64_t>{tail}); // past the end
  CHECK(d.complete());
  CHECK(d.waiting() == 0);
}

TEST_CASE("relay download: a model handed whole is all in at once, a new "
          "download starts empty") {
  relay_download d;
  d.start(64, false);
  CHECK(d.complete());
  CHECK(d.has(0, 64));
  d.start(64, true);
  CHECK_FALSE(d.complete());
  CHECK_FALSE(d.has(0, 1));
  CHECK(d.arrived(0, 64).empty());
  CHECK(d.complete());
}

TEST_CASE("relay download: given up, it hands back every waiting fetch, "
          "never completes, and has nothing wait again") {
  relay_download d;
  d.start(100, true);
  d.arrived(0, 50);
  auto a = d.wait(50, 25);
  auto b = d.wait(75, 25);
  auto given = d.abandon();
  CHECK(given == std::vector<uint64_t>{a, b});
  CHECK(d.abandoned());
  CHECK(d.waiting() == 0);
  CHECK(d.arrived(50, 50).empty()); // late bytes change nothing
  CHECK_FALSE(d.complete());
  CHECK(d.has(0, 50));
  CHECK(d.has(50, 50)); // nothing waits for what never comes
  d.start(100, true);   // the next model
  CHECK_FALSE(d.abandoned());
}
