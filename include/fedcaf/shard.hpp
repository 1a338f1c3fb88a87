#pragma once
// What one rank of a sharded client holds: of every tensor, one range of
// rows (dim 0), possibly empty. By default rank R of N holds
// torch.chunk(t, N, dim=0)[R]: rows [R c, min((R+1) c, rows)) with
// c = ceil(rows / N) (a 0-d tensor counts as one row); a rank may declare
// its own rows instead (tensor- or pipeline-parallel layouts). A range of
// rows is a range of bytes in the tensor (row-major), so a rank's shard is
// one byte range per tensor, and the ranks of a client together must cover
// every byte of the model exactly once.
// Thread-safety: value types and pure functions.

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "fedcaf/error.hpp"
#include "fedcaf/manifest.hpp"

namespace fedcaf {

/// The most ranks one sharded client may have.
inline constexpr uint32_t max_shard_ranks = 4096;

/// Rows [begin_row, end_row) of the tensor named `tensor`, as a rank
/// declares them (config `shard.slices`, Hello.slices).
struct declared_slice {
  std::string tensor;
  uint64_t begin_row = 0;
  uint64_t end_row = 0;

  friend bool operator==(const declared_slice&,
                         const declared_slice&) = default;
};

/// Which rank of how many a client process is, and (empty: the default
/// dim-0 chunks) the rows it declares it holds.
struct shard_spec {
  uint32_t rank = 0;
  uint32_t ranks = 1; ///< 1: not sharded
  std::vector<declared_slice> slices{};

  bool sharded() const { return ranks > 1; }
  friend bool operator==(const shard_spec&, const shard_spec&) = default;
};

/// Bytes [begin, end) of one tensor.
struct byte_range {
  uint64_t begin = 0;
  uint64_t end = 0;
  uint64_t size() const { return end - begin; }
  friend bool operator==(const byte_range&, const byte_range&) = default;
};

/// A rank's bytes of each tensor, in manifest order.
using shard_slices = std::vector<byte_range>;

/// The rows of `t` (its first dimension; 1 for a 0-d tensor).
uint64_t rows_of(const tensor_info& t);

/// The bytes of one row of `t`.
uint64_t row_bytes(const tensor_info& t);

/// Rank `rank` of `ranks`' part of every tensor of `m` as torch.chunk(t,
/// ranks, dim=0)[rank] gives it. REQUIRES: rank < ranks.
shard_slices dim0_slices(const manifest& m, uint32_t rank, uint32_t ranks);

/// What `spec` holds of `m`: its declared rows (tensors it names not, it
/// holds nothing of), or dim0_slices without any. Returns an error
/// (manifest_mismatch) naming the tensor iff a declared slice names no
/// tensor of `m`, a tensor twice, or rows beyond its own.
result<shard_slices> slices_of(const manifest& m, const shard_spec& spec);

/// The index of `m`'s tensors by name (for slices_of, built once).
using tensor_index = std::map<std::string, size_t, std::less<>>;
tensor_index index_tensors(const manifest& m);

/// slices_of, with `m`'s tensors looked up in `index`.
result<shard_slices> slices_of(const manifest& m, const tensor_index& index,
                               const shard_spec& spec);

/// Returns ok iff `by_rank` (the slices of ranks 0, 1, ...) cover every
/// byte of `m` exactly once; else an error (manifest_mismatch) naming the
/// tensor, the rows and the ranks: a gap or an overlap.
result<void> check_cover(const manifest& m,
                         const std::vector<shard_slices>& by_rank);

/// The key a rank's connection is registered under: "<id> rank <r>" (a
/// client id has no space, so no client takes it).
std::string rank_key(const std::string& client_id, uint32_t rank);

/// The bytes `slices` hold in all.
uint64_t shard_bytes(const shard_slices& slices);

/// `m` cut down to what `slices` hold: each tensor's byte size is its
/// slice's, its first dimension the slice's rows (for the trainer of one
/// rank, whose memory holds only its shard).
manifest local_layout(const manifest& m, const shard_slices& slices);

} // namespace fedcaf
