#include "fedcaf/chunk_plan.hpp"

#include <algorithm>
#include <cassert>
#include <cstring>
#include <optional>

namespace fedcaf {

result<chunk_plan> chunk_plan::make(const manifest& m, uint64_t chunk_bytes) {
  if (auto ok = validate(m); !ok)
    return ok.err();
  FEDCAF_REQUIRE(chunk_bytes >= 64, errc::bad_config, chunk_bytes);
  chunk_plan plan;
  plan.chunk_bytes_ = chunk_bytes;
  plan.total_bytes_ = m.total_bytes();
  uint64_t model_offset = 0;
  chunk_extent open;
  bool is_open = false;
  for (uint32_t i = 0; i < m.tensors.size(); ++i) {
    const auto& t = m.tensors[i];
    plan.tensor_bytes_.push_back(t.byte_size);
    plan.tensor_base_.push_back(0);
    plan.tensor_start_.push_back(model_offset);
    auto element = dtype_bytes(t.type);
    uint64_t offset = 0;
    while (offset < t.byte_size) {
      if (!is_open) {
        open = {model_offset, 0, i, offset};
        is_open = true;
      }
      auto room = (chunk_bytes - open.bytes) / element * element;
      auto take = std::min(room, t.byte_size - offset);
      open.bytes += take;
      offset += take;
      model_offset += take;
      if (chunk_bytes - open.bytes < element || open.bytes == chunk_bytes) {
        plan.chunks_.push_back(open);
        is_open = false;
      }
    }
  }
  if (is_open && open.bytes > 0)
    plan.chunks_.push_back(open);
  return plan;
}

result<void> chunk_plan::check(uint64_t seq, uint32_t tensor_index,
                               uint64_t tensor_offset, uint64_t bytes) const {
  FEDCAF_REQUIRE(seq < chunks_.size(), errc::out_of_range, seq, chunks_.size());
  const auto& c = chunks_[seq];
  FEDCAF_REQUIRE(tensor_index == c.tensor_index, errc::out_of_range,
                 tensor_index, c.tensor_index);
  FEDCAF_REQUIRE(tensor_offset == c.tensor_offset, errc::out_of_range,
                 tensor_offset, c.tensor_offset);
  FEDCAF_REQUIRE(bytes == c.bytes, errc::out_of_range, bytes, c.bytes);
  return {};
}

result<chunk_plan> chunk_plan::make_shard(const manifest& m,
                                          uint64_t chunk_bytes,
                                          const shard_slices& slices) {
  auto whole = make(m, chunk_bytes);
  if (!whole)
    return whole.err();
  FEDCAF_REQUIRE(slices.size() == m.tensors.size(), errc::manifest_mismatch,
                 slices.size(), m.tensors.size());
  chunk_plan plan;
  plan.sharded_ = true;
  plan.chunk_bytes_ = chunk_bytes;
  plan.tensor_start_ = whole->tensor_start_;
  std::vector<uint64_t> local_start;
  for (size_t i = 0; i < slices.size(); ++i) {
    const auto& s = slices[i];
    FEDCAF_REQUIRE(s.begin <= s.end && s.end <= m.tensors[i].byte_size,
                   errc::manifest_mismatch, i, s.begin, s.end,
                   m.tensors[i].byte_size);
    local_start.push_back(plan.total_bytes_);
    plan.tensor_bytes_.push_back(s.size());
    plan.tensor_base_.push_back(s.begin);
    plan.total_bytes_ += s.size();
  }
  for (uint64_t k = 0; k < whole->chunk_count(); ++k) {
    std::optional<chunk_extent> piece;
    whole->for_each_segment(k, [&](uint32_t i, uint64_t offset, uint64_t n,
                                   uint64_t) {
      auto a = std::max(offset, slices[i].begin);
      auto b = std::min(offset + n, slices[i].end);
      if (a >= b)
        return;
      if (!piece)
        piece = chunk_extent{local_start[i] + (a - slices[i].begin), 0, i, a};
      piece->bytes += b - a;
    });
    if (piece) {
      plan.chunks_.push_back(*piece);
      plan.positions_.push_back(k);
    }
  }
  return plan;
}

void chunk_plan::copy_out(uint64_t seq, const const_model_view& model,
                          std::span<std::byte> dst) const {
  assert(dst.size() == chunks_[seq].bytes);
  for_each_segment(
      seq, [&](uint32_t tensor, uint64_t offset, uint64_t n, uint64_t at) {
        std::memcpy(dst.data() + at, model.tensors[tensor].data() + offset, n);
      });
}

void chunk_plan::copy_in(uint64_t seq, std::span<const std::byte> src,
                         const model_view& model) const {
  assert(src.size() == chunks_[seq].bytes);
  for_each_segment(
      seq, [&](uint32_t tensor, uint64_t offset, uint64_t n, uint64_t at) {
        std::memcpy(model.tensors[tensor].data() + offset, src.data() + at, n);
      });
}

} // namespace fedcaf
