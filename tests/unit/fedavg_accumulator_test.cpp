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

/// A current global model of `n` floats: 100, 101, ...
std::vector<std::byte> model_of(size_t n) {
  std::vector<std::byte> out(n * 4);
  for (size_t i = 0; i < n; ++i)
    store_element(dtype::float32, out.data(), i, 100.0f + i);
  return out;
}

std::vector<float> floats_of(const byte_buffer& b) {
  std::vector<float> v(b.size() / sizeof(float));
  std::memcpy(v.data(), b.data(), b.size());
  return v;
}

} // namespace

TEST_CASE("weighted chunks average to the weighted mean, in any order") {
  auto acc = make_acc(32, 16);
  auto global = model_of(32);
  std::vector<float> x(32), y(32);
  for (size_t i = 0; i < 32; ++i) {
    x[i] = static_cast<float>(i);
    y[i] = static_cast<float>(i) + 4;
  }
  CHECK(acc.fold(1, bytes_of(y, 16, 16), 3)); // y's second chunk first
  CHECK(acc.fold(0, bytes_of(x, 0, 16), 1));
  CHECK(acc.fold(1, bytes_of(x, 16, 16), 1));
  CHECK(acc.fold(0, bytes_of(y, 0, 16), 3));
  auto out = acc.finalize(global, nullptr);
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
  auto global = model_of(32);
  std::vector<float> x(32, 2.0f);
  CHECK(acc.fold(0, bytes_of(x, 0, 16), 2));
  CHECK(acc.fold(1, bytes_of(x, 16, 16), 2));
  auto out = acc.finalize(global, nullptr);
  REQUIRE(out);
  CHECK(floats_of(*out) == std::vector<float>(32, 2.0f));
  // The next round starts over.
  std::vector<float> z(32, 5.0f);
  CHECK(acc.fold(0, bytes_of(z, 0, 16), 1));
  auto second = acc.finalize(global, nullptr);
  REQUIRE(second);
  auto v = floats_of(*second);
  CHECK(v[0] == 5.0f);
  CHECK(v[31] == 131.0f); // chunk 1 was never folded: the global's value
}

TEST_CASE("each chunk is divided by the weights that reached it") {
  // A client cut off after its first chunk counts there and nowhere else
  // (partial_updates: keep).
  auto acc = make_acc(48, 16);
  auto global = model_of(48);
  std::vector<float> x(48, 1.0f), y(48, 4.0f), z(48, 10.0f);
  for (uint64_t s = 0; s < 3; ++s) {
    CHECK(acc.fold(s, bytes_of(x, s * 16, 16), 1));
    CHECK(acc.fold(s, bytes_of(y, s * 16, 16), 2));
  }
  CHECK(acc.fold(0, bytes_of(z, 0, 16), 3)); // z stops after chunk 0
  CHECK(acc.weight_sum(0) == 6);
  CHECK(acc.weight_sum(2) == 3);
  auto out = acc.finalize(global, nullptr);
  REQUIRE(out);
  auto v = floats_of(*out);
  CHECK(v[0] == doctest::Approx((1.0 + 8 + 30) / 6));
  CHECK(v[16] == 3.0f);
  CHECK(v[47] == 3.0f);
}

TEST_CASE("a chunk outside the plan or of the wrong size changes nothing") {
  auto acc = make_acc(32, 16);
  auto global = model_of(32);
  std::vector<float> x(32, 1.0f);
  CHECK(acc.fold(1, bytes_of(x, 16, 16), 1));
  auto outside = acc.fold(2, bytes_of(x, 0, 16), 1);
  REQUIRE_FALSE(outside);
  CHECK(outside.err().code == errc::out_of_range);
  CHECK_FALSE(acc.fold(0, bytes_of(x, 0, 15), 1));
  CHECK_FALSE(acc.fold(0, bytes_of(x, 0, 17), 1));
  auto out = acc.finalize(global, nullptr);
  REQUIRE(out);
  auto v = floats_of(*out);
  CHECK(v[0] == 100.0f); // nothing folded at chunk 0
  CHECK(v[16] == 1.0f);
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
    std::vector<std::byte> global(128);
    // Three clients: 1 + 1/256 is not representable in bf16, the mean of
    // three such values is; summing in 16 bits would lose it.
    std::vector<std::byte> x(128);
    for (size_t i = 0; i < 64; ++i)
      store_element(type, x.data(), i, 1.0f + static_cast<float>(i) / 64);
    for (int k = 0; k < 3; ++k) {
      for (uint64_t s = 0; s < acc->plan().chunk_count(); ++s) {
        const auto& e = acc->plan().extent(s);
        REQUIRE(acc->fold(s, std::span{x}.subspan(e.model_offset, e.bytes), 1));
      }
    }
    auto out = acc->finalize(global, nullptr);
    REQUIRE(out);
    REQUIRE(out->size() == 128);
    for (size_t i = 0; i < 64; ++i)
      CHECK(load_element(type, out->data(), i) ==
            1.0f + static_cast<float>(i) / 64);
  }
}

TEST_CASE("finalize without any weight is our bug, reported as internal") {
  auto acc = make_acc(16, 16);
  auto global = model_of(16);
  auto out = acc.finalize(global, nullptr);
  REQUIRE_FALSE(out);
  CHECK(out.err().code == errc::internal);
}

TEST_CASE("a published value never becomes infinite: it saturates") {
  // float16: FedAvgM at learning rate 2 from 0 towards an average of
  // 60000 steps to 120000, past the largest half; float32: past the limit
  // the aggregator sets. Both are clamped, not stored as infinity.
  for (auto type : {dtype::float16, dtype::float32}) {
    CAPTURE(dtype_name(type));
    manifest m;
    m.tensors.push_back(make_tensor_info("w", type, {16}));
    auto acc = fedavg_accumulator::make(m, *chunk_plan::make(m, 1 << 10));
    REQUIRE(acc);
    acc->set_value_limit(1e30f);
    rule_config cfg;
    cfg.server_learning_rate = 2;
    auto opt = server_optimizer::make(server_rule::fedavgm, cfg, type, 16, "");
    REQUIRE(opt);
    auto width = dtype_bytes(type);
    std::vector<std::byte> global(16 * width), x(16 * width);
    float value = type == dtype::float16 ? 60000.0f : 9e29f;
    for (size_t i = 0; i < 16; ++i)
      store_element(type, x.data(), i, value);
    REQUIRE(acc->fold(0, x, 1));
    auto out = acc->finalize(global, opt->get());
    REQUIRE(out);
    auto limit = type == dtype::float16 ? 65504.0f : 1e30f;
    for (size_t i = 0; i < 16; ++i)
      CHECK(load_element(type, out->data(), i) == limit);
  }
}
