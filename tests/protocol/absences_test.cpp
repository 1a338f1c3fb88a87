// Clients that miss rounds: passed over until heard from, then for 2^(m-1)
// rounds after their m-th miss in a row; a delivered update forgets them.
// Driven by hand, and through a roster whose deadline cuts a client that
// never offers.

#include <doctest/doctest.h>

#include "protocol/absences.hpp"
#include "protocol/round_roster.hpp"
#include "tests/protocol/round_fixtures.hpp"

using namespace fedcaf;
using fedcaf::testing::offer;
using ids = std::set<std::string>;

TEST_CASE("absences: a miss passes a client over until it is heard from, "
          "then for 2^(m-1) rounds, an update forgets its misses") {
  absences a;
  CHECK(a.eligible("A", 1));
  CHECK(a.missed("A", 1) == 1);
  CHECK_FALSE(a.eligible("A", 2));
  CHECK_FALSE(a.eligible("A", 9)); // never heard from: never again
  a.heard_from("A");
  CHECK_FALSE(a.eligible("A", 2)); // 1 round passed over
  CHECK(a.eligible("A", 3));
  CHECK(a.missed("A", 3) == 2);
  a.heard_from("A");
  CHECK_FALSE(a.eligible("A", 5)); // 2 rounds passed over
  CHECK(a.eligible("A", 6));
  CHECK(a.missed("A", 6) == 3);
  a.heard_from("A");
  CHECK_FALSE(a.eligible("A", 10));
  CHECK(a.eligible("A", 11));
  a.delivered("A");
  CHECK(a.misses("A") == 0);
  CHECK(a.size() == 0);
  CHECK(absences::rounds_passed_over(0) == 0);
  CHECK(absences::rounds_passed_over(7) == 64);
  CHECK(absences::rounds_passed_over(40) == absences::max_rounds_passed_over);
  for (uint32_t m = 0; m < 40; ++m) // the count stays bounded
    a.missed("B", 100 + m);
  CHECK(a.misses("B") <= 32);
  a.heard_from("B");
  CHECK_FALSE(a.eligible("B", 139 + 64));
  CHECK(a.eligible("B", 139 + 65));
  CHECK(passed_over_note(4, "C", 1) ==
        "round 4: the deadline passed without an update from C (1 round "
        "missed in a row: not chosen again until it is heard from "
        "(registers again or offers), then after 1 round)");
}

TEST_CASE("round roster: a client that never offers is cut at round 1's "
          "deadline and not drawn again while silent, back (registered "
          "again, or offering late) it is drawn after its rounds passed "
          "over, and an update forgets its misses") {
  auto r = testing::three_clients();
  offer(r, "A");
  offer(r, "B");
  r.close("A");
  r.close("B");
  auto cut = r.cut_at_deadline(2, false);
  CHECK(cut.not_offered == ids{"C"});
  CHECK(r.misses("C") == 1);
  for (uint32_t round = 2; round <= 6; ++round) {
    r.start(round); // C stays registered, silent
    CHECK(r.participants() == ids{"A", "B"});
    CHECK(r.registered().count("C"));
  }
  r.heard_from("C"); // a late offer
  r.start(7);
  CHECK(r.participants() == ids{"A", "B", "C"});
  for (auto id : {"A", "B"}) {
    offer(r, id);
    r.close(id);
  }
  CHECK(r.cut_at_deadline(2, false).not_offered == ids{"C"}); // 2 in a row
  CHECK(r.misses("C") == 2);
  r.join("C", "host-C"); // registers again
  r.start(8);
  CHECK(r.participants() == ids{"A", "B"});
  r.start(9);
  CHECK(r.participants() == ids{"A", "B"});
  r.start(10);
  CHECK(r.participants() == ids{"A", "B", "C"});
  offer(r, "C");
  r.close("C");
  CHECK(r.misses("C") == 0);
  // A client passed over is drawn where the round needs it for min_clients.
  CHECK(r.cut_at_deadline(1, false).not_offered == ids{"A", "B"});
  r.start(11);
  CHECK(r.participants() == ids{"C"});
  r.start(11, 2);
  CHECK(r.participants() == ids{"A", "B", "C"});
}

TEST_CASE("round roster: a rejected update is a miss: its client is passed "
          "over as one that never offered") {
  auto r = testing::three_clients();
  for (auto id : {"A", "B", "C"})
    offer(r, id);
  r.close("A");
  r.close("B");
  r.leave("C");
  CHECK(r.missed("C") == 1); // rejected: too slow, or a lie
  r.start(2);
  CHECK(r.participants() == ids{"A", "B"});
  r.join("C", "host-C"); // back
  r.start(3);
  CHECK(r.participants() == ids{"A", "B", "C"});
}

TEST_CASE("round roster: clients_per_round is drawn among the clients not "
          "passed over") {
  round_roster::terms t;
  t.clients_per_round = 2;
  round_roster r(t);
  for (auto id : {"A", "B", "C"})
    r.join(id, "");
  r.start(1);
  auto first = r.participants();
  REQUIRE(first.size() == 2);
  auto silent = *first.begin();
  offer(r, *first.rbegin());
  r.close(*first.rbegin());
  r.cut_at_deadline(1, false);
  for (uint32_t round = 2; round <= 12; ++round) {
    r.start(round);
    CHECK(r.participants().size() == 2);
    CHECK_FALSE(r.participants().count(silent));
  }
}
