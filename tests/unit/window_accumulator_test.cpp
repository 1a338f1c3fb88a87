#include "fedcaf/window_accumulator.hpp"

#include <cstring>

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
