#pragma once
// The chunk planner: both ends of a stream derive the same plan from the
// manifest and the chunk size, so every chunk can be checked on arrival.
// Thread-safety: immutable after make(); safe to share across threads.

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "fedcaf/error.hpp"
#include "fedcaf/manifest.hpp"
#include "fedcaf/shard.hpp"

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

  /// Returns the plan of one rank's shard: the chunks of make(m,
  /// chunk_bytes), each cut down to the bytes `slices` hold of it (those of
  /// no bytes left out). A chunk's tensor index and offset stay the whole
  /// model's (as on the wire); its model_offset and the model views that
  /// copy_in and copy_out take are the shard's own (the slices back to
  /// back: one span per tensor, of its slice's size). position() names the
  /// whole model's chunk it lies in. Fails as make() does, or
  /// (manifest_mismatch) iff a slice lies outside its tensor.
  static result<chunk_plan> make_shard(const manifest& m, uint64_t chunk_bytes,
                                       const shard_slices& slices);

  /// True iff this is a shard's plan (make_shard).
  bool sharded() const { return sharded_; }

  /// The whole model's chunk that chunk `seq` lies in (seq itself unless
  /// sharded). REQUIRES: seq < chunk_count().
  uint64_t position(uint64_t seq) const {
    return positions_.empty() ? seq : positions_[seq];
  }

  /// Calls f(model_offset, bytes, at) for each run of chunk `seq`'s bytes
  /// in the whole model's concatenated bytes (a shard's chunk may have
  /// several: its bytes of each tensor), `at` its offset in the chunk.
  template <class F> void for_each_model_run(uint64_t seq, F&& f) const {
    for_each_segment(
        seq, [&](uint32_t tensor, uint64_t local, uint64_t n, uint64_t at) {
          f(tensor_start_[tensor] + tensor_base_[tensor] + local, n, at);
        });
  }

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

  /// Calls f(std::span<const std::byte>) with the model memory chunk `seq`
  /// is made of, front to back (what copy_out copies, without a copy).
  /// REQUIRES: seq < chunk_count().
  template <class F>
  void for_each_source(uint64_t seq, const const_model_view& model,
                       F&& f) const {
    for_each_segment(
        seq, [&](uint32_t tensor, uint64_t offset, uint64_t n, uint64_t) {
          f(model.tensors[tensor].subspan(offset, n));
        });
  }

  /// Copies the payload of chunk `seq` into model memory.
  /// REQUIRES: seq < chunk_count(), src.size() == extent(seq).bytes.
  void copy_in(uint64_t seq, std::span<const std::byte> src,
               const model_view& model) const;

private:
  chunk_plan() = default;

  template <class F> void for_each_segment(uint64_t seq, F&& f) const;

  std::vector<chunk_extent> chunks_;
  std::vector<uint64_t> tensor_bytes_; ///< a shard's: its slices' sizes
  std::vector<uint64_t> tensor_base_;  ///< a shard's slice start in each
  std::vector<uint64_t> tensor_start_; ///< each tensor's model offset
  std::vector<uint64_t> positions_;    ///< a shard's: see position()
  bool sharded_ = false;
  uint64_t chunk_bytes_ = 0;
  uint64_t total_bytes_ = 0;
};

template <class F>
inline void chunk_plan::for_each_segment(uint64_t seq, F&& f) const {
  const auto& c = chunks_[seq];
  uint64_t done = 0;
  uint64_t offset = c.tensor_offset - tensor_base_[c.tensor_index];
  for (auto i = c.tensor_index; done < c.bytes; ++i) {
    auto take = std::min(c.bytes - done, tensor_bytes_[i] - offset);
    if (take > 0)
      f(i, offset, take, done);
    done += take;
    offset = 0;
  }
}

} // namespace fedcaf
