// A SyncScheduler's roster driven by hand: registration, the round's
// sample, offers and closes, how a drop leaves the round under each
// partial_updates mode, the deadline's cut, a collection again, and the
// figures a round publishes.

#include <doctest/doctest.h>

#include "protocol/round_roster.hpp"
#include "tests/protocol/round_fixtures.hpp"

using namespace fedcaf;
using fedcaf::testing::offer;
using ids = std::set<std::string>;
using dropped = round_roster::dropped;

TEST_CASE("round roster: every registered client takes part, or a "
          "reproducible sample of clients_per_round") {
  auto r = testing::three_clients();
  CHECK(r.round() == 1);
  CHECK(r.participants() == ids{"A", "B", "C"});
  CHECK(r.address_of("B") == "host-B");
  CHECK(r.address_of("Z").empty());
  round_roster::terms t;
  t.clients_per_round = 2;
  round_roster s(t), again(t);
  for (auto id : {"A", "B", "C", "D", "E"}) {
    s.join(id, "");
    again.join(id, "");
  }
  bool differs = false;
  for (uint32_t round = 1; round <= 8; ++round) {
    s.start(round);
    again.start(round);
    CHECK(s.participants().size() == 2);
    CHECK(s.participants() == again.participants()); // seed and round
    for (const auto& id : s.participants())
      CHECK(s.registered().count(id));
    s.start(1);
    auto first = s.participants();
    s.start(round);
    differs = differs || s.participants() != first;
  }
  CHECK(differs);
  // As many registered as sampled, or fewer: all of them.
  s.unregister("A");
  s.unregister("B");
  s.unregister("C");
  s.start(9);
  CHECK(s.participants() == ids{"D", "E"});
}

TEST_CASE("round roster: an offer is seen by the admission and its figures "
          "are kept from the first") {
  auto r = testing::three_clients();
  auto v = r.view_of("A", false, false);
  CHECK(v.open_round == 1);
  CHECK(v.registered);
  CHECK(v.participant);
  CHECK_FALSE(v.offered);
  CHECK_FALSE(r.close("A")); // not offered: ignored
  CHECK(r.closed().empty());
  offer(r, "A", 0.5, 1.0, 3);
  offer(r, "A", 9.0, 9.0, 9); // a resume keeps the weight it opened with
  CHECK(r.view_of("A", true, true).offered);
  CHECK(r.view_of("A", true, true).finalizing);
  CHECK(r.view_of("A", true, true).sitting_out);
  CHECK(r.close("A"));
  CHECK(r.closed_weight() == 3.0);
  CHECK(r.mean_offered_loss() == 0.5);
  // A loss counts within +-max_figure_magnitude (the sums stay finite).
  offer(r, "B", 1e300);
  CHECK(r.mean_offered_loss() == (0.5 + msg::max_figure_magnitude) / 2);
  CHECK(r.awaiting_updates());
  CHECK_FALSE(r.all_closed());
  CHECK(r.leave("B"));
  CHECK_FALSE(r.leave("B"));
  CHECK(r.view_of("B", false, false).missing);
  CHECK_FALSE(r.view_of("B", false, false).participant);
  r.unregister("C");
  CHECK_FALSE(r.view_of("C", false, false).registered);
  CHECK(r.view_of("C", false, false).participant); // until it is dropped
}

TEST_CASE("round roster: a drop leaves the round as partial_updates and "
          "streaming say") {
  SUBCASE("before an offer, or not in the round") {
    auto r = testing::three_clients();
    CHECK(r.drop("A", false) == dropped::before_offer);
    CHECK(r.missing() == ids{"A"});
    CHECK(r.drop("A", false) == dropped::not_in_round);
  }
  SUBCASE("discard: mid-upload its figures go; delivered, the others are "
          "collected again") {
    auto r = testing::three_clients();
    offer(r, "A", 1, 0, 1);
    offer(r, "B", 2, 0, 1);
    r.close("B");
    CHECK(r.drop("A", false) == dropped::partial_dropped);
    CHECK(r.drop("B", false) == dropped::collect_again);
    CHECK(r.offered().empty());
    CHECK(r.closed().empty());
    CHECK(r.figures({}).dp_epsilon == 0);
    CHECK(r.mean_offered_loss() == 0); // no figures left
  }
  SUBCASE("finalizing: an update in the model is forgotten") {
    auto r = testing::three_clients();
    offer(r, "A", 1, 0, 1);
    offer(r, "B", 1, 0, 1);
    r.close("B");
    CHECK(r.drop("A", true) == dropped::forgotten);
    CHECK(r.drop("B", true) == dropped::forgotten);
    CHECK(r.offered().empty());
  }
  SUBCASE("keep: mid-upload its figures stay") {
    round_roster::terms t;
    t.keep_partial = true;
    auto r = testing::three_clients(t);
    offer(r, "A", 4, 2.5, 1);
    offer(r, "B", 1, 0, 1);
    r.close("B");
    CHECK(r.drop("A", false) == dropped::partial_kept);
    CHECK(r.offered() == ids{"B"});
    CHECK(r.figures({}).dp_epsilon == 2.5); // its data is in the model
    CHECK(r.drop("B", false) == dropped::collect_again); // delivered whole
  }
  SUBCASE("a streaming relay keeps both, figures too") {
    round_roster::terms t;
    t.stream_sums = true;
    auto r = testing::three_clients(t);
    offer(r, "A", 2, 0, 1);
    offer(r, "B", 4, 0, 1);
    r.close("B");
    CHECK(r.drop("A", false) == dropped::cut_streamed);
    CHECK(r.drop("B", true) == dropped::whole_streamed);
    CHECK(r.offered().empty());
    CHECK(r.closed().empty());
    CHECK(r.mean_offered_loss() == 3.0);
  }
}

TEST_CASE("round roster: the deadline takes out who never offered, or waits "
          "for min_clients") {
  auto r = testing::three_clients();
  offer(r, "A", 1, 0, 1);
  offer(r, "B", 1, 0, 1);
  r.close("A");
  auto waits = r.cut_at_deadline(2, true);
  CHECK(waits.wait);
  CHECK(r.overdue());
  CHECK(r.participants().size() == 3); // nobody cut yet
  r.close("B");
  auto cut = r.cut_at_deadline(2, true);
  CHECK_FALSE(cut.wait);
  CHECK_FALSE(r.overdue());
  CHECK(cut.not_offered == ids{"C"});
  CHECK(r.participants() == ids{"A", "B"});
  CHECK(r.missing() == ids{"C"});
  CHECK(r.all_closed());
  r.start(2);
  CHECK_FALSE(r.overdue());
  CHECK(r.missing().empty());
}

TEST_CASE("round roster: uploads without a stream, a sit-out's cut, and a "
          "collection again") {
  auto r = testing::three_clients();
  offer(r, "A", 1, 0, 1);
  offer(r, "B", 1, 0, 1);
  r.leave_without_stream({"A", "Z"});
  CHECK(r.participants() == ids{"B", "C"});
  CHECK(r.offered() == ids{"B"});
  CHECK(r.missing() == ids{"A"});
  r.leave_unoffered();
  CHECK(r.participants() == ids{"B"});
  CHECK(r.missing() == ids{"A", "C"});
  r.close("B");
  CHECK(r.collect_again() == std::vector<std::string>{"B"});
  CHECK(r.offered().empty());
  CHECK(r.closed().empty());
  CHECK(r.mean_offered_loss() == 1.0); // a repeated offer keeps its figures
}

TEST_CASE("round roster: a round publishes its closed updates' figures and "
          "names every known client not in it") {
  auto r = testing::three_clients();
  r.join("R", "host-R");
  r.start(1);
  offer(r, "A", 1.0, 0.5, 2);
  offer(r, "B", 3.0, 1.5, 4);
  offer(r, "R", 5.0, 0.0, 6);
  r.close("A");
  r.close("R");
  r.unregister("C"); // dropped: still known to the run
  auto f = r.figures({{"R", 8}});
  CHECK(f.clients == 2);
  CHECK(f.loss == 3.0);
  CHECK(f.dp_epsilon == 1.5); // B offered: its epsilon counts
  CHECK(f.missing == std::vector<std::string>{"B", "C"});
  CHECK(f.contributors == std::vector<std::string>{"A", "R"});
  REQUIRE(f.relay_weights.size() == 1);
  CHECK(f.relay_weights[0].first == "R");
  CHECK(f.relay_weights[0].second == 6.0);
  CHECK(r.closed_weight() == 8.0);
  CHECK(r.mean_offered_loss() == 3.0);
}

TEST_CASE("round roster: its log lines name the round and the clients") {
  auto r = testing::three_clients();
  offer(r, "A");
  offer(r, "C");
  CHECK(r.collecting_again("B", "it was dropped mid-upload") ==
        "round 1: B left: it was dropped mid-upload; collecting the updates "
        "of A, C again");
  r.leave("B");
  r.leave("C");
  CHECK(r.short_of_clients(3, 2) ==
        "round 1 failed: only 1 of 3 clients can still deliver (missing: B, "
        "C), min_clients is 2");
  CHECK(round_roster::dropped_note(2, "D", dropped::partial_kept, 3) ==
        "round 2: D was dropped mid-upload; its 3 delivered chunks are kept");
  CHECK(round_roster::dropped_note(2, "D", dropped::cut_streamed, 0) ==
        "round 2: D was dropped mid-upload; its 0 delivered chunks stay in "
        "the relay's sum");
  CHECK(round_roster::dropped_note(2, "D", dropped::partial_dropped, 0) ==
        "round 2: D was dropped before sending a chunk");
  round_roster none({});
  none.join("A", "");
  none.start(4);
  CHECK(none.cannot_start(2) ==
        "round 4 cannot start: 1 clients are registered, min_clients is 2");
}
