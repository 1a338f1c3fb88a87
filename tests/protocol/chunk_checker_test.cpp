// The checks of an uploaded chunk driven by hand: its place in the plan,
// finite values within what the sum holds, the update's distance against
// max_update_norm, the default ratio bound (max_update_ratio x the global
// model's norm) and the declared norm, a resend after a reset matched
// against the first pass, and norm_bound's scaling.

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "fedcaf/update_check.hpp"
#include "protocol/chunk_checker.hpp"

using namespace fedcaf;

namespace {

constexpr uint64_t model_floats = 32; // 2 chunks of 16 floats

manifest floats() {
  manifest m;
  m.tensors.push_back(make_tensor_info("w", dtype::float32, {model_floats}));
  return m;
}

struct bench {
  manifest layout = floats();
  chunk_plan plan = *chunk_plan::make(layout, 64);
  aggregation_plan agg;
  rule_config rule;
  std::vector<float> global = std::vector<float>(model_floats, 1.0f);

  explicit bench(double max_update_norm = 0, double norm_bound = 0,
                 bool in_place = false) {
    agg.max_contributors = 3;
    agg.in_place = in_place;
    rule.max_update_norm = max_update_norm;
    rule.norm_bound = norm_bound;
  }

  chunk_checker checker() const {
    return chunk_checker{layout, plan, agg, rule, compression_config{}};
  }

  std::span<const std::byte> model() const {
    return std::as_bytes(std::span{global});
  }

  /// The global model as the aggregator holds it.
  byte_buffer buffer() const {
    auto out = byte_buffer::uninitialized(global.size() * sizeof(float));
    std::memcpy(out.data(), global.data(), out.size());
    return out;
  }
};

/// Chunk `seq` of `values` (16 floats a chunk), as decode_chunk gives it.
msg::chunk_view chunk(const std::vector<float>& values, uint64_t seq) {
  msg::chunk_view c;
  c.header.stream_id = 1;
  c.header.sequence = seq;
  c.header.byte_offset = seq * 64;
  c.bytes = std::as_bytes(std::span{values}.subspan(seq * 16, 16));
  c.checksum = msg::checksum(c.bytes);
  return c;
}

upload_record stream_of(double declared_norm = 0, double scale = 1) {
  upload_record s;
  s.client_id = "A";
  s.weight = 1;
  s.declared_norm = declared_norm;
  s.scale = scale;
  return s;
}

/// The result of checking both chunks of `x` as one stream.
result<checked_chunk> inspect_all(const chunk_checker& checker, const bench& b,
                                  const std::vector<float>& x) {
  auto s = stream_of();
  result<checked_chunk> last = checked_chunk{};
  for (uint64_t seq = 0; seq < 2 && last; ++seq) {
    last = checker.inspect(s, chunk(x, seq), b.model(), 0);
    if (last)
      s.distance_squared += last->distance_squared;
  }
  return last;
}

} // namespace

TEST_CASE("an element may be at most FLT_MAX over (contributors + 1) times "
          "the weight") {
  bench b;
  auto checker = b.checker();
  auto most = static_cast<double>(std::numeric_limits<float>::max());
  CHECK(checker.max_abs(1) == most / 4);
  CHECK(checker.max_abs(0.5) == most / 4); // weights below 1 count as 1
  CHECK(checker.max_abs(8) == most / 32);
  CHECK(checker.max_payload() == 64);
}

TEST_CASE("a chunk must lie in its slot of the plan") {
  bench b;
  auto checker = b.checker();
  std::vector<float> x(model_floats, 2.0f);
  CHECK(checker.placed(chunk(x, 1)));
  auto moved = chunk(x, 1);
  moved.header.byte_offset = 60;
  CHECK_FALSE(checker.placed(moved));
  auto beyond = chunk(x, 1);
  beyond.header.sequence = 2;
  CHECK_FALSE(checker.placed(beyond));
}

TEST_CASE("a NaN or a value beyond what the sum holds poisons the update, "
          "masked words are not checked") {
  bench b;
  std::vector<float> x(model_floats, 2.0f);
  x[3] = std::numeric_limits<float>::quiet_NaN();
  x[20] = std::numeric_limits<float>::max() / 2; // beyond max_abs(1)
  auto s = stream_of();
  {
    auto checker = b.checker();
    for (uint64_t seq : {0, 1}) {
      auto checked = checker.inspect(s, chunk(x, seq), b.model(), 0);
      REQUIRE_FALSE(checked);
      CHECK(checked.err().code == errc::poisoned_update);
    }
  }
  b.agg.secure = true;
  auto masked = b.checker();
  CHECK(masked.inspect(s, chunk(x, 0), b.model(), 0));
}

TEST_CASE("the update's distance from the global model is summed over its "
          "chunks against max_update_norm and the norm it declared") {
  std::vector<float> x(model_floats, 2.0f); // 16 x 1^2 per chunk
  SUBCASE("max_update_norm") {
    bench b{5}; // 25: one chunk passes, two do not
    auto checker = b.checker();
    auto s = stream_of();
    auto first = checker.inspect(s, chunk(x, 0), b.model(), 0);
    REQUIRE(first);
    CHECK(first->distance_squared == 16);
    CHECK(first->checksum == chunk(x, 0).checksum);
    s.distance_squared += first->distance_squared;
    auto second = checker.inspect(s, chunk(x, 1), b.model(), 0);
    REQUIRE_FALSE(second);
    CHECK(second.err().code == errc::poisoned_update);
    CHECK(second.err().message.find("max_update_norm") != std::string::npos);
  }
  SUBCASE("the declared norm, under norm_bound") {
    bench b{0, 100};
    auto checker = b.checker();
    auto honest = stream_of(std::sqrt(32.0));
    auto c0 = checker.inspect(honest, chunk(x, 0), b.model(), 0);
    REQUIRE(c0);
    honest.distance_squared += c0->distance_squared;
    CHECK(checker.inspect(honest, chunk(x, 1), b.model(), 0));
    auto liar = stream_of(4.0); // declared 4, sends sqrt(32)
    liar.distance_squared = 16;
    auto lie = checker.inspect(liar, chunk(x, 1), b.model(), 0);
    REQUIRE_FALSE(lie);
    CHECK(lie.err().message.find("declared") != std::string::npos);
  }
}

TEST_CASE("below the positions the model already holds, a resend must match "
          "the first pass, whose distance counts") {
  bench b{10, 0, true};
  auto checker = b.checker();
  std::vector<float> x(model_floats, 2.0f);
  auto s = stream_of();
  auto first = checker.inspect(s, chunk(x, 0), b.model(), 0);
  REQUIRE(first);
  checker.record("A", 0, *first);
  // Position 0 was averaged into the model: its bytes are no longer the
  // model the client got, so its distance is the recorded one.
  std::fill(b.global.begin(), b.global.begin() + 16, 2.0f);
  auto again = checker.inspect(s, chunk(x, 0), b.model(), 1);
  REQUIRE(again);
  CHECK(again->distance_squared == 16);
  auto changed = x;
  changed[0] = 3.0f;
  auto differs = checker.inspect(s, chunk(changed, 0), b.model(), 1);
  REQUIRE_FALSE(differs);
  CHECK(differs.err().code == errc::poisoned_update);
  auto other = s;
  other.client_id = "B"; // no record of B
  auto unknown = checker.inspect(other, chunk(x, 0), b.model(), 1);
  REQUIRE_FALSE(unknown);
  CHECK(unknown.err().code == errc::internal);
  checker.forget_round();
  CHECK_FALSE(checker.inspect(s, chunk(x, 0), b.model(), 1));
}

TEST_CASE("norm_bound scales an update above it towards the global model") {
  bench b{0, 2};
  auto checker = b.checker();
  CHECK(checker.scale_for("A", 8) == 0.25);
  CHECK(checker.scale_for("A", 1) == 1);
  CHECK(bench{}.checker().scale_for("A", 8) == 1); // no bound
  std::vector<float> x(model_floats, 5.0f);
  auto as_sent = checker.bounded(stream_of(8, 1), chunk(x, 1), b.model());
  CHECK(as_sent.bytes.data() == chunk(x, 1).bytes.data()); // not copied
  auto scaled = checker.bounded(stream_of(8, 0.25), chunk(x, 1), b.model());
  REQUIRE(scaled.bytes.size() == 64);
  CHECK(scaled.header.sequence == 1);
  const auto* v = reinterpret_cast<const float*>(scaled.bytes.data());
  for (size_t i = 0; i < 16; ++i)
    CHECK(v[i] == 2.0f); // 1 + 0.25 (5 - 1)
}

TEST_CASE("by default an update may be at most max_update_ratio (10) times "
          "the global model's norm away from it") {
  bench b; // ||g|| = sqrt(32): the bound is 10 sqrt(32)
  auto checker = b.checker();
  CHECK(checker.update_bound() == 0); // nothing measured yet
  checker.measure_global(b.buffer());
  CHECK(checker.update_bound() == doctest::Approx(10 * std::sqrt(32.0)));
  CHECK(inspect_all(checker, b, std::vector<float>(model_floats, 10.0f)));
  SUBCASE("11 x the norm: refused at the chunk that passes the bound") {
    std::vector<float> x(model_floats, 12.0f);
    auto s = stream_of();
    auto first = checker.inspect(s, chunk(x, 0), b.model(), 0);
    REQUIRE(first); // 44 of 56.6 so far
    s.distance_squared += first->distance_squared;
    auto second = checker.inspect(s, chunk(x, 1), b.model(), 0);
    REQUIRE_FALSE(second);
    CHECK(second.err().code == errc::poisoned_update);
    CHECK(second.err().message.find("max_update_ratio") != std::string::npos);
    CHECK(second.err().message.find("at chunk 1") != std::string::npos);
  }
  SUBCASE("1e30 everywhere: within what the sum holds, refused at once") {
    std::vector<float> x(model_floats, 1e30f);
    auto s = stream_of();
    auto first = checker.inspect(s, chunk(x, 0), b.model(), 0);
    REQUIRE_FALSE(first);
    CHECK(first.err().code == errc::poisoned_update);
  }
  SUBCASE("max_update_norm below the ratio's bound wins") {
    b.rule.max_update_norm = 5;
    auto tighter = b.checker();
    tighter.measure_global(b.buffer());
    CHECK(tighter.update_bound() == 5);
  }
  SUBCASE("0 turns it off; secure aggregation cannot measure") {
    b.rule.max_update_ratio = 0;
    auto off = b.checker();
    off.measure_global(b.buffer());
    CHECK(off.update_bound() == 0);
    CHECK(inspect_all(off, b, std::vector<float>(model_floats, 1e30f)));
    b.rule.max_update_ratio = 10;
    b.agg.secure = true;
    auto secure = b.checker();
    secure.measure_global(b.buffer());
    CHECK(secure.update_bound() == 0);
  }
}

TEST_CASE("the norm the bound is taken of grows by at most max_norm_growth "
          "a model: an update at the bound (x = 10.5 g) cannot ratchet it") {
  bench b; // ||g|| = sqrt(32)
  auto checker = b.checker();
  auto norm = std::sqrt(32.0);
  checker.measure_global(b.buffer());
  CHECK(checker.update_bound() == doctest::Approx(10 * norm));
  // 10.5 g passes against g (distance 9.5 ||g||) ...
  CHECK(inspect_all(checker, b, std::vector<float>(model_floats, 10.5f)));
  // ... and the average it made (4.17 g with two honest g) is measured
  // next: the bound grows by 1.25, not by 4.17.
  b.global.assign(model_floats, 12.5f / 3);
  checker.measure_global(b.buffer());
  CHECK(checker.update_bound() == doctest::Approx(10 * 1.25 * norm));
  // 10.5 x the new model is refused now.
  CHECK_FALSE(inspect_all(checker, b,
                          std::vector<float>(model_floats, 10.5f * 12.5f / 3)));
  // An honest update (distance 1.89 ||g||) still passes.
  CHECK(inspect_all(checker, b,
                    std::vector<float>(model_floats, 2.89f * 12.5f / 3)));
  // Down at once.
  b.global.assign(model_floats, 0.5f);
  checker.measure_global(b.buffer());
  CHECK(checker.update_bound() == doctest::Approx(10 * 0.5 * norm));
  SUBCASE("0: ||g|| itself") {
    b.rule.max_norm_growth = 0;
    auto off = b.checker();
    b.global.assign(model_floats, 1.0f);
    off.measure_global(b.buffer());
    b.global.assign(model_floats, 4.0f);
    off.measure_global(b.buffer());
    CHECK(off.update_bound() == doctest::Approx(40 * norm));
  }
}

TEST_CASE("a model near zero is measured as of norm update_norm_floor") {
  bench b;
  b.global.assign(model_floats, 0.0f);
  auto checker = b.checker();
  checker.measure_global(b.buffer());
  CHECK(checker.update_bound() == doctest::Approx(10.0)); // 10 x floor 1
  CHECK(inspect_all(checker, b, std::vector<float>(model_floats, 1.0f)));
  CHECK_FALSE(inspect_all(checker, b, std::vector<float>(model_floats, 2.0f)));
}

TEST_CASE("tensor_rules keep: a kept tensor's values are the global model's "
          "whatever the client sent, the first matching pattern decides") {
  bench b;
  b.layout.tensors.clear(); // 20 + 4 + 8 floats: chunk 1 holds all three
  b.layout.tensors.push_back(make_tensor_info("w", dtype::float32, {20}));
  b.layout.tensors.push_back(make_tensor_info("pos_ids", dtype::float32, {4}));
  b.layout.tensors.push_back(make_tensor_info("b", dtype::float32, {8}));
  b.plan = *chunk_plan::make(b.layout, 64);
  b.rule.tensor_rules = {{"b", tensor_rule::average},
                         {"pos_*", tensor_rule::keep},
                         {"[bw]", tensor_rule::keep}};
  auto kept = kept_tensors(b.layout, b.rule.tensor_rules);
  REQUIRE(kept);
  CHECK(*kept == std::vector<bool>{true, true, false}); // b: "b" came first
  b.rule.tensor_rules.pop_back();
  auto checker = b.checker();
  std::vector<float> x(model_floats, 5.0f);
  auto first = checker.bounded(stream_of(), chunk(x, 0), b.model());
  CHECK(first.bytes.data() == chunk(x, 0).bytes.data()); // w only: as sent
  for (double scale : {1.0, 0.25}) {
    auto folded = checker.bounded(stream_of(8, scale), chunk(x, 1), b.model());
    REQUIRE(folded.bytes.size() == 64);
    const auto* v = reinterpret_cast<const float*>(folded.bytes.data());
    float moved = static_cast<float>(1 + scale * 4);
    for (size_t i = 0; i < 16; ++i)
      CHECK(v[i] == (i >= 4 && i < 8 ? 1.0f : moved)); // pos_ids kept at 1
  }
  auto typo = kept_tensors(b.layout, {{"pos_id", tensor_rule::keep}});
  REQUIRE(!typo);
  CHECK(typo.err().code == errc::bad_config);
  CHECK(typo.err().message.find("'pos_id' matches no tensor") !=
        std::string::npos);
}

TEST_CASE("a fold that refused a chunk names it as inspect() would: its NaN "
          "or value beyond the sum's bound first, else the fold's reason") {
  bench b;
  auto checker = b.checker();
  auto s = stream_of();
  std::vector<float> x(model_floats, 2.0f);
  x[3] = std::numeric_limits<float>::quiet_NaN();
  error beyond{errc::poisoned_update, "beyond the exact sum's range"};
  auto named = checker.fold_refusal(s, chunk(x, 0), beyond);
  CHECK(named.code == errc::poisoned_update);
  CHECK(named.message.find("NaN") != std::string::npos);
  CHECK(named.message ==
        checker.inspect(s, chunk(x, 0), b.model(), 0).err().message);
  x[3] = static_cast<float>(checker.bound_of(s)); // at the bound: allowed
  CHECK(checker.fold_refusal(s, chunk(x, 0), beyond).message == beyond.message);
  x[3] = std::nextafter(x[3], std::numeric_limits<float>::infinity());
  CHECK(checker.fold_refusal(s, chunk(x, 0), beyond)
            .message.find("values beyond") != std::string::npos);
}
