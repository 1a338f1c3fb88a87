#include "fedcaf/shard.hpp"

#include <cstring>
#include <numeric>

#include <doctest/doctest.h>

#include "fedcaf/chunk_plan.hpp"

using namespace fedcaf;

namespace {

/// Tensors with more, as many and fewer rows than ranks, a 0-d one, an
/// empty one and a 2-byte dtype.
manifest mixed_model() {
  manifest m;
  m.tensors.push_back(make_tensor_info("scalar", dtype::float32, {}));
  m.tensors.push_back(make_tensor_info("big", dtype::float32, {10, 30}));
  m.tensors.push_back(make_tensor_info("three", dtype::float32, {3}));
  m.tensors.push_back(make_tensor_info("half", dtype::bfloat16, {5, 2}));
  m.tensors.push_back(make_tensor_info("empty", dtype::float32, {0}));
  m.tensors.push_back(make_tensor_info("odd", dtype::float32, {7, 3}));
  return m;
}

std::vector<std::byte> numbered(uint64_t n) {
  std::vector<std::byte> b(n);
  for (uint64_t i = 0; i < n; ++i)
    b[i] = static_cast<std::byte>((i * 7 + 3) & 0xff);
  return b;
}

} // namespace

TEST_CASE("dim-0 slices are torch.chunk's: rows ceil(rows / N) each, the "
          "last ones short or empty") {
  auto m = mixed_model();
  // torch.chunk(torch.zeros(10, 30), 4)  -> rows 3, 3, 3, 1
  // torch.chunk(torch.zeros(3), 4)       -> 1, 1, 1 (a 4th chunk missing)
  // torch.chunk(torch.zeros(7, 3), 4)    -> 2, 2, 2, 1
  std::vector<uint64_t> big_rows, three_rows, odd_rows, scalar_bytes;
  for (uint32_t r = 0; r < 4; ++r) {
    auto s = dim0_slices(m, r, 4);
    REQUIRE(s.size() == m.tensors.size());
    scalar_bytes.push_back(s[0].size());
    big_rows.push_back(s[1].size() / (30 * 4));
    three_rows.push_back(s[2].size() / 4);
    odd_rows.push_back(s[5].size() / 12);
  }
  CHECK(big_rows == std::vector<uint64_t>{3, 3, 3, 1});
  CHECK(three_rows == std::vector<uint64_t>{1, 1, 1, 0});
  CHECK(odd_rows == std::vector<uint64_t>{2, 2, 2, 1});
  CHECK(scalar_bytes == std::vector<uint64_t>{4, 0, 0, 0});
  std::vector<shard_slices> all;
  for (uint32_t r = 0; r < 4; ++r)
    all.push_back(dim0_slices(m, r, 4));
  CHECK(check_cover(m, all));
}

TEST_CASE("declared slices must name the model's tensors, and together "
          "cover it exactly once") {
  manifest m;
  m.tensors.push_back(make_tensor_info("w", dtype::float32, {8, 2}));
  m.tensors.push_back(make_tensor_info("b", dtype::float32, {8}));
  shard_spec a{0, 2, {{"w", 0, 4}, {"b", 0, 8}}};
  shard_spec b{1, 2, {{"w", 4, 8}}};
  auto sa = slices_of(m, a);
  auto sb = slices_of(m, b);
  REQUIRE(sa);
  REQUIRE(sb);
  CHECK(check_cover(m, {*sa, *sb}));

  shard_spec gap{1, 2, {{"w", 5, 8}}};
  auto cover = check_cover(m, {*sa, *slices_of(m, gap)});
  REQUIRE(!cover);
  CHECK(cover.err().message ==
        "shard slices leave a gap: no rank holds rows [4, 5) of tensor 'w'");

  shard_spec overlap{1, 2, {{"w", 3, 8}, {"b", 7, 8}}};
  cover = check_cover(m, {*sa, *slices_of(m, overlap)});
  REQUIRE(!cover);
  CHECK(cover.err().message == "shard slices overlap: ranks 0 and 1 both "
                               "hold rows [3, 4) of tensor 'w'");

  shard_spec unknown{0, 2, {{"x", 0, 1}}};
  auto bad = slices_of(m, unknown);
  REQUIRE(!bad);
  CHECK(bad.err().message == "shard slices: no tensor 'x' in the model");
  shard_spec beyond{0, 2, {{"b", 2, 9}}};
  bad = slices_of(m, beyond);
  REQUIRE(!bad);
  CHECK(bad.err().message ==
        "shard slices: rows [2, 9) of 'b', which has 8 rows");
  shard_spec twice{0, 2, {{"b", 0, 1}, {"b", 1, 2}}};
  CHECK(!slices_of(m, twice));
}

TEST_CASE("a shard's plan cuts the model's chunks down to the shard, and "
          "its chunks put every byte where the whole model has it") {
  auto m = mixed_model();
  auto total = m.total_bytes();
  auto model = numbered(total);
  for (uint64_t chunk : {64, 100, 256, 4096}) {
    for (uint32_t ranks : {2u, 3u, 4u, 11u}) {
      CAPTURE(chunk);
      CAPTURE(ranks);
      auto whole = chunk_plan::make(m, chunk);
      REQUIRE(whole);
      std::vector<int> covered(total, 0);
      for (uint32_t r = 0; r < ranks; ++r) {
        auto slices = dim0_slices(m, r, ranks);
        auto plan = chunk_plan::make_shard(m, chunk, slices);
        REQUIRE(plan);
        CHECK(plan->sharded());
        CHECK(plan->total_bytes() == shard_bytes(slices));
        // The rank's memory: its slices back to back, as its trainer holds
        // them; filled from the whole model, then read back chunk by chunk.
        std::vector<std::byte> local(plan->total_bytes());
        auto layout = local_layout(m, slices);
        model_view view = split_contiguous(layout, std::span<std::byte>{local});
        uint64_t local_offset = 0, last_position = 0;
        for (uint64_t s = 0; s < plan->chunk_count(); ++s) {
          const auto& e = plan->extent(s);
          CHECK(e.model_offset == local_offset);
          CHECK(e.bytes > 0);
          CHECK(e.bytes <= chunk);
          CHECK(plan->position(s) >= last_position);
          last_position = plan->position(s);
          const auto& w = whole->extent(plan->position(s));
          std::vector<std::byte> bytes(e.bytes);
          plan->for_each_model_run(
              s, [&](uint64_t at_model, uint64_t n, uint64_t at) {
                CHECK(at_model >= w.model_offset);
                CHECK(at_model + n <= w.model_offset + w.bytes);
                std::memcpy(bytes.data() + at, model.data() + at_model, n);
                for (uint64_t i = 0; i < n; ++i)
                  ++covered[at_model + i];
              });
          plan->copy_in(s, bytes, view);
          std::vector<std::byte> back(e.bytes);
          const_model_view cview;
          cview.tensors.assign(view.tensors.begin(), view.tensors.end());
          plan->copy_out(s, cview, back);
          CHECK(back == bytes);
          CHECK(plan->check(s, e.tensor_index, e.tensor_offset, e.bytes));
          local_offset += e.bytes;
        }
        CHECK(local_offset == plan->total_bytes());
        // Each tensor's slice holds the whole model's bytes there.
        uint64_t at = 0;
        for (size_t t = 0; t < m.tensors.size(); ++t) {
          uint64_t start = std::accumulate(
              m.tensors.begin(), m.tensors.begin() + static_cast<long>(t),
              uint64_t{0},
              [](uint64_t a, const tensor_info& x) { return a + x.byte_size; });
          CHECK(std::memcmp(local.data() + at,
                            model.data() + start + slices[t].begin,
                            slices[t].size()) == 0);
          at += slices[t].size();
        }
      }
      CHECK(std::all_of(covered.begin(), covered.end(),
                        [](int n) { return n == 1; }));
    }
  }
}
