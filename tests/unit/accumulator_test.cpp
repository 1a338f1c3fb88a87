// Both kinds of accumulator driven through the one interface the aggregator
// uses: the same calls, in the same order, give the same model.

#include "fedcaf/accumulator.hpp"

#include <cstring>
#include <vector>

#include <doctest/doctest.h>

using namespace fedcaf;

namespace {

constexpr uint64_t model_floats = 48; // 3 chunks of 16 floats
constexpr uint32_t window = 2;

manifest floats() {
  manifest m;
  m.tensors.push_back(make_tensor_info("w", dtype::float32, {model_floats}));
  return m;
}

/// ram mode (a model-sized sum), or window mode (open positions, in place).
aggregation_plan plan_for(accumulator_kind kind, uint32_t contributors) {
  aggregation_plan p;
  p.accumulator = kind;
  p.in_place = kind == accumulator_kind::open_positions;
  p.memory_mode = p.in_place ? memory_mode::window : memory_mode::ram;
  p.position_contributors = p.in_place ? contributors : 0;
  p.max_contributors = contributors;
  return p;
}

std::unique_ptr<accumulator> make_acc(accumulator_kind kind,
                                      uint32_t contributors) {
  auto m = floats();
  auto acc = accumulator::make(m, *chunk_plan::make(m, 64),
                               plan_for(kind, contributors), window);
  REQUIRE(acc);
  return std::move(*acc);
}

byte_buffer buffer_of(const std::vector<float>& v) {
  auto out = byte_buffer::uninitialized(v.size() * sizeof(float));
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

std::vector<float> floats_of(const byte_buffer& b) {
  std::vector<float> v(b.size() / sizeof(float));
  std::memcpy(v.data(), b.data(), b.size());
  return v;
}

std::span<const std::byte> chunk_of(const std::vector<float>& v, uint64_t seq) {
  return std::as_bytes(std::span{v}.subspan(seq * 16, 16));
}

/// Folds `updates` (with `weights`) chunk by chunk, as streams in lockstep
/// do, settling whatever is ready after each fold (as the aggregator does),
/// and finalizes against `model`.
std::vector<float> run_round(accumulator& acc, byte_buffer& model,
                             const std::vector<std::vector<float>>& updates,
                             const std::vector<double>& weights) {
  for (uint64_t seq = 0; seq < 3; ++seq)
    for (size_t c = 0; c < updates.size(); ++c) {
      REQUIRE(acc.open(seq));
      REQUIRE(acc.fold(seq, chunk_of(updates[c], seq), weights[c], c + 1,
                       model.bytes()));
      while (acc.ready())
        acc.settle_next(model, nullptr, false);
    }
  auto out = acc.finalize(model, nullptr);
  REQUIRE(out);
  return floats_of(*out);
}

} // namespace

TEST_CASE("a model-sized sum and open positions give the same weighted mean "
          "through one interface") {
  std::vector<float> x(model_floats), y(model_floats);
  for (size_t i = 0; i < model_floats; ++i) {
    x[i] = static_cast<float>(i);
    y[i] = static_cast<float>(i) * 2 + 4;
  }
  std::vector<float> global(model_floats, 100.0f);
  std::vector<std::vector<float>> results;
  for (auto kind :
       {accumulator_kind::model_sum, accumulator_kind::open_positions}) {
    CAPTURE(static_cast<int>(kind));
    auto acc = make_acc(kind, 2);
    auto model = buffer_of(global);
    results.push_back(run_round(*acc, model, {x, y}, {1.0, 3.0}));
  }
  REQUIRE(results[0].size() == model_floats);
  CHECK(results[0] == results[1]);
  for (size_t i = 0; i < model_floats; ++i)
    CHECK(results[0][i] == doctest::Approx((x[i] + 3 * y[i]) / 4));
}

TEST_CASE("a model-sized sum settles a chunk as it is folded, open positions "
          "once every contributor delivered it") {
  std::vector<float> x(model_floats, 1.0f), global(model_floats, 0.0f);
  auto sum = make_acc(accumulator_kind::model_sum, 2);
  auto positions = make_acc(accumulator_kind::open_positions, 2);
  auto model = buffer_of(global);
  // A sum has no window: every chunk of the plan is open and settled.
  CHECK(sum->open(2));
  CHECK_FALSE(sum->open(3));
  CHECK(sum->settled() == 3);
  REQUIRE(sum->fold(0, chunk_of(x, 0), 1, 0, model.bytes()));
  CHECK_FALSE(sum->ready());
  // Open positions: chunk 2 lies beyond the window [0, 2).
  CHECK(positions->open(1));
  CHECK_FALSE(positions->open(2));
  CHECK_FALSE(positions->fold(2, chunk_of(x, 2), 1, 0, model.bytes()));
  REQUIRE(positions->fold(0, chunk_of(x, 0), 1, 1, model.bytes()));
  CHECK_FALSE(positions->ready()); // one of two contributions
  CHECK(positions->settled() == 0);
  REQUIRE(positions->fold(0, chunk_of(x, 0), 1, 2, model.bytes()));
  REQUIRE(positions->ready());
  positions->settle_next(model, nullptr, false);
  CHECK(positions->settled() == 1);
  CHECK(positions->overwritten_below() == 1);
  CHECK(positions->open(2));
  CHECK(floats_of(model)[0] == 1.0f); // averaged in place
  CHECK(floats_of(model)[16] == 0.0f);
}

TEST_CASE("open positions: a cut-off update is awaited below its cut only, "
          "and expect counts it where it delivered") {
  std::vector<float> x(model_floats, 2.0f), y(model_floats, 4.0f),
      z(model_floats, 9.0f);
  auto acc = make_acc(accumulator_kind::open_positions, 3);
  auto model = buffer_of(std::vector<float>(model_floats, 100.0f));
  for (const auto* u : {&x, &y, &z})
    REQUIRE(acc->fold(0, chunk_of(*u, 0), 1, 0, model.bytes()));
  REQUIRE(acc->ready());
  acc->settle_next(model, nullptr, false);
  REQUIRE(acc->fold(1, chunk_of(x, 1), 1, 0, model.bytes()));
  REQUIRE(acc->fold(1, chunk_of(z, 1), 1, 0, model.bytes()));
  acc->cut(1); // y stopped before chunk 1
  REQUIRE(acc->ready());
  acc->settle_next(model, nullptr, false);
  // z leaves the round before chunk 2 (the scheduler now counts x, y's
  // cut keeps it counted below 1 only).
  acc->expect(1);
  REQUIRE(acc->fold(2, chunk_of(x, 2), 1, 0, model.bytes()));
  REQUIRE(acc->ready());
  acc->settle_next(model, nullptr, false);
  auto out = acc->finalize(model, nullptr);
  REQUIRE(out);
  auto v = floats_of(*out);
  CHECK(v[0] == 5.0f);
  CHECK(v[16] == 5.5f);
  CHECK(v[32] == 2.0f);
  CHECK(acc->overwritten_below() == 0); // the next round writes afresh
}

TEST_CASE("both kinds measure each chunk of the new model as it is made, "
          "every round, and nothing of a round restarted or kept") {
  // The measure: each chunk's float sum, as the update bound's norm would
  // read the chunk.
  auto chunk_sum = [](uint64_t seq, std::span<const std::byte> m) {
    std::vector<float> v(16);
    std::memcpy(v.data(), m.data() + seq * 64, 64);
    double s = 0;
    for (float f : v)
      s += f;
    return s;
  };
  std::vector<float> x(model_floats), y(model_floats);
  for (size_t i = 0; i < model_floats; ++i) {
    x[i] = static_cast<float>(i) * 0.5f;
    y[i] = 9.0f - static_cast<float>(i);
  }
  for (auto kind :
       {accumulator_kind::model_sum, accumulator_kind::open_positions}) {
    CAPTURE(static_cast<int>(kind));
    auto acc = make_acc(kind, 2);
    REQUIRE(acc->observe_results(chunk_sum));
    auto model = buffer_of(std::vector<float>(model_floats, 1.0f));
    for (int round = 0; round < 3; ++round) {
      CAPTURE(round);
      auto v = run_round(*acc, model, {x, y}, {1.0, 1.0 + round});
      auto measured = acc->take_measured();
      REQUIRE(measured.size() == 3);
      auto out = buffer_of(v);
      for (uint64_t seq = 0; seq < 3; ++seq)
        CHECK(measured[seq] == chunk_sum(seq, out.bytes()));
      CHECK(acc->take_measured().empty()); // taken once
      model = std::move(out);
    }
    if (kind == accumulator_kind::model_sum)
      continue;
    // A position settled, then the round restarts: not measured whole.
    REQUIRE(acc->fold(0, chunk_of(x, 0), 1, 1, model.bytes()));
    REQUIRE(acc->fold(0, chunk_of(y, 0), 1, 2, model.bytes()));
    while (acc->ready())
      acc->settle_next(model, nullptr, false);
    acc->restart(2);
    CHECK(acc->take_measured().empty());
  }
}

TEST_CASE("a restart forgets the round's contributions but not which "
          "positions the model already holds") {
  std::vector<float> x(model_floats, 1.0f), y(model_floats, 3.0f);
  for (auto kind :
       {accumulator_kind::model_sum, accumulator_kind::open_positions}) {
    CAPTURE(static_cast<int>(kind));
    auto acc = make_acc(kind, 1);
    auto model = buffer_of(std::vector<float>(model_floats, 0.0f));
    REQUIRE(acc->fold(0, chunk_of(x, 0), 1, 0, model.bytes()));
    while (acc->ready())
      acc->settle_next(model, nullptr, false);
    auto overwritten = acc->overwritten_below();
    acc->restart(0); // open positions still await one update
    CHECK(acc->overwritten_below() == overwritten);
    auto v = run_round(*acc, model, {y}, {1.0});
    CHECK(v[0] == 3.0f); // x is forgotten
    CHECK(v[47] == 3.0f);
  }
}

TEST_CASE("keep hands the global model back as it was before the round, "
          "also where open positions wrote the masked sum into it") {
  std::vector<float> global(model_floats, 7.0f);
  for (size_t i = 0; i < model_floats; ++i)
    global[i] += static_cast<float>(i);
  auto model = buffer_of(global);
  auto sum = make_acc(accumulator_kind::model_sum, 2);
  auto kept = sum->keep(model);
  REQUIRE(kept);
  CHECK(floats_of(*kept) == global);
  CHECK(kept->data() != model.data());
  // Open positions under secure aggregation: every position's ring sum
  // goes into the model's own bytes, then the unmask fails.
  auto positions = make_acc(accumulator_kind::open_positions, 2);
  std::vector<std::byte> masked(model_floats * 4, std::byte{0x5a});
  for (uint64_t seq = 0; seq < positions->plan().chunk_count(); ++seq) {
    const auto& e = positions->plan().extent(seq);
    auto x =
        std::span<const std::byte>{masked}.subspan(e.model_offset, e.bytes);
    REQUIRE(positions->fold_ring(seq, x));
    REQUIRE(positions->fold_ring(seq, x));
    REQUIRE(positions->ready());
    positions->settle_next(model, nullptr, true);
  }
  CHECK(floats_of(model) != global); // the masked sum is in the model
  auto restored = positions->keep(model);
  REQUIRE(restored);
  CHECK(floats_of(*restored) == global);
  // The next round starts afresh at position 0.
  auto next = std::move(*restored);
  std::vector<float> y(model_floats, 3.0f);
  auto v = run_round(*positions, next, {y, y}, {1.0, 1.0});
  CHECK(v[0] == 3.0f);
  CHECK(v[model_floats - 1] == 3.0f);
}

TEST_CASE("secure aggregation: both kinds unmask the same ring sum to the "
          "same mean") {
  secagg::quantizer q{8.0, 22};
  std::vector<float> x(model_floats), y(model_floats);
  for (size_t i = 0; i < model_floats; ++i) {
    x[i] = 0.25f * static_cast<float>(i % 7) - 1;
    y[i] = 2.0f - 0.5f * static_cast<float>(i % 5);
  }
  // Each client quantizes its update at weight 1/2; no masks: the plan
  // only dequantizes the sum of two contributors.
  std::vector<std::vector<uint32_t>> words(2,
                                           std::vector<uint32_t>(model_floats));
  q.quantize(x, 0.5, words[0]);
  q.quantize(y, 0.5, words[1]);
  secagg::unmask_plan plan;
  plan.contributors = 2;
  plan.weight_total = 1.0;
  std::vector<std::vector<float>> results;
  for (auto kind :
       {accumulator_kind::model_sum, accumulator_kind::open_positions}) {
    CAPTURE(static_cast<int>(kind));
    auto acc = make_acc(kind, 2);
    auto model = buffer_of(std::vector<float>(model_floats, 100.0f));
    for (uint64_t seq = 0; seq < 3; ++seq)
      for (const auto& w : words) {
        REQUIRE(acc->fold_ring(
            seq, std::as_bytes(std::span{w}.subspan(seq * 16, 16))));
        while (acc->ready())
          acc->settle_next(model, nullptr, true);
      }
    REQUIRE(acc->unmask(q, plan, model, nullptr));
    auto out = acc->finalize(model, nullptr);
    REQUIRE(out);
    results.push_back(floats_of(*out));
  }
  CHECK(results[0] == results[1]);
  auto bound = q.error_bound(2, 1.0);
  for (size_t i = 0; i < model_floats; ++i)
    CHECK(std::abs(results[0][i] - (x[i] + y[i]) / 2) <= bound + 1e-6);
}

TEST_CASE("open positions kept aside as they are overwritten go back into "
          "the model at a reset, and never into a later model's") {
  // Window mode, 2 contributors: positions 0 and 1 settle in place; a
  // reset puts g back there (keep_originals); without keep_originals they
  // keep the first average. A round that never finalized (a relay's round
  // sat out) and the next model (new_model): nothing of the first kept.
  std::vector<float> g(model_floats), x(model_floats);
  for (uint64_t i = 0; i < model_floats; ++i) {
    g[i] = 0.25f * static_cast<float>(i);
    x[i] = g[i] + 1.0f;
  }
  for (bool keep : {false, true}) {
    CAPTURE(keep);
    auto acc = make_acc(accumulator_kind::open_positions, 2);
    auto model = buffer_of(g);
    if (keep)
      acc->keep_originals();
    for (uint64_t seq = 0; seq < 2; ++seq)
      for (uint64_t c = 1; c <= 2; ++c) {
        REQUIRE(acc->fold(seq, chunk_of(x, seq), 1, c, model.bytes()));
        while (acc->ready())
          acc->settle_next(model, nullptr, false);
      }
    REQUIRE(acc->overwritten_below() == 2);
    CHECK(floats_of(model)[0] == x[0]); // the first average, in place
    acc->restart(2);
    REQUIRE(acc->restore_originals(model));
    auto back = floats_of(model);
    for (uint64_t i = 0; i < 32; ++i)
      CHECK(back[i] == (keep ? g[i] : x[i]));
    // Sat out: the next model, another g; a reset there restores it.
    acc->restart(1);
    acc->new_model();
    CHECK(acc->overwritten_below() == 0);
    std::vector<float> g2(model_floats, 7.0f);
    auto next = buffer_of(g2);
    acc->restart(1);
    if (keep)
      acc->keep_originals();
    REQUIRE(acc->fold(0, chunk_of(x, 0), 1, 1, next.bytes()));
    while (acc->ready())
      acc->settle_next(next, nullptr, false);
    acc->restart(1);
    REQUIRE(acc->restore_originals(next));
    auto again = floats_of(next);
    for (uint64_t i = 0; i < 16; ++i)
      CHECK(again[i] == (keep ? 7.0f : x[i]));
  }
}
