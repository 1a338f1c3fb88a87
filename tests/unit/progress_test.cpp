#include <doctest/doctest.h>

#include "fedcaf/progress.hpp"

using namespace fedcaf;

TEST_CASE("the console's transfer line: bytes, rate and ETA per direction") {
  transfer_progress::snapshot s;
  s.round = 3;
  s.down = {256u << 20, 1u << 30, 100.0};
  // 256 MiB in 2 s: 128 MiB/s, 768 MiB to go: 6 s.
  CHECK(transfer_line(s, 102.0) ==
        "round 3: down 256.0 MiB / 1.00 GiB, 128.0 MiB/s, ETA 6 s");
  // Moving for less than a second: nothing yet.
  CHECK(transfer_line(s, 100.5).empty());
  // Down finished, up moving; a re-sent chunk past the total is clamped.
  s.down.done = (1u << 30) + 4096;
  s.up = {3u << 20, 1u << 30, 200.0};
  CHECK(transfer_line(s, 203.0) ==
        "round 3: down done  |  up 3.00 MiB / 1.00 GiB, 1.00 MiB/s, ETA 17 "
        "min 01 s");
  // Both finished (or not started): the line goes.
  s.up.done = 1u << 30;
  CHECK(transfer_line(s, 300.0).empty());
  CHECK(transfer_line(transfer_progress::snapshot{}, 300.0).empty());
}

TEST_CASE("transfer_progress counts per round and times the first bytes") {
  transfer_progress p;
  p.round_started(1, 1000, 2000);
  auto before = transfer_progress::now();
  p.moved_down(400);
  p.moved_down(100);
  p.expect(10, 20);
  auto s = p.read();
  CHECK(s.round == 1);
  CHECK(s.down.done == 500);
  CHECK(s.down.expected == 1010);
  CHECK(s.down.first_s >= before);
  CHECK(s.up.done == 0);
  CHECK(s.up.first_s == 0);
  CHECK(s.up.expected == 2020);
  p.round_started(2, 5, 5);
  s = p.read();
  CHECK(s.round == 2);
  CHECK(s.down.done == 0);
  CHECK(s.down.first_s == 0);
}

TEST_CASE("human_bytes") {
  CHECK(human_bytes(512) == "512 B");
  CHECK(human_bytes(3 * 1024) == "3.00 KiB");
  CHECK(human_bytes(412.0 * 1024 * 1024) == "412.0 MiB");
  CHECK(human_bytes(1024.0 * 1024 * 1024) == "1.00 GiB");
}
