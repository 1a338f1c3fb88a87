#pragma once
// Integer and bool tensors (BatchNorm's num_batches_tracked, int position
// buffers, bool masks) travel and are averaged in the model's floating
// dtype: a model held with them is "carried" as a layout whose every tensor
// is of that one dtype, each carried tensor marked with the dtype the model
// holds it in (tensor_info::held). The averaging machinery then sees one
// floating dtype; the ends that hold the model convert: exactly on the way
// in (every value must be representable), rounding on the way out. The
// rule this gives: an integer tensor becomes the weighted mean of the
// clients' values rounded to the nearest integer (ties to even) and
// clamped to its dtype's range; a bool tensor the weighted majority (mean
// at least 0.5 is true). Thread-safety: pure functions.

#include <cstdint>
#include <span>

#include "fedcaf/error.hpp"
#include "fedcaf/manifest.hpp"

namespace fedcaf {

/// Returns true iff `t` is an integer or bool dtype a model may hold and
/// fedcaf carries (int64, int32, int16, int8, uint8, bool).
bool is_carried_kind(dtype t);

/// The largest integer magnitude `t` (a floating dtype) holds exactly:
/// 2^24 (float32), 2^11 (float16), 2^8 (bfloat16).
uint64_t exact_integer_limit(dtype t);

/// Returns the layout `held` travels as: every integer or bool tensor typed
/// as the model's one floating dtype (its byte size adjusted), `held` set
/// to its own; floating tensors as they are. Errors (unsupported_dtype)
/// name the first tensor of another floating dtype than the first one's,
/// a float64 tensor, or a model of no floating tensor at all.
result<manifest> carry_layout(const manifest& held);

/// Converts the values of carried tensor `t` from the model's bytes
/// `from` (in t.held) into travelling bytes `to` (in t.type). Returns an
/// error (unsupported_dtype) naming the tensor iff a value is not exact in
/// t.type (beyond exact_integer_limit).
result<void> widen(const tensor_info& t, std::span<const std::byte> from,
                   std::span<std::byte> to);

/// Converts the values of carried tensor `t` from travelling bytes `from`
/// (in t.type) into the model's bytes `to` (in t.held): rounded to the
/// nearest integer (ties to even) and clamped to t.held's range (NaN: 0);
/// bool: true iff at least 0.5.
void narrow(const tensor_info& t, std::span<const std::byte> from,
            std::span<std::byte> to);

/// Returns the byte size tensor `t` has as the model holds it.
uint64_t held_bytes(const tensor_info& t);

} // namespace fedcaf
