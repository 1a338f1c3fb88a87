#include "fedcaf/window_accumulator.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include <doctest/doctest.h>

#include "fedcaf/element.hpp"

using namespace fedcaf;

namespace {

std::span<const std::byte> bytes_of(const std::vector<float>& v, size_t from,
                                    size_t count) {
  return std::as_bytes(std::span{v}.subspan(from, count));
}

} // namespace

TEST_CASE("a cut-off update counts below its cut and is not awaited above") {
  manifest m;
  m.tensors.push_back(make_tensor_info("w", dtype::float32, {48}));
  auto acc = window_accumulator::make(m, *chunk_plan::make(m, 64), 2, 3);
  REQUIRE(acc);
  std::vector<float> model(48, 100.0f);
  auto out = std::as_writable_bytes(std::span{model});
  std::vector<float> x(48, 1.0f), y(48, 4.0f), z(48, 10.0f);
  // Position 0: all three deliver.
  for (const auto* c : {&x, &y, &z})
    REQUIRE(acc->fold(0, bytes_of(*c, 0, 16), 1));
  REQUIRE(acc->ready());
  acc->finalize_next(out, nullptr);
  // Position 1: x and z deliver, then z is cut off at 2: y still missing.
  REQUIRE(acc->fold(1, bytes_of(x, 16, 16), 1));
  REQUIRE(acc->fold(1, bytes_of(z, 16, 16), 1));
  acc->cut(2);
  CHECK_FALSE(acc->ready());
  REQUIRE(acc->fold(1, bytes_of(y, 16, 16), 1));
  REQUIRE(acc->ready());
  acc->finalize_next(out, nullptr);
  // Position 2: two contributions complete it; a third is refused.
  REQUIRE(acc->fold(2, bytes_of(x, 32, 16), 1));
  REQUIRE(acc->fold(2, bytes_of(y, 32, 16), 3));
  CHECK_FALSE(acc->fold(2, bytes_of(z, 32, 16), 1));
  REQUIRE(acc->ready());
  acc->finalize_next(out, nullptr);
  CHECK(acc->finish_round());
  CHECK(model[0] == 5.0f);
  CHECK(model[16] == 5.0f);
  CHECK(model[32] == doctest::Approx(13.0 / 4));
}

TEST_CASE("secure aggregation: the ring sum of a complete position is stored "
          "over the model's bytes there, wrapping mod 2^32") {
  manifest m;
  m.tensors.push_back(make_tensor_info("w", dtype::float32, {48}));
  auto acc = window_accumulator::make(m, *chunk_plan::make(m, 64), 2, 2);
  REQUIRE(acc); // 3 positions of 16 elements, a window of 2
  std::vector<uint32_t> a(48), b(48);
  for (uint32_t i = 0; i < 48; ++i) {
    a[i] = 0xFFFFFFF0u + i; // wraps when added to b
    b[i] = 100 + i;
  }
  auto words = [](const std::vector<uint32_t>& v, size_t from) {
    return std::as_bytes(std::span{v}.subspan(from, 16));
  };
  std::vector<uint32_t> model(48, 7);
  auto out = std::as_writable_bytes(std::span{model});
  REQUIRE(acc->fold_ring(0, words(a, 0)));
  CHECK_FALSE(acc->ready());
  CHECK_FALSE(acc->fold_ring(2, words(a, 32))); // outside the window
  REQUIRE(acc->fold_ring(1, words(a, 16)));
  REQUIRE(acc->fold_ring(0, words(b, 0)));
  CHECK_FALSE(acc->fold_ring(0, words(b, 0))); // a third contribution
  REQUIRE(acc->ready());
  acc->store_ring_next(out);
  REQUIRE(acc->fold_ring(1, words(b, 16)));
  acc->store_ring_next(out);
  for (size_t i = 0; i < 32; ++i)
    CHECK(model[i] == a[i] + b[i]); // mod 2^32
  CHECK(model[32] == 7);            // position 2 not stored yet
  REQUIRE(acc->fold_ring(2, words(a, 32)));
  REQUIRE(acc->fold_ring(2, words(b, 32)));
  acc->store_ring_next(out);
  CHECK(model[47] == a[47] + b[47]);
  CHECK(acc->finish_round());
}

TEST_CASE("robust rules reduce each coordinate of a position, count who was "
          "dropped, and write the next model apart from the current one") {
  manifest m;
  m.tensors.push_back(make_tensor_info("w", dtype::float32, {32}));
  for (auto kind : {position_rule::trimmed_mean, position_rule::median}) {
    CAPTURE(static_cast<int>(kind));
    auto acc = window_accumulator::make(m, *chunk_plan::make(m, 64), 2, 6,
                                        {kind, 0.2});
    REQUIRE(acc); // 2 positions of 16 elements
    std::vector<float> current(32, 7.0f), next(32, 0.0f);
    // Six clients; at element i client c sends base[c] + i, except that
    // client 5 (the attacker) sends -1000 at even and +1000 at odd i.
    float base[5] = {3, 1, 4, 2, 10};
    std::vector<std::vector<float>> x(6, std::vector<float>(32));
    for (size_t c = 0; c < 6; ++c)
      for (size_t i = 0; i < 32; ++i)
        x[c][i] = c == 5 ? (i % 2 ? 1000.0f : -1000.0f)
                         : base[c] + static_cast<float>(i);
    for (uint64_t seq = 0; seq < 2; ++seq)
      for (size_t c = 0; c < 6; ++c)
        REQUIRE(acc->fold(seq, bytes_of(x[c], seq * 16, 16), 1.0, 100 + c));
    CHECK_FALSE(acc->fold(0, bytes_of(x[0], 0, 16), 1.0, 100)); // a 7th
    while (acc->ready())
      acc->finalize_next(std::as_bytes(std::span{current}),
                         std::as_writable_bytes(std::span{next}), nullptr);
    CHECK(acc->finish_round());
    for (size_t i = 0; i < 32; ++i) {
      CAPTURE(i);
      auto f = static_cast<float>(i);
      // Sorted values at i (+ i): even i -1000, 1, 2, 3, 4, 10; odd i
      // 1, 2, 3, 4, 10, 1000. TrimmedMean drops floor(0.2 x 6) = 1 from
      // each end: 2.5 (even), 4.75 (odd); Median the middle two: 2.5, 3.5.
      float want = i % 2 == 0                      ? 2.5f + f
                   : kind == position_rule::median ? 3.5f + f
                                                   : 4.75f + f;
      CHECK(next[i] == want);
      CHECK(current[i] == 7.0f); // untouched
    }
    auto dropped = acc->take_trimmed();
    CHECK(dropped[105] == 32); // every value of the attacker's
    CHECK(dropped[104] == (kind == position_rule::median ? 32 : 16));
    uint64_t total = 0;
    for (auto [tag, n] : dropped)
      total += n;
    CHECK(total == (kind == position_rule::median ? 4 : 2) * 32);
    CHECK(acc->take_trimmed().empty());
  }
}

TEST_CASE("robust rules: a cut-off update counts below its cut only, and a "
          "position nobody delivered keeps the model's value") {
  manifest m;
  m.tensors.push_back(make_tensor_info("w", dtype::float32, {48}));
  auto acc = window_accumulator::make(m, *chunk_plan::make(m, 64), 3, 3,
                                      {position_rule::median, 0});
  REQUIRE(acc);
  std::vector<float> model(48, 100.0f);
  auto out = std::as_writable_bytes(std::span{model});
  std::vector<float> a(48, 1.0f), b(48, 2.0f), c(48, 9.0f);
  for (const auto* v : {&a, &b, &c})
    REQUIRE(acc->fold(0, bytes_of(*v, 0, 16), 1.0, 0));
  acc->finalize_next(out, nullptr); // median of 1, 2, 9
  REQUIRE(acc->fold(1, bytes_of(a, 16, 16), 1.0, 0));
  REQUIRE(acc->fold(1, bytes_of(c, 16, 16), 1.0, 0));
  acc->cut(1); // b stopped before position 1
  REQUIRE(acc->ready());
  acc->finalize_next(out, nullptr); // median of 1, 9: their mean
  acc->set_contributors(7);         // more than it holds: stays 3
  CHECK(acc->contributors() == 3);
  acc->cut(2);
  acc->cut(2); // a and c stopped too: nobody delivers position 2
  REQUIRE(acc->ready());
  acc->finalize_next(out, nullptr);
  CHECK(acc->finish_round());
  CHECK(model[0] == 2.0f);
  CHECK(model[16] == 5.0f);
  CHECK(model[32] == 100.0f);
}

TEST_CASE("a position's mean (or a relay's sum) is, bit for bit, the float64 "
          "products added in turn and divided once, for positions of any "
          "length and values of any size") {
  // 203 floats cut into positions of 37 (the last 18): lengths that are not
  // multiples of a vector's, and a tail.
  manifest m;
  m.tensors.push_back(make_tensor_info("w", dtype::float32, {203}));
  auto plan = *chunk_plan::make(m, 37 * sizeof(float));
  const std::vector<double> weights{3, 0.1, 7.25};
  std::vector<std::vector<float>> updates(weights.size(),
                                          std::vector<float>(203));
  uint64_t state = 12345;
  for (auto& u : updates)
    for (auto& x : u) { // magnitudes from 1e-30 to 1e30, both signs
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      auto unit = static_cast<double>(state >> 11) * 0x1p-53;
      x = static_cast<float>((state & 1 ? -1 : 1) *
                             std::pow(10.0, 60 * unit - 30));
    }
  updates[1][5] = std::numeric_limits<float>::infinity();
  updates[2][100] = std::numeric_limits<float>::max(); // the sum passes it
  updates[0][100] = std::numeric_limits<float>::max();
  // A mean is clamped to the value limit (a sum only to float's range).
  for (auto [sums, value_limit] :
       {std::pair{false, std::numeric_limits<float>::max()},
        std::pair{true, std::numeric_limits<float>::max()},
        std::pair{false, 1e20f}, std::pair{true, 1e20f}}) {
    CAPTURE(sums);
    CAPTURE(value_limit);
    auto acc = window_accumulator::make(m, plan, 2, 3);
    REQUIRE(acc);
    acc->set_value_limit(value_limit);
    if (sums)
      acc->emit_sums();
    std::vector<float> model(203, 0.0f);
    auto out = std::as_writable_bytes(std::span{model});
    for (uint64_t seq = 0; seq < plan.chunk_count(); ++seq) {
      const auto& e = plan.extent(seq);
      for (size_t c = 0; c < updates.size(); ++c)
        REQUIRE(acc->fold(seq,
                          bytes_of(updates[c], e.model_offset / sizeof(float),
                                   e.bytes / sizeof(float)),
                          weights[c]));
      REQUIRE(acc->ready());
      acc->finalize_next(out, nullptr);
    }
    CHECK(acc->finish_round());
    const double total = weights[0] + weights[1] + weights[2];
    for (size_t i = 0; i < model.size(); ++i) {
      double s = weights[0] * static_cast<double>(updates[0][i]);
      s += weights[1] * static_cast<double>(updates[1][i]);
      s += weights[2] * static_cast<double>(updates[2][i]);
      auto limit = sums ? std::numeric_limits<float>::max() : value_limit;
      auto expected =
          std::clamp(static_cast<float>(sums ? s : s / total), -limit, limit);
      CAPTURE(i);
      CHECK(std::memcmp(&model[i], &expected, sizeof expected) == 0);
    }
  }
}

TEST_CASE("a position's fold and settling in parts on several threads give "
          "the bits of one thread, the float64 products added in turn") {
  // 300,001 elements in positions of 1 MiB of float32 (262,144 elements,
  // cut into parts) and a rest of 37,857 (too few to cut), in float32 and
  // bfloat16 (the element loop).
  constexpr size_t n = 300001;
  const std::vector<double> weights{3, 0.1, 7.25};
  uint64_t state = 777;
  std::vector<std::vector<float>> values(weights.size(), std::vector<float>(n));
  for (auto& u : values)
    for (auto& x : u) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      auto unit = static_cast<double>(state >> 11) * 0x1p-53;
      x = static_cast<float>((state & 1 ? -1 : 1) *
                             std::pow(10.0, 12 * unit - 6));
    }
  for (auto type : {dtype::float32, dtype::bfloat16}) {
    CAPTURE(dtype_name(type));
    manifest m;
    m.tensors.push_back(make_tensor_info("w", type, {n}));
    auto width = dtype_bytes(type);
    auto plan = *chunk_plan::make(m, 262144 * width);
    REQUIRE(plan.chunk_count() == 2);
    std::vector<std::vector<std::byte>> updates;
    for (const auto& u : values) {
      std::vector<std::byte> b(n * width);
      for (size_t i = 0; i < n; ++i)
        store_element(type, b.data(), i, u[i]);
      updates.push_back(std::move(b));
    }
    std::vector<std::byte> expected(n * width);
    const double total = weights[0] + weights[1] + weights[2];
    for (size_t i = 0; i < n; ++i) {
      double s = 0;
      for (size_t c = 0; c < weights.size(); ++c)
        s += weights[c] *
             static_cast<double>(load_element(type, updates[c].data(), i));
      store_element(type, expected.data(), i, static_cast<float>(s / total));
    }
    for (unsigned threads : {1u, 2u, 3u, 5u}) {
      CAPTURE(threads);
      auto acc = window_accumulator::make(m, plan, 2, 3);
      REQUIRE(acc);
      acc->set_threads(threads);
      CHECK((acc->split().pool != nullptr) == (threads > 1));
      std::vector<std::byte> model(n * width);
      for (uint64_t seq = 0; seq < plan.chunk_count(); ++seq) {
        const auto& e = plan.extent(seq);
        for (size_t c = 0; c < updates.size(); ++c)
          REQUIRE(acc->fold(seq,
                            std::span<const std::byte>{updates[c]}.subspan(
                                e.model_offset, e.bytes),
                            weights[c]));
        REQUIRE(acc->ready());
        acc->finalize_next(model, nullptr);
      }
      CHECK(acc->finish_round());
      CHECK(std::memcmp(model.data(), expected.data(), model.size()) == 0);
    }
  }
}
