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

std::span<const std::byte> bytes_of(const std::vector<float>& v) {
  return std::as_bytes(std::span{v});
}

std::vector<float> floats_of(const byte_buffer& b) {
  std::vector<float> v(b.size() / sizeof(float));
  std::memcpy(v.data(), b.data(), b.size());
  return v;
}

} // namespace

TEST_CASE("weighted chunks average to the weighted mean") {
  auto acc = fedavg_accumulator::make(floats(4));
  REQUIRE(acc);
  std::vector<float> x{1, 2, 3, 4}, y{5, 6, 7, 8};
  acc->add_weight(1);
  acc->add_weight(3);
  // x in one piece; y in two chunks, second first.
  CHECK(acc->fold(0, bytes_of(x), 1));
  CHECK(acc->fold(8, bytes_of(y).subspan(8), 3));
  CHECK(acc->fold(0, bytes_of(y).subspan(0, 8), 3));
  auto out = acc->finalize();
  REQUIRE(out);
  auto v = floats_of(*out);
  CHECK(v == std::vector<float>{4, 5, 6, 7});
}

TEST_CASE("a chunk outside the model or off element boundaries changes nothing") {
  auto acc = fedavg_accumulator::make(floats(4));
  REQUIRE(acc);
  std::vector<float> x{1, 1, 1, 1};
  acc->add_weight(1);
  auto outside = acc->fold(8, bytes_of(x), 1);
  REQUIRE_FALSE(outside);
  CHECK(outside.err().code == errc::out_of_range);
  CHECK_FALSE(acc->fold(2, bytes_of(x).subspan(0, 8), 1));
  CHECK_FALSE(acc->fold(0, bytes_of(x).subspan(0, 6), 1));
  auto out = acc->finalize();
  REQUIRE(out);
  CHECK(floats_of(*out) == std::vector<float>{0, 0, 0, 0});
}

TEST_CASE("non-float32 models are refused with the tensor's name") {
  manifest m;
  m.tensors.push_back(make_tensor_info("h", dtype::bfloat16, {4}));
  auto acc = fedavg_accumulator::make(m);
  REQUIRE_FALSE(acc);
  CHECK(acc.err().code == errc::unsupported_dtype);
  CHECK(acc.err().message.find("'h'") != std::string::npos);
}

TEST_CASE("finalize without any weight is our bug, reported as internal") {
  auto acc = fedavg_accumulator::make(floats(2));
  REQUIRE(acc);
  auto out = acc->finalize();
  REQUIRE_FALSE(out);
  CHECK(out.err().code == errc::internal);
}
