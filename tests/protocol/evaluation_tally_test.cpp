// Federated evaluation on the server: one evaluation per client and model,
// of the model served now or the one before, weighted as the client's
// update is (capped sample counts, never above its offer's); completeness;
// the final pass and its log lines.

#include <doctest/doctest.h>

#include "protocol/evaluation_tally.hpp"

using namespace fedcaf;

namespace {

msg::evaluation eval(uint32_t round, uint64_t samples, double accuracy) {
  return msg::evaluation{round, samples, {{"accuracy", accuracy}}};
}

/// Round 1's mean after A and B evaluate 5000 samples at 0.8 and Mallory
/// claims 2^40 at 0.99.
client_figures with_a_liar(evaluation_tally& t) {
  t.serve(1);
  t.expect(3);
  REQUIRE(t.add("A", eval(1, 5000, 0.8)));
  REQUIRE(t.add("B", eval(1, 5000, 0.8)));
  auto m = t.add("Mallory", eval(1, uint64_t{1} << 40, 0.99));
  REQUIRE(m);
  return (*m)->sum.mean();
}

} // namespace

TEST_CASE("evaluation tally: sample counts are capped") {
  evaluation_tally capped{100, true};
  CHECK(capped.capped(1000) == 100);
  CHECK(capped.capped(7) == 7);
  evaluation_tally open{0, true};
  CHECK(open.capped(uint64_t{1} << 50) == msg::max_evaluation_samples);
}

TEST_CASE("evaluation tally: evaluations are weighted by capped samples") {
  evaluation_tally t{100, true};
  t.serve(1);
  t.expect(2);
  auto a = t.add("A", eval(1, 1000, 1.0)); // counts as 100 samples
  REQUIRE(a);
  CHECK_FALSE(t.complete(**a));
  auto b = t.add("B", eval(1, 100, 0.0));
  REQUIRE(b);
  CHECK(*a == *b);
  CHECK(t.complete(**b));
  CHECK(t.all_answered(**b));
  auto m = (*b)->sum.mean();
  CHECK(m.samples == 200);
  REQUIRE(m.find("accuracy"));
  CHECK(*m.find("accuracy") == doctest::Approx(0.5));
}

TEST_CASE("evaluation tally: once per client and model, of the model served "
          "now or the one before") {
  evaluation_tally t{0, true};
  t.serve(1);
  t.expect(1);
  REQUIRE(t.add("A", eval(1, 10, 0.5)));
  auto twice = t.add("A", eval(1, 10, 0.5));
  REQUIRE_FALSE(twice);
  CHECK(twice.err().code == errc::bad_sequence);
  CHECK(twice.err().message == "A evaluated round 1's model a second time");
  t.serve(2);
  auto late = t.add("B", eval(1, 10, 0.5)); // the model before: taken
  REQUIRE(late);
  CHECK((*late)->round == 1);
  CHECK_FALSE(t.complete(**late)); // not the model served now
  CHECK(t.all_answered(**late));
  t.serve(3);
  auto stale = t.add("C", eval(1, 10, 0.5));
  REQUIRE_FALSE(stale);
  CHECK(stale.err().code == errc::wrong_round);
  CHECK(stale.err().message ==
        "C evaluated the model of round 1; the model served is 3's");
}

TEST_CASE("evaluation tally: the final pass expects every connected client") {
  evaluation_tally t{0, true};
  t.serve(5);
  t.expect(3);
  CHECK_FALSE(t.final_pass());
  t.begin_final_pass(2);
  CHECK(t.final_pass());
  CHECK(t.expected() == 2);
  REQUIRE(t.add("A", eval(5, 10, 0.5)));
  CHECK(t.overdue_line() ==
        "final evaluation: 1 of 2 clients answered within the time limit");
  auto b = t.add("B", eval(5, 10, 0.5));
  REQUIRE(b);
  CHECK(t.complete(**b));
}

TEST_CASE("evaluation tally: the initial model's line names each figure") {
  evaluation_tally t{0, true};
  t.expect(1);
  auto a = t.add("A", msg::evaluation{0, 4, {{"accuracy", 0.25}}});
  REQUIRE(a);
  CHECK(evaluation_tally::initial_line(**a) ==
        "clients' evaluation of the initial model: accuracy 0.250000");
}

TEST_CASE("evaluation tally: under equal weights every evaluation weighs 1, "
          "whatever it claims") {
  evaluation_tally t{uint64_t{1} << 20, false};
  CHECK(t.offered("A", 5000) == 1);
  auto mean = with_a_liar(t);
  CHECK(mean.samples == 3);
  // Three reported: the highest (the liar's) and the lowest are left out.
  CHECK(*mean.find("accuracy") == doctest::Approx(0.8));
}

TEST_CASE("evaluation tally: under sample_size an evaluation weighs at most "
          "what its client's last offer did") {
  evaluation_tally t{uint64_t{1} << 20, true};
  CHECK(t.offered("A", 30000) == 30000);
  CHECK(t.offered("B", 30000) == 30000);
  CHECK(t.offered("Mallory", 100) == 100);
  CHECK(t.weight_of("A", 5000) == 5000);
  CHECK(t.weight_of("Mallory", uint64_t{1} << 40) == 100);
  CHECK(t.weight_of("Unknown", uint64_t{1} << 40) == uint64_t{1} << 20);
  auto mean = with_a_liar(t);
  CHECK(mean.samples == 10100);
  CHECK(*mean.find("accuracy") == doctest::Approx(0.8)); // the liar's left out
  // An offer's claim is capped too: 2^64 - 1 samples weigh 2^20.
  CHECK(t.offered("Mallory", ~uint64_t{0}) == uint64_t{1} << 20);
}

TEST_CASE("evaluation tally: under equal weights a relay's evaluation weighs "
          "what its partial sum did (its children), never more") {
  evaluation_tally t{uint64_t{1} << 20, false};
  CHECK(t.offered("A", 5000) == 1);
  CHECK(t.offered("RA", 2, true) == 2); // a partial sum of 2 clients
  CHECK(t.offered("RB", 3, true) == 3);
  CHECK(t.weight_of("A", 5000) == 1);
  CHECK(t.weight_of("RA", 2) == 2);
  CHECK(t.weight_of("RA", uint64_t{1} << 40) == 2); // at most its offer's
  CHECK(t.weight_of("RB", 1) == 1); // fewer of its children evaluated
  t.serve(4);
  t.expect(2);
  REQUIRE(t.add("RA", eval(4, 2, 0.80)));
  auto m = t.add("RB", eval(4, 3, 0.90));
  REQUIRE(m);
  auto mean = (*m)->sum.mean();
  CHECK(mean.samples == 5);
  CHECK(*mean.find("accuracy") == doctest::Approx((2 * 0.8 + 3 * 0.9) / 5));
  // The evaluations of round 4's model, the one served now; then the one
  // before; none of older rounds.
  CHECK(t.evaluations_of(4) == &t.current());
  t.serve(5);
  REQUIRE(t.evaluations_of(4));
  CHECK(t.evaluations_of(4)->by.size() == 2);
  CHECK(t.evaluations_of(3) == nullptr);
}
