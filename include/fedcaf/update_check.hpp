#pragma once
// Checks of an uploaded update, chunk by chunk, before a chunk touches the
// running sum: no NaN or infinity, and (optionally) a bound on the update's
// L2 distance from the global model. Thread-safety: free functions over
// values; safe anywhere.

#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "fedcaf/chunk_plan.hpp"
#include "fedcaf/config/words.hpp"
#include "fedcaf/error.hpp"
#include "fedcaf/manifest.hpp"
#include "fedcaf/work_pool.hpp"

namespace fedcaf {

/// Returns an error (poisoned_update, naming the tensor) iff the payload of
/// chunk `seq` holds a NaN, an infinity, or a value of magnitude above
/// `max_abs` in a floating-point tensor. The aggregator's bound keeps the
/// weighted sum of a round's updates finite (see aggregator.cpp).
/// REQUIRES: bytes.size() == plan.extent(seq).bytes, plan made from m.
result<void>
check_finite(const manifest& m, const chunk_plan& plan, uint64_t seq,
             std::span<const std::byte> bytes,
             double max_abs = std::numeric_limits<double>::infinity());

/// True iff any of the elements of type t in `bytes` is NaN, infinite or
/// of a magnitude above max_abs: check_finite's test, over bytes of one
/// dtype (none for an integer dtype).
bool any_out_of_bounds(dtype t, std::span<const std::byte> bytes,
                       double max_abs);

/// True iff tensor `t` takes no part in an update's distance: an integer
/// or bool tensor (carried), or a BatchNorm running statistic (PyTorch's
/// `.running_mean`, `.running_var`), which honest training moves far from
/// its initial value (a running_var of ones becomes the activations'
/// variance: 40 x the CNN's norm in one round, measured).
bool outside_distance(const tensor_info& t);

/// The byte ranges [begin, end) of chunk `seq` that lie in tensors outside
/// the distance, in order. REQUIRES: plan made from m.
std::vector<std::pair<uint64_t, uint64_t>>
uncounted_ranges(const manifest& m, const chunk_plan& plan, uint64_t seq);

/// Returns the sum of (update - k global)^2 (k: a relay's partial sum of
/// updates of total weight k, measured against k times the model) over the
/// floating-point elements
/// of chunk `seq` (not of integer or bool tensors, nor of BatchNorm running
/// statistics, `.running_mean` and `.running_var`), reading the global model's bytes at the same place of
/// `global` (all tensors back to back). The sum is the sum, in order, of
/// the chunk's segments' (64 KiB of its bytes each, an element in the
/// segment its first byte lies in), each summed alone, so `split` (the
/// segments measured in parts on its pool) changes no bit of it.
/// REQUIRES: as check_finite; global.size() == m.total_bytes().
double squared_distance(const manifest& m, const chunk_plan& plan, uint64_t seq,
                        std::span<const std::byte> update,
                        std::span<const std::byte> global, double k = 1,
                        work_split split = {});

/// check_finite and squared_distance of the same chunk in one pass over
/// `update` (float32 and bfloat16 tensors; the others in two): the error
/// check_finite returns, else the distance squared_distance returns (to
/// the bit where it is finite; a NaN's sign may differ, from a NaN in
/// `global`), with the same bits on one thread or `split` over several
/// (the first tensor out of bounds in the chunk's order named on both).
/// REQUIRES: as squared_distance.
result<double> checked_distance(const manifest& m, const chunk_plan& plan,
                                uint64_t seq, std::span<const std::byte> update,
                                std::span<const std::byte> global,
                                double max_abs, double k = 1,
                                work_split split = {});

/// Returns the sum of x^2 over the elements of chunk `seq` that
/// squared_distance counts, of `model` (all tensors back to back): its share of ||model||^2.
/// REQUIRES: plan made from m, model.size() == m.total_bytes().
double squared_norm(const manifest& m, const chunk_plan& plan, uint64_t seq,
                    std::span<const std::byte> model);

/// aggregator_kwargs.tensor_rules over the model `m`: true at the index of
/// each tensor the server keeps (the first pattern, fnmatch, that matches
/// its name says keep). Returns an error (bad_config) iff a pattern matches
/// no tensor of `m`: a misspelled name would otherwise change nothing.
result<std::vector<bool>>
kept_tensors(const manifest& m,
             const std::vector<std::pair<std::string, tensor_rule>>& rules);

/// Copies, over each piece of chunk `seq` that lies in a tensor `kept`
/// marks, the global model's bytes there into `update`: those tensors are
/// aggregated as every client had sent the server's own values, so every
/// rule leaves them as they were. Returns true iff it copied any.
/// REQUIRES: update.size() == plan.extent(seq).bytes, global.size() ==
/// m.total_bytes(), kept.size() == m.tensors.size().
bool keep_kept(const manifest& m, const chunk_plan& plan, uint64_t seq,
               const std::vector<bool>& kept, std::span<std::byte> update,
               std::span<const std::byte> global);

/// True iff chunk `seq` has a piece in a tensor `kept` marks.
bool touches_kept(const manifest& m, const chunk_plan& plan, uint64_t seq,
                  const std::vector<bool>& kept);

} // namespace fedcaf
