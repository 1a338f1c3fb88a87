// A relay's group round driven by hand: a round short of min_clients sat
// out (who leaves, when it completes), and a streaming round's kept
// children and settled steps.

#include <doctest/doctest.h>

#include "protocol/group_round.hpp"
#include "tests/protocol/round_fixtures.hpp"

using namespace fedcaf;
using fedcaf::testing::offer;
using ids = std::set<std::string>;

namespace {

void check_step(const group_round::sit_out_step& step, bool first, bool cut,
                bool waits) {
  CHECK(step.first == first);
  CHECK(step.cut == cut);
  CHECK(step.waits == waits);
}

} // namespace

TEST_CASE("group round: a round falls short of min_clients unless its kept "
          "children make up for it, or it streams") {
  group_round g;
  CHECK(g.falls_short(1, 2));
  CHECK_FALSE(g.falls_short(2, 2));
  g.keep_cut(0); // nothing of it in the sum: it does not count
  CHECK(g.kept() == 0);
  CHECK(g.falls_short(1, 2));
  g.keep_cut(3);
  CHECK(g.kept() == 1);
  CHECK(g.kept_whole() == 0);
  CHECK_FALSE(g.falls_short(1, 2));
  auto r = testing::three_clients();
  CHECK(g.contributors(r) == 3);
  g.keep_whole();
  CHECK(g.kept() == 2);
  CHECK(g.kept_whole() == 1);
  r.leave("A");
  CHECK(g.contributors(r) == 3); // A's whole update: in every position
  CHECK_FALSE(g.falls_short(0, 2));
  g.start();
  CHECK(g.kept() == 0);
  CHECK(g.kept_whole() == 0);
  CHECK(g.falls_short(0, 2));
}

TEST_CASE("group round: an announced round sat out takes out who has not "
          "offered and waits for the uploads under way") {
  auto r = testing::three_clients();
  offer(r, "A");
  group_round g;
  check_step(g.sit_out(true, r), true, true, true); // A still uploads
  CHECK(g.sitting_out());
  CHECK(r.participants() == ids{"A"});
  CHECK(r.missing() == ids{"B", "C"});
  // A's update closes: the next call completes the sit-out.
  r.close("A");
  check_step(g.sit_out(true, r), false, false, false);
  g.start();
  CHECK_FALSE(g.sitting_out());
}

TEST_CASE("group round: with no upload under way, or a round never "
          "announced, the sit-out completes at once") {
  auto r = testing::three_clients();
  group_round g;
  check_step(g.sit_out(true, r), true, true, false);
  CHECK(r.participants().empty());
  auto q = testing::three_clients();
  group_round never;
  check_step(never.sit_out(false, q), true, false, false);
  CHECK_FALSE(never.sitting_out()); // nothing was announced to sit out
  CHECK(q.participants().size() == 3);
}

TEST_CASE("group round: a streaming round commits once position 0 holds "
          "min_clients, with the figures of then") {
  auto r = testing::three_clients();
  offer(r, "A", 1.0, 0, 1);
  offer(r, "B", 3.0, 0, 1);
  group_round g;
  CHECK_FALSE(g.settle(100, 0.0, r, 2)); // nothing settled at position 0
  r.leave("C");
  r.leave("B");
  CHECK_FALSE(g.settle(100, 2.0, r, 2)); // A alone: short of min_clients
  CHECK_FALSE(g.streaming());
  g.keep_cut(1); // B left with chunks in the sum
  auto step = g.settle(100, 2.0, r, 2);
  REQUIRE(step);
  CHECK(g.streaming());
  CHECK(step->weight == 2.0);
  CHECK(step->loss == 2.0);
  CHECK(step->clients == 2);
  CHECK(step->ready == 100);
  // Committed: later steps keep the figures, and it never falls short.
  r.leave("A");
  offer(r, "A", 9.0, 0, 1);
  auto later = g.settle(300, 2.0, r, 2);
  REQUIRE(later);
  CHECK(later->loss == 2.0);
  CHECK(later->clients == 2);
  CHECK(later->ready == 300);
  CHECK_FALSE(g.falls_short(0, 2));
}

TEST_CASE("group round: a round sat out settles nothing") {
  auto r = testing::three_clients();
  group_round g;
  g.sit_out(true, r);
  CHECK_FALSE(g.settle(100, 3.0, r, 1));
}

TEST_CASE("group round: its log lines say why the round is sat out, and "
          "when") {
  const std::string why = "round 2 failed: only 1 of 3 clients can still "
                          "deliver (missing: B, C), min_clients is 2";
  CHECK(group_round::waits_note(why) ==
        why + "; the relay sits its parent's round out once the updates "
              "under way have closed");
  group_round::sit_out_step first;
  first.first = true;
  CHECK(group_round::sits_out_note(why, first, 2) ==
        why + "; the relay sits its parent's round out (its group offers "
              "nothing) and takes the next");
  CHECK(group_round::sits_out_note(why, {}, 2) ==
        "round 2: the updates under way have closed; the relay sits its "
        "parent's round out (its group offers nothing) and takes the next");
}
