// A relay's aggregator's bookkeeping (protocol/relay_checks): one truth
// for an early offer, g measured as the parent's model arrives, a
// streaming round's weight and the scaling of its positions, a ram-mode
// sum scaled to its round's weight, and the chunks parked for g.

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "protocol/relay_checks.hpp"
#include "protocol/relay_residency.hpp"

using namespace fedcaf;

namespace {

/// 1300 floats (w: 1000, b: 300), value 1 + i, in `chunk_bytes` chunks.
manifest layout_of() {
  manifest m;
  m.tensors = {make_tensor_info("w", dtype::float32, {1000}),
               make_tensor_info("b", dtype::float32, {300})};
  return m;
}

chunk_plan plan_of(uint64_t chunk_bytes = 1024) {
  auto plan = chunk_plan::make(layout_of(), chunk_bytes);
  REQUIRE(plan);
  return std::move(*plan);
}

byte_buffer counting() {
  auto bytes = byte_buffer::uninitialized(layout_of().total_bytes());
  auto* f = reinterpret_cast<float*>(bytes.data());
  for (size_t i = 0; i < 1300; ++i)
    f[i] = 1.0f + static_cast<float>(i);
  return bytes;
}

relay_model arriving_model() {
  auto s = std::make_shared<model_snapshot>();
  s->layout = layout_of();
  return relay_model{s, std::make_shared<model_arrival>()};
}

} // namespace

TEST_CASE("an offer before the relay's model is whole is refused by the "
          "truth the server sets, which a model given up never meets") {
  auto plan = plan_of();
  relay_checks checks{plan, false};
  CHECK_FALSE(checks.refuse_offer("A")); // no relay model: a plain server
  auto m = arriving_model();
  CHECK(checks.adopt(m, {}, {})); // measured as it arrives
  auto early = checks.refuse_offer("A");
  REQUIRE(early);
  CHECK(early->code == errc::unexpected_message);
  CHECK(early->message.find("A offered an update before") == 0);
  m.arrival->complete(); // the server saw the last byte
  CHECK_FALSE(checks.refuse_offer("A"));
  m.arrival->give_up(); // the run ended, or a newer model came
  CHECK(checks.refuse_offer("A"));
  model_arrival given_up;
  given_up.give_up();
  given_up.complete(); // too late: never whole again
  CHECK_FALSE(given_up.whole());
}

TEST_CASE("a relay's g is measured position by position as it arrives, in "
          "window mode only") {
  auto plan = plan_of(1024); // positions of 256 floats, the last of 20
  relay_checks checks{plan, true};
  // Without a residency (ram, disk): measured whole at the end.
  CHECK(checks.adopt(arriving_model(), {}, {}));
  auto none = checks.measurable(5000);
  CHECK(none.first == none.second);
  // With one (window): the positions wholly in.
  auto memory = byte_buffer::anonymous(layout_of().total_bytes());
  REQUIRE(memory);
  auto m = arriving_model();
  m.residency =
      std::make_shared<relay_residency>(memory->share(), plan_of(1024), 2);
  CHECK(checks.adopt(
      m, [](uint64_t) {}, [] {}));
  REQUIRE(checks.residency());
  auto [from, to] = checks.measurable(2100); // positions 0 and 1 (2048)
  CHECK(from == 0);
  CHECK(to == 2);
  checks.measured(to);
  auto rest = checks.measurable(layout_of().total_bytes());
  CHECK(rest.first == 2);
  CHECK(rest.second == plan.chunk_count());
  checks.measured_all();
  CHECK_FALSE(checks.measuring());
}

TEST_CASE("a streaming relay's round weighs what its position 0 holds, "
          "and a position of another weight is scaled to it") {
  auto plan = plan_of();
  relay_checks checks{plan, true};
  CHECK(checks.stream_opened(4));
  CHECK_FALSE(checks.stream_opened(4)); // the round's first upload only
  CHECK(checks.stream_round() == 4);
  auto first = checks.stream_scale(0, 3);
  REQUIRE(first);
  CHECK(*first == 1.0);
  CHECK(checks.stream_weight() == 3);
  auto cut = checks.stream_scale(1, 2); // a child cut before position 1
  REQUIRE(cut);
  CHECK(*cut == doctest::Approx(1.5));
  auto nobody = checks.stream_scale(2, 0); // g, which then weighs W
  REQUIRE(nobody);
  CHECK(*nobody == 3);
  CHECK(checks.stream_opened(5));
  CHECK_FALSE(checks.stream_scale(0, 0)); // nothing in position 0: sat out
  relay_checks not_streaming{plan, false};
  CHECK_FALSE(not_streaming.stream_opened(1));
  CHECK_FALSE(not_streaming.stream_scale(0, 3));
}

TEST_CASE("a relay's sum: the positions summed over less than the round's "
          "weight are scaled to it in place, the others left as they are") {
  // 1300 floats in 1024-byte chunks: positions of 256 values (the last
  // 20). Weight 4 for the round; a child cut off after position 2 leaves
  // positions 3.. at weight 3; position 5 nobody reached (weight 0).
  auto plan = plan_of();
  auto sum = counting();
  const auto* at = sum.data();
  relay_checks::scale_sum(plan, sum, {4, 4, 4, 3, 3, 0}, 4);
  CHECK(sum.data() == at); // in place, no copy
  const auto* f = reinterpret_cast<const float*>(sum.data());
  for (size_t i = 0; i < 1300; ++i) {
    auto was = 1.0f + static_cast<float>(i);
    auto position = i / 256;
    auto want = position == 3 || position == 4
                    ? was * static_cast<float>(4.0 / 3.0)
                    : was;
    REQUIRE(f[i] == want);
  }
}

TEST_CASE("chunks parked for g wait per stream in the order they came, and "
          "go once g at their position is in") {
  parked_chunks<int> parked;
  CHECK_FALSE(parked.first());
  parked.park(1, {3, "A", {}, 30});
  parked.park(1, {4, "A", {}, 40});
  parked.park(2, {3, "B", {}, 31});
  CHECK(parked.any(1));
  CHECK(parked.next_of(1) == 5);
  std::vector<int> taken;
  auto take = [&taken](auto& c) { taken.push_back(c.reply); };
  parked.release([](uint64_t seq) { return seq == 3; }, take);
  CHECK(taken == std::vector<int>{30, 31}); // stream 1's chunk 4 waits
  CHECK(parked.any(1));
  CHECK_FALSE(parked.any(2));
  auto rest = parked.take_stream(1);
  REQUIRE(rest.size() == 1);
  CHECK(rest.front().seq == 4);
  CHECK_FALSE(parked.first());
}
