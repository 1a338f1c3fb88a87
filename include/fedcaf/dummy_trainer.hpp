#pragma once
// Transfer-only models: a synthetic layout of N float32 tensors, and a trainer
// that does no training (optionally adding a constant to every element, so a
// round's result is checkable by arithmetic). No LibTorch.

#include <cstdint>
#include <memory>
#include <string>

#include "fedcaf/model_snapshot.hpp"
#include "fedcaf/trainer.hpp"

namespace fedcaf {

/// Returns `num_tensors` tensors "layer.<i>.weight" of dtype `type` and of
/// about equal size, adding up to `total_bytes` (rounded down to whole
/// elements). REQUIRES: num_tensors > 0, is_floating(type).
manifest synthetic_layout(uint32_t num_tensors, uint64_t total_bytes,
                          dtype type = dtype::float32);

/// Returns a snapshot of `layout` whose elements are multiples of 1/64 in
/// [-1, 1) drawn from `seed` (the same on every host): exact in F32, BF16 and
/// F16, and so are their sums with small multiples of 1/2.
/// REQUIRES: all tensors floating.
model_snapshot synthetic_model(const manifest& layout, uint64_t seed);

/// Writes synthetic_model's values into `dest` (of layout.total_bytes()),
/// releasing its pages as it goes (see byte_buffer::release).
void fill_synthetic(const manifest& layout, uint64_t seed, byte_buffer& dest);

/// Where a dummy trainer keeps its model: on the heap, or in a file mapping
/// whose pages are given back after each chunk and each piece of training.
struct dummy_storage {
  std::string file; ///< empty: heap; else a file to create (and remove)
};

/// Returns `size` bytes mapped from a new file at `path`, which is unlinked
/// at once (the mapping keeps its space until unmapped, so nothing is left
/// behind even after a crash). Returns an error naming the file otherwise.
result<byte_buffer> anonymous_file_buffer(const std::string& path,
                                          uint64_t size);

/// A trainer over `layout` (all tensors floating) whose train() adds `add`
/// to every element (nothing when add == 0), and with noise > 0 to each
/// float32 element a pseudo-random value uniform in [-noise, noise), from
/// a table of 2^20 drawn from `seed` at the start, taken in turn (updates
/// that do not compress as a constant does), and reports `samples`
/// samples.
result<std::unique_ptr<trainer>>
make_dummy_trainer(manifest layout, float add, uint64_t samples,
                   const dummy_storage& storage = {}, float noise = 0.0f,
                   uint64_t seed = 0);

} // namespace fedcaf
