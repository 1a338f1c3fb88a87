#include "fedcaf/shard.hpp"

#include <algorithm>
#include <map>

namespace fedcaf {

uint64_t rows_of(const tensor_info& t) {
  return t.shape.empty() ? 1 : t.shape[0];
}

uint64_t row_bytes(const tensor_info& t) {
  auto rows = rows_of(t);
  return rows == 0 ? 0 : t.byte_size / rows;
}

shard_slices dim0_slices(const manifest& m, uint32_t rank, uint32_t ranks) {
  shard_slices out;
  out.reserve(m.tensors.size());
  for (const auto& t : m.tensors) {
    auto rows = rows_of(t);
    auto per = (rows + ranks - 1) / ranks; // torch.chunk's split size
    auto begin = std::min(rows, per * rank);
    auto end = std::min(rows, per * (rank + 1));
    auto row = row_bytes(t);
    out.push_back({begin * row, end * row});
  }
  return out;
}

tensor_index index_tensors(const manifest& m) {
  tensor_index index;
  for (size_t i = 0; i < m.tensors.size(); ++i)
    index.emplace(m.tensors[i].name, i);
  return index;
}

result<shard_slices> slices_of(const manifest& m, const shard_spec& spec) {
  if (spec.slices.empty())
    return dim0_slices(m, spec.rank, spec.ranks);
  return slices_of(m, index_tensors(m), spec);
}

result<shard_slices> slices_of(const manifest& m, const tensor_index& index,
                               const shard_spec& spec) {
  if (spec.slices.empty())
    return dim0_slices(m, spec.rank, spec.ranks);
  shard_slices out(m.tensors.size());
  std::vector<bool> named(m.tensors.size());
  auto refuse = [](const std::string& why) {
    return error{errc::manifest_mismatch, "shard slices: " + why};
  };
  for (const auto& s : spec.slices) {
    auto it = index.find(s.tensor);
    if (it == index.end())
      return refuse("no tensor '" + s.tensor + "' in the model");
    if (named[it->second])
      return refuse("tensor '" + s.tensor + "' named twice");
    named[it->second] = true;
    const auto& t = m.tensors[it->second];
    if (s.begin_row > s.end_row || s.end_row > rows_of(t))
      return refuse("rows [" + std::to_string(s.begin_row) + ", " +
                    std::to_string(s.end_row) + ") of '" + s.tensor +
                    "', which has " + std::to_string(rows_of(t)) + " rows");
    auto row = row_bytes(t);
    out[it->second] = {s.begin_row * row, s.end_row * row};
  }
  return out;
}

namespace {

std::string rows_text(const tensor_info& t, uint64_t begin, uint64_t end) {
  auto row = row_bytes(t);
  return "rows [" + std::to_string(row ? begin / row : 0) + ", " +
         std::to_string(row ? end / row : 0) + ") of tensor '" + t.name + "'";
}

} // namespace

result<void> check_cover(const manifest& m,
                         const std::vector<shard_slices>& by_rank) {
  for (size_t i = 0; i < m.tensors.size(); ++i) {
    const auto& t = m.tensors[i];
    std::vector<std::pair<byte_range, size_t>> held; // range, rank
    for (size_t r = 0; r < by_rank.size(); ++r)
      if (i < by_rank[r].size() && by_rank[r][i].size() > 0)
        held.push_back({by_rank[r][i], r});
    std::sort(held.begin(), held.end(), [](const auto& a, const auto& b) {
      return a.first.begin < b.first.begin;
    });
    uint64_t covered = 0;
    size_t last_rank = 0;
    for (const auto& [range, rank] : held) {
      if (range.begin > covered)
        return error{errc::manifest_mismatch,
                     "shard slices leave a gap: no rank holds " +
                         rows_text(t, covered, range.begin)};
      if (range.begin < covered)
        return error{
            errc::manifest_mismatch,
            "shard slices overlap: ranks " + std::to_string(last_rank) +
                " and " + std::to_string(rank) + " both hold " +
                rows_text(t, range.begin, std::min(covered, range.end))};
      covered = range.end;
      last_rank = rank;
    }
    if (covered < t.byte_size)
      return error{errc::manifest_mismatch,
                   "shard slices leave a gap: no rank holds " +
                       rows_text(t, covered, t.byte_size)};
  }
  return {};
}

std::string rank_key(const std::string& client_id, uint32_t rank) {
  return client_id + " rank " + std::to_string(rank);
}

uint64_t shard_bytes(const shard_slices& slices) {
  uint64_t n = 0;
  for (const auto& s : slices)
    n += s.size();
  return n;
}

manifest local_layout(const manifest& m, const shard_slices& slices) {
  manifest out = m;
  for (size_t i = 0; i < out.tensors.size(); ++i) {
    auto& t = out.tensors[i];
    auto row = row_bytes(m.tensors[i]);
    auto size = i < slices.size() ? slices[i].size() : 0;
    if (t.shape.empty())
      t.shape = {size > 0 ? 1u : 0u};
    else
      t.shape[0] = row ? size / row : 0;
    t.byte_size = size;
  }
  return out;
}

} // namespace fedcaf
