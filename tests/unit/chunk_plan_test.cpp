#include "fedcaf/chunk_plan.hpp"

#include <cstring>
#include <numeric>

#include <doctest/doctest.h>

using namespace fedcaf;

namespace {

/// A model with a large tensor, small tensors, and a 2-byte dtype.
manifest mixed_model() {
  manifest m;
  m.tensors.push_back(make_tensor_info("a", dtype::float32, {10}));
  m.tensors.push_back(make_tensor_info("big", dtype::float32, {10, 30}));
  m.tensors.push_back(make_tensor_info("c", dtype::float32, {3}));
  m.tensors.push_back(make_tensor_info("half", dtype::bfloat16, {5}));
  m.tensors.push_back(make_tensor_info("empty", dtype::float32, {0}));
  m.tensors.push_back(make_tensor_info("e", dtype::float32, {7}));
  return m;
}

} // namespace

TEST_CASE("chunks cover the model without gaps, overlaps or split elements") {
  auto m = mixed_model();
  for (uint64_t chunk : {64, 66, 100, 128, 1000, 4096}) {
    CAPTURE(chunk);
    auto plan = chunk_plan::make(m, chunk);
    REQUIRE(plan);
    uint64_t offset = 0;
    for (uint64_t s = 0; s < plan->chunk_count(); ++s) {
      const auto& e = plan->extent(s);
      CHECK(e.model_offset == offset);
      CHECK(e.bytes > 0);
      CHECK(e.bytes <= chunk);
      offset += e.bytes;
    }
    CHECK(offset == m.total_bytes());
    CHECK(plan->total_bytes() == m.total_bytes());
  }
}

TEST_CASE("a big tensor spans chunks and small tensors share one") {
  auto m = mixed_model();
  auto plan = chunk_plan::make(m, 64);
  REQUIRE(plan);
  // "big" (1200 bytes) starts in chunk 0 after "a" (40 bytes).
  CHECK(plan->extent(0).tensor_index == 0);
  CHECK(plan->extent(1).tensor_index == 1);
  CHECK(plan->extent(1).tensor_offset == 24);
  auto whole = chunk_plan::make(m, 1 << 20);
  REQUIRE(whole);
  CHECK(whole->chunk_count() == 1);
  CHECK(whole->extent(0).bytes == m.total_bytes());
}

TEST_CASE("both ends derive the same plan") {
  auto a = chunk_plan::make(mixed_model(), 100);
  auto b = chunk_plan::make(mixed_model(), 100);
  REQUIRE(a);
  REQUIRE(b);
  REQUIRE(a->chunk_count() == b->chunk_count());
  for (uint64_t s = 0; s < a->chunk_count(); ++s) {
    CHECK(a->extent(s).model_offset == b->extent(s).model_offset);
    CHECK(a->extent(s).tensor_index == b->extent(s).tensor_index);
  }
}

TEST_CASE("check refuses headers that do not match the plan") {
  auto plan = chunk_plan::make(mixed_model(), 64);
  REQUIRE(plan);
  const auto& e = plan->extent(1);
  CHECK(plan->check(1, e.tensor_index, e.tensor_offset, e.bytes));
  auto bad_offset =
      plan->check(1, e.tensor_index, e.tensor_offset + 4, e.bytes);
  REQUIRE_FALSE(bad_offset);
  CHECK(bad_offset.err().code == errc::out_of_range);
  CHECK_FALSE(plan->check(1, e.tensor_index + 1, e.tensor_offset, e.bytes));
  CHECK_FALSE(plan->check(1, e.tensor_index, e.tensor_offset, e.bytes - 4));
  CHECK_FALSE(plan->check(plan->chunk_count(), 0, 0, 4));
}

TEST_CASE("chunk sizes below 64 bytes and invalid manifests are refused") {
  CHECK_FALSE(chunk_plan::make(mixed_model(), 32));
  auto m = mixed_model();
  m.tensors[1].byte_size += 4;
  auto plan = chunk_plan::make(m, 64);
  REQUIRE_FALSE(plan);
  CHECK(plan.err().code == errc::manifest_mismatch);
}

TEST_CASE("copy_out then copy_in moves every byte between separate tensors") {
  auto m = mixed_model();
  std::vector<std::vector<std::byte>> src, dst;
  model_view src_view, dst_view;
  for (const auto& t : m.tensors) {
    src.emplace_back(t.byte_size);
    dst.emplace_back(t.byte_size);
  }
  uint8_t v = 1;
  for (size_t i = 0; i < m.tensors.size(); ++i) {
    for (auto& b : src[i])
      b = std::byte{v++};
    src_view.tensors.emplace_back(src[i]);
    dst_view.tensors.emplace_back(dst[i]);
  }
  const_model_view const_src;
  const_src.tensors.assign(src_view.tensors.begin(), src_view.tensors.end());
  auto plan = chunk_plan::make(m, 72);
  REQUIRE(plan);
  std::vector<std::byte> buffer;
  for (uint64_t s = 0; s < plan->chunk_count(); ++s) {
    buffer.resize(plan->extent(s).bytes);
    plan->copy_out(s, const_src, buffer);
    plan->copy_in(s, buffer, dst_view);
  }
  CHECK(src == dst);
}
