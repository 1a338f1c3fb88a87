#include "fedcaf/element.hpp"
#include "fedcaf/fedavg_accumulator.hpp"

#include <cstring>

#include <doctest/doctest.h>

using namespace fedcaf;

namespace {

manifest floats(uint64_t n) {
  manifest m;
  m.tensors.push_back(make_tensor_info("w", dtype::float32, {n}));
  return m;
}

/// An accumulator over n floats cut into chunks of `chunk_floats`.
fedavg_accumulator make_acc(uint64_t n, uint64_t chunk_floats) {
  auto m = floats(n);
  auto acc =
      fedavg_accumulator::make(m, *chunk_plan::make(m, chunk_floats * 4));
  REQUIRE(acc);
  return std::move(*acc);
}

std::span<const std::byte> bytes_of(const std::vector<float>& v, size_t from,
                                    size_t count) {
  return std::as_bytes(std::span{v}.subspan(from, count));
}

std::vector<float> floats_of(const byte_buffer& b) {
  std::vector<float> v(b.size() / sizeof(float));
  std::memcpy(v.data(), b.data(), b.size());
  return v;
}

} // namespace

TEST_CASE("weighted chunks average to the weighted mean, in any order") {
  auto acc = make_acc(32, 16);
  std::vector<float> x(32), y(32);
  for (size_t i = 0; i < 32; ++i) {
    x[i] = static_cast<float>(i);
    y[i] = static_cast<float>(i) + 4;
  }
  acc.add_weight(1);
  acc.add_weight(3);
  CHECK(acc.fold(1, bytes_of(y, 16, 16), 3)); // y's second chunk first
  CHECK(acc.fold(0, bytes_of(x, 0, 16), 1));
  CHECK(acc.fold(1, bytes_of(x, 16, 16), 1));
  CHECK(acc.fold(0, bytes_of(y, 0, 16), 3));
  auto out = acc.finalize();
  REQUIRE(out);
  auto v = floats_of(*out);
  for (size_t i = 0; i < 32; ++i)
    CHECK(v[i] == static_cast<float>(i) + 3);
}

TEST_CASE("a recycled buffer's old content never leaks into the sum") {
  auto acc = make_acc(32, 16);
  auto old = byte_buffer::uninitialized(128);
  std::memset(old.data(), 0x7f, old.size()); // garbage
  acc.recycle(std::move(old));
  std::vector<float> x(32, 2.0f);
  acc.add_weight(2);
  CHECK(acc.fold(0, bytes_of(x, 0, 16), 2));
  CHECK(acc.fold(1, bytes_of(x, 16, 16), 2));
  auto out = acc.finalize();
  REQUIRE(out);
  CHECK(floats_of(*out) == std::vector<float>(32, 2.0f));
  // The next round starts over.
  acc.add_weight(1);
  std::vector<float> z(32, 5.0f);
  CHECK(acc.fold(0, bytes_of(z, 0, 16), 1));
  auto second = acc.finalize();
  REQUIRE(second);
  auto v = floats_of(*second);
  CHECK(v[0] == 5.0f);
  CHECK(v[31] == 0.0f); // chunk 1 was never folded this round
}

TEST_CASE("a chunk outside the plan or of the wrong size changes nothing") {
  auto acc = make_acc(32, 16);
  std::vector<float> x(32, 1.0f);
  acc.add_weight(1);
  auto outside = acc.fold(2, bytes_of(x, 0, 16), 1);
  REQUIRE_FALSE(outside);
  CHECK(outside.err().code == errc::out_of_range);
  CHECK_FALSE(acc.fold(0, bytes_of(x, 0, 15), 1));
  CHECK_FALSE(acc.fold(0, bytes_of(x, 0, 17), 1));
  auto out = acc.finalize();
  REQUIRE(out);
  CHECK(floats_of(*out) == std::vector<float>(32, 0.0f));
}

TEST_CASE("integer or mixed-dtype models are refused with the tensor's name") {
  manifest m;
  m.tensors.push_back(make_tensor_info("w", dtype::float32, {4}));
  m.tensors.push_back(make_tensor_info("h", dtype::bfloat16, {4}));
  auto acc = fedavg_accumulator::make(m, *chunk_plan::make(m, 64));
  REQUIRE_FALSE(acc);
  CHECK(acc.err().code == errc::unsupported_dtype);
  CHECK(acc.err().message.find("'h'") != std::string::npos);
  manifest ints;
  ints.tensors.push_back(make_tensor_info("steps", dtype::int64, {1}));
  CHECK_FALSE(fedavg_accumulator::make(ints, *chunk_plan::make(ints, 64)));
}

TEST_CASE("16-bit models are summed in float and rounded once at the end") {
  for (auto type : {dtype::bfloat16, dtype::float16}) {
    CAPTURE(dtype_name(type));
    manifest m;
    m.tensors.push_back(make_tensor_info("w", type, {64}));
    auto acc = fedavg_accumulator::make(m, *chunk_plan::make(m, 64));
    REQUIRE(acc);
    // Three clients: 1 + 1/256 is not representable in bf16, the mean of
    // three such values is; summing in 16 bits would lose it.
    std::vector<std::byte> x(128);
    for (size_t i = 0; i < 64; ++i)
      store_element(type, x.data(), i, 1.0f + static_cast<float>(i) / 64);
    for (int k = 0; k < 3; ++k) {
      acc->add_weight(1);
      for (uint64_t s = 0; s < acc->plan().chunk_count(); ++s) {
        const auto& e = acc->plan().extent(s);
        REQUIRE(acc->fold(s, std::span{x}.subspan(e.model_offset, e.bytes), 1));
      }
    }
    auto out = acc->finalize();
    REQUIRE(out);
    REQUIRE(out->size() == 128);
    for (size_t i = 0; i < 64; ++i)
      CHECK(load_element(type, out->data(), i) ==
            1.0f + static_cast<float>(i) / 64);
  }
}

TEST_CASE("finalize without any weight is our bug, reported as internal") {
  auto acc = make_acc(16, 16);
  auto out = acc.finalize();
  REQUIRE_FALSE(out);
  CHECK(out.err().code == errc::internal);
}
