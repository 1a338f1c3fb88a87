#pragma once
// Client-side clipping of a model update for user-level DP-FedAvg (McMahan
// et al. 2018): the update is the trained model minus the model received,
// scaled so that its L2 norm over all tensors is at most the clip norm.
// Thread-safety: pure functions over memory the caller owns.

#include <cstddef>
#include <span>
#include <vector>

#include "fedcaf/manifest.hpp"

namespace fedcaf {

/// Copies the tensors of `model` back to back into `out` (resized).
void copy_model(const const_model_view& model, std::vector<std::byte>& out);

/// Returns ||params - base||, the L2 norm over all tensors, in double.
/// `base` holds the model received, as copy_model wrote it.
double update_norm(const manifest& layout, const const_model_view& params,
                   std::span<const std::byte> base);

/// Sets params = base + s (params - base) with s = min(1, clip / ||params -
/// base||), element by element in each tensor's dtype, and returns the norm
/// before clipping. `base` holds the model received, as copy_model wrote it.
/// REQUIRES: every tensor of `layout` floating, base.size() ==
/// layout.total_bytes(), clip > 0.
double clip_update(const manifest& layout, const model_view& params,
                   std::span<const std::byte> base, double clip);

} // namespace fedcaf
