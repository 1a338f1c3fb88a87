// The schedulers' admission of offers driven by hand: every answer of the
// SyncScheduler's rules (answered, refused, sat out, admitted with a
// weight), the AsyncScheduler's task checks and staleness weights, and the
// refused-vs-answered line that answer_frame draws for both.

#include <doctest/doctest.h>

#include "protocol/offer_admission.hpp"

using namespace fedcaf;
using kind = offer_verdict::kind;

namespace {

msg::offer offer_of(const std::string& id, uint32_t round,
                    uint64_t samples = 10, bool partial_sum = false) {
  msg::offer o;
  o.client_id = id;
  o.round = round;
  o.sample_count = samples;
  o.partial_sum = partial_sum;
  return o;
}

/// Round 3, open; `id` registered and a participant that has not offered.
round_view open_round() {
  round_view r;
  r.open_round = 3;
  r.registered = true;
  r.participant = true;
  return r;
}

void check_verdict(const offer_verdict& v, kind outcome, errc code,
                   const std::string& message) {
  CHECK(v.outcome == outcome);
  CHECK(v.answer.code == code);
  CHECK(v.answer.message == message);
}

} // namespace

TEST_CASE("offer admission: offers of another round, or of a round that "
          "takes no offers, are answered or refused") {
  admission_terms terms;
  auto r = open_round();
  check_verdict(admit_round_offer(offer_of("A", 2), r, terms), kind::answered,
                errc::not_in_round, "round 2 is over; open round is 3");
  check_verdict(admit_round_offer(offer_of("A", 4), r, terms), kind::refused,
                errc::wrong_round, "offer for round 4, open round is 3");
  r.finalizing = true;
  check_verdict(admit_round_offer(offer_of("A", 3), r, terms), kind::answered,
                errc::not_in_round, "round 3 is being finalized");
  // A past round is answered even while the open one finalizes; a later
  // one is refused.
  CHECK(admit_round_offer(offer_of("A", 1), r, terms).outcome ==
        kind::answered);
  CHECK(admit_round_offer(offer_of("A", 9), r, terms).outcome == kind::refused);
  r = open_round();
  r.sitting_out = true;
  check_verdict(admit_round_offer(offer_of("A", 3), r, terms), kind::answered,
                errc::not_in_round,
                "round 3 is sat out: the relay's children are fewer than "
                "its min_clients");
}

TEST_CASE("offer admission: a client unknown, or not in the round, is "
          "refused") {
  admission_terms terms;
  auto r = open_round();
  r.registered = false;
  check_verdict(admit_round_offer(offer_of("M", 3), r, terms), kind::refused,
                errc::unknown_client, "M");
  // Unknown comes before a round sat out: a stranger is refused.
  r.sitting_out = true;
  CHECK(admit_round_offer(offer_of("M", 3), r, terms).outcome == kind::refused);
  r = open_round();
  r.participant = false;
  check_verdict(admit_round_offer(offer_of("L", 3), r, terms), kind::refused,
                errc::not_in_round,
                "L is not in round 3 (it joined after the round started); it "
                "takes part in the next");
  r.missing = true;
  check_verdict(
      admit_round_offer(offer_of("L", 3), r, terms), kind::refused,
      errc::not_in_round,
      "L is not in round 3 (it left it: missed the deadline, or its update "
      "was refused); it takes part "
      "in the next");
}

TEST_CASE("offer admission: a client weighs 1, or its sample count capped "
          "at max_sample_size") {
  admission_terms terms;
  auto r = open_round();
  auto v = admit_round_offer(offer_of("A", 3, 500), r, terms);
  CHECK(v.admitted());
  CHECK(v.weight == 1.0);
  // Equal weights take an offer of 0 samples.
  CHECK(admit_round_offer(offer_of("A", 3, 0), r, terms).weight == 1.0);
  terms.weights = client_weighting::sample_size;
  CHECK(admit_round_offer(offer_of("A", 3, 500), r, terms).weight == 500.0);
  terms.max_sample_size = 100;
  CHECK(admit_round_offer(offer_of("A", 3, 500), r, terms).weight == 100.0);
  CHECK(admit_round_offer(offer_of("A", 3, 99), r, terms).weight == 99.0);
  check_verdict(admit_round_offer(offer_of("A", 3, 0), r, terms), kind::refused,
                errc::out_of_range,
                "A offered an update of 0 samples, which sample_size weights "
                "cannot average");
}

TEST_CASE("offer admission: only relays offer partial sums, and they must") {
  admission_terms terms;
  terms.relays = {{"R", 4}};
  auto r = open_round();
  check_verdict(admit_round_offer(offer_of("A", 3, 2, true), r, terms),
                kind::refused, errc::not_authorized,
                "A offered a partial sum, which only a relay in "
                "server_configs.relays may");
  check_verdict(admit_round_offer(offer_of("R", 3, 2, false), r, terms),
                kind::refused, errc::not_authorized,
                "R is a relay in server_configs.relays and must offer a "
                "partial sum");
}

TEST_CASE("offer admission: a relay weighs its sum's weight, bounded by its "
          "clients") {
  admission_terms terms;
  terms.relays = {{"R", 4}};
  auto r = open_round();
  auto v = admit_round_offer(offer_of("R", 3, 3, true), r, terms);
  CHECK(v.admitted());
  CHECK(v.weight == 3.0);
  CHECK(admit_round_offer(offer_of("R", 3, 4, true), r, terms).weight == 4.0);
  check_verdict(admit_round_offer(offer_of("R", 3, 5, true), r, terms),
                kind::refused, errc::out_of_range,
                "R offered a partial sum of weight 5; a relay of at most 4 "
                "clients weighs 1 to 4");
  // sample_size: each client weighs at most max_sample_size (2^20 unset).
  terms.weights = client_weighting::sample_size;
  CHECK(
      admit_round_offer(offer_of("R", 3, 4u << 20, true), r, terms).admitted());
  check_verdict(
      admit_round_offer(offer_of("R", 3, (4u << 20) + 1, true), r, terms),
      kind::refused, errc::out_of_range,
      "R offered a partial sum of weight 4194305; a relay of at most "
      "4 clients weighs 1 to 4194304");
  terms.max_sample_size = 10;
  CHECK(admit_round_offer(offer_of("R", 3, 40, true), r, terms).weight == 40.0);
  CHECK(admit_round_offer(offer_of("R", 3, 41, true), r, terms).outcome ==
        kind::refused);
}

TEST_CASE("offer admission: a relay's sum of weight 0 sits the round out, "
          "once") {
  admission_terms terms;
  terms.relays = {{"R", 4}};
  auto r = open_round();
  check_verdict(admit_round_offer(offer_of("R", 3, 0, true), r, terms),
                kind::sits_out, errc::not_in_round,
                "R sits round 3 out: its group has no update");
  CHECK(relay_without_sum(3, "R") ==
        "round 3: relay R has no partial sum (its own round fell short of its "
        "min_clients); it leaves the round");
  // A restarted relay that offered a sum already: the first one decides.
  r.offered = true;
  check_verdict(admit_round_offer(offer_of("R", 3, 0, true), r, terms),
                kind::answered, errc::not_in_round,
                "R offered a sum of round 3 already, which stands or falls "
                "on its own");
}

TEST_CASE("offer admission: a refusal is counted and logged, any other "
          "answer only encoded") {
  auto counter = make_refusal_counter();
  refusal_log log("scheduler", counter);
  admission_terms terms;
  auto r = open_round();
  auto answered = admit_round_offer(offer_of("A", 1), r, terms);
  CHECK_FALSE(answered.counted());
  auto f = answer_frame(answered, log);
  CHECK(counter->load() == 0);
  auto e = msg::error_in(f);
  REQUIRE(e);
  CHECK(e->code == errc::not_in_round);
  CHECK(e->message == answered.answer.message);
  auto refused = admit_round_offer(offer_of("A", 7), r, terms);
  CHECK(refused.counted());
  auto g = answer_frame(refused, log);
  CHECK(counter->load() == 1);
  REQUIRE(msg::error_in(g));
  CHECK(msg::error_in(g)->code == errc::wrong_round);
  terms.relays = {{"R", 1}};
  auto sat_out = admit_round_offer(offer_of("R", 3, 0, true), r, terms);
  CHECK_FALSE(sat_out.counted());
  answer_frame(sat_out, log);
  CHECK(counter->load() == 1);
}

TEST_CASE("offer admission: an async offer needs the task it names, and the "
          "run open") {
  auto o = offer_of("A", 5);
  CHECK_FALSE(check_task_offer(o, task_info{5, 0}, false));
  auto none = check_task_offer(o, std::nullopt, false);
  REQUIRE(none);
  check_verdict(*none, kind::refused, errc::wrong_round,
                "offer of A for task 5 it does not hold");
  auto other = check_task_offer(o, task_info{6, 0}, false);
  REQUIRE(other);
  CHECK(other->counted());
  // After the last step nobody is refused: the client sits it out.
  auto ended = check_task_offer(o, task_info{5, 0}, true);
  REQUIRE(ended);
  check_verdict(*ended, kind::answered, errc::not_in_round,
                "the run has ended");
  check_verdict(run_ended_answer(), kind::answered, errc::not_in_round,
                "the run has ended");
}

TEST_CASE("offer admission: an async update weighs s(staleness), times alpha "
          "under FedAsync") {
  rule_config cfg;
  cfg.alpha = 0.5;
  cfg.staleness_fn = staleness_kind::polynomial;
  cfg.staleness_a = 1.0;
  auto o = offer_of("A", 5);
  // Trained on version 0, the newest is 3: staleness 3, s = 1/4.
  auto buff =
      admit_task_offer(o, task_info{5, 0}, 3, server_rule::fedbuff, cfg);
  CHECK(buff.admitted());
  CHECK(buff.weight == doctest::Approx(0.25));
  auto async =
      admit_task_offer(o, task_info{5, 0}, 3, server_rule::fedasync, cfg);
  CHECK(async.weight == doctest::Approx(0.125));
  auto fresh =
      admit_task_offer(o, task_info{5, 3}, 3, server_rule::fedbuff, cfg);
  CHECK(fresh.weight == doctest::Approx(1.0));
  // The client holds another task now (or none): the queued offer is stale.
  check_verdict(
      admit_task_offer(o, task_info{6, 1}, 3, server_rule::fedbuff, cfg),
      kind::refused, errc::wrong_round, "stale offer");
  CHECK(admit_task_offer(o, std::nullopt, 3, server_rule::fedbuff, cfg)
            .counted());
}
