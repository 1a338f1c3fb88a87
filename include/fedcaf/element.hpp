#pragma once
// Conversions between the floating dtypes a model may have on the wire and
// float, the type every accumulator sums in. Thread-safety: pure functions.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "fedcaf/manifest.hpp"

namespace fedcaf {

/// The largest finite magnitude an element of `t` holds, as a float
/// (float16: 65504; bfloat16: (2 - 2^-7) 2^127, since FLT_MAX rounds up to
/// its infinity; float32: FLT_MAX).
inline float finite_limit(dtype t) {
  if (t == dtype::float16)
    return 65504.0f;
  if (t == dtype::bfloat16)
    return std::ldexp(255.0f / 128.0f, 127);
  return std::numeric_limits<float>::max();
}

/// Clamps every value of `xs` into [-limit, limit], so that storing it in
/// the model's element type cannot make an infinity.
inline void saturate(float* xs, size_t n, float limit) {
  for (size_t i = 0; i < n; ++i)
    xs[i] = std::clamp(xs[i], -limit, limit);
}

/// Returns true iff `t` is float32, bfloat16 or float16.
inline bool is_floating(dtype t) {
  return t == dtype::float32 || t == dtype::bfloat16 || t == dtype::float16;
}

inline float bf16_to_float(uint16_t x) {
  uint32_t bits = uint32_t{x} << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

/// Rounds to nearest even, as PyTorch does; NaN stays NaN.
inline uint16_t float_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u)
    return static_cast<uint16_t>((bits >> 16) | 0x40u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

// clang before 15 has no _Float16 on x86 (the fuzz build); its __fp16
// converts with the same IEEE rounding.
#if defined(__clang__) && __clang_major__ < 15
using half_float = __fp16;
#else
using half_float = _Float16;
#endif

inline float f16_to_float(uint16_t x) {
  half_float h;
  std::memcpy(&h, &x, sizeof h);
  return static_cast<float>(h);
}

inline uint16_t float_to_f16(float f) {
  auto h = static_cast<half_float>(f);
  uint16_t x;
  std::memcpy(&x, &h, sizeof x);
  return x;
}

/// Reads element i of an array of `t` as float. REQUIRES: is_floating(t).
inline float load_element(dtype t, const std::byte* base, size_t i) {
  if (t == dtype::float32) {
    float f;
    std::memcpy(&f, base + i * 4, 4);
    return f;
  }
  uint16_t x;
  std::memcpy(&x, base + i * 2, 2);
  return t == dtype::bfloat16 ? bf16_to_float(x) : f16_to_float(x);
}

/// Writes element i of an array of `t`. REQUIRES: is_floating(t).
inline void store_element(dtype t, std::byte* base, size_t i, float v) {
  if (t == dtype::float32) {
    std::memcpy(base + i * 4, &v, 4);
    return;
  }
  uint16_t x = t == dtype::bfloat16 ? float_to_bf16(v) : float_to_f16(v);
  std::memcpy(base + i * 2, &x, 2);
}

/// Returns the one floating dtype all tensors of `m` share, or an error
/// naming the first tensor that differs or is not floating.
result<dtype> common_floating_dtype(const manifest& m);

} // namespace fedcaf
