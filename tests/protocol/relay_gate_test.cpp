// A relay's round gate driven by hand: starts held for the parent's model,
// sit-outs before it (chosen again), with it in, and of an open round.

#include <doctest/doctest.h>

#include "protocol/relay_gate.hpp"

using namespace fedcaf;

TEST_CASE("relay gate: a round opens once the parent's model is in") {
  relay_gate g;
  CHECK_FALSE(g.start(1, {"A", "B"})); // no model yet: held
  auto r = g.model_in();
  REQUIRE(r.start);
  CHECK(r.start->round == 1);
  CHECK(r.start->chosen == std::vector<std::string>{"A", "B"});
  CHECK_FALSE(r.choose_again);
  CHECK(g.start(1, r.start->chosen)); // the model is in: it opens
  g.published();
  CHECK_FALSE(g.start(2, {"A"})); // the next one waits for the next model
}

TEST_CASE("relay gate: a model that comes first opens the next start at "
          "once") {
  relay_gate g;
  auto r = g.model_in();
  CHECK_FALSE(r.start);
  CHECK_FALSE(r.choose_again);
  CHECK(g.start(1, {"A"}));
}

TEST_CASE("relay gate: a sit-out before the model waits for it and drops a "
          "held start, the round is chosen again") {
  relay_gate g;
  CHECK_FALSE(g.start(3, {"A", "B"}));
  CHECK(g.sit_out(3) == relay_gate::sitting::waits);
  auto r = g.model_in();
  CHECK_FALSE(r.start); // dropped: it must not open with nobody in it
  REQUIRE(r.choose_again);
  CHECK(*r.choose_again == 3);
  // Chosen again: enough children now, it opens on the model that is in.
  CHECK(g.start(3, {"A", "C"}));
}

TEST_CASE("relay gate: a sit-out with the model in, or of an open round, is "
          "now") {
  relay_gate g;
  g.model_in();
  CHECK(g.sit_out(1) == relay_gate::sitting::now);
  CHECK_FALSE(g.start(2, {"A"})); // the model was used up: the next waits
  CHECK(g.model_in().start);
  CHECK(g.start(2, {"A"}));
  CHECK(g.sit_out(2) == relay_gate::sitting::now_open_round);
  CHECK_FALSE(g.start(3, {"A"}));
}

TEST_CASE("relay gate: the run's end takes a waiting sit-out once") {
  relay_gate g;
  CHECK(g.sit_out(1) == relay_gate::sitting::waits);
  CHECK(g.take_waiting_sit_out() == std::optional<uint32_t>{1});
  CHECK_FALSE(g.take_waiting_sit_out());
  auto r = g.model_in();
  CHECK_FALSE(r.choose_again);
}
