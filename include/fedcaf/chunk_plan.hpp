#pragma once
// The chunk planner: both ends of a stream derive the same plan from the
// manifest and the chunk size, so every chunk can be checked on arrival.
// Thread-safety: immutable after make(); safe to share across threads.

#include <cstdint>
#include <span>
#include <vector>

#include "fedcaf/error.hpp"
#include "fedcaf/manifest.hpp"

namespace fedcaf {

/// Where one chunk lies in the model.
struct chunk_extent {
  uint64_t model_offset = 0;  ///< offset in the concatenated tensor bytes
  uint64_t bytes = 0;         ///< payload size, at most the plan's chunk size
  uint32_t tensor_index = 0;  ///< tensor holding the first byte
  uint64_t tensor_offset = 0; ///< offset of the first byte in that tensor
};

/// The cut of a model into chunks. Chunks follow each other without gaps; a
/// large tensor spans many chunks and small tensors share one. A chunk never
/// splits an element: its end is rounded down to the element size of the
/// tensor it ends in.
class chunk_plan {
public:
  /// Returns the plan for `m` with chunks of at most `chunk_bytes`, or an
  /// error iff the manifest is invalid or chunk_bytes < 64.
  static result<chunk_plan> make(const manifest& m, uint64_t chunk_bytes);

  uint64_t chunk_count() const { return chunks_.size(); }
  uint64_t chunk_bytes() const { return chunk_bytes_; }
  uint64_t total_bytes() const { return total_bytes_; }

  /// REQUIRES: seq < chunk_count().
  const chunk_extent& extent(uint64_t seq) const { return chunks_[seq]; }

  /// Returns ok iff a chunk with these header fields is chunk `seq` of this
  /// plan: the sequence exists, and tensor index, offset and size match.
  result<void> check(uint64_t seq, uint32_t tensor_index,
                     uint64_t tensor_offset, uint64_t bytes) const;

  /// Copies chunk `seq` out of model memory into `dst`.
  /// REQUIRES: seq < chunk_count(), dst.size() == extent(seq).bytes.
  void copy_out(uint64_t seq, const const_model_view& model,
                std::span<std::byte> dst) const;

  /// Copies the payload of chunk `seq` into model memory.
  /// REQUIRES: seq < chunk_count(), src.size() == extent(seq).bytes.
  void copy_in(uint64_t seq, std::span<const std::byte> src,
               const model_view& model) const;

private:
  chunk_plan() = default;

  template <class F> void for_each_segment(uint64_t seq, F&& f) const;

  std::vector<chunk_extent> chunks_;
  std::vector<uint64_t> tensor_bytes_;
  uint64_t chunk_bytes_ = 0;
  uint64_t total_bytes_ = 0;
};

} // namespace fedcaf
