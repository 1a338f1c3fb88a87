#pragma once
// The exact grid that every memory mode sums updates on (docs/design.md,
// "Exact sums"): per run of 64 elements of a chunk, the step u = 2^(e - 27),
// 2^e the least power of two above the run's largest |g|; an update of
// weight w adds round(w (x - g) / u) per element (a relay's partial sum X of
// weight W: round((X - W g) / u)). A model-sized sum (fedavg_accumulator)
// and a window of positions (window_accumulator) make the same integers
// with these functions, so ram, window and disk modes give the same model
// bit for bit. Shared by the accumulators' sources only.
// Thread-safety: pure functions.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "fedcaf/manifest.hpp"

namespace fedcaf::grid {

constexpr uint64_t block_elements = 1024;
/// Each run of 64 elements of a block has its own grid: 2^-grid_bits of
/// its magnitude 2^exponent (the least power of two above its |g|).
constexpr uint64_t run_elements = 64;
constexpr uint64_t runs_per_block = block_elements / run_elements;
/// A chunk's distance is the sum, in order, of its segments' (16 blocks
/// each): the same bits whether its parts are folded on one thread or many.
constexpr uint64_t segment_elements = 16 * block_elements;
constexpr int grid_bits = 27;
/// Blocks whose |g| stays below 2^(least_exponent - 1) share the grid of
/// 2^least_exponent: a zero-initialised tensor (a bias, LoRA's B) takes
/// deltas of 2^-7 x 2^4 / updates before its sums go wide.
constexpr int least_exponent = -7;
/// |q| below this converts through int32 (cvtps2dq).
constexpr float int32_room = 0x1p30f;
/// |q| beyond this is saturated (int64 sums of 2^17 such never overflow).
constexpr float most_units = 0x1p46f;
/// A bound on |sum| of int64 sums stays below this (2^16 updates at the
/// most each).
constexpr uint64_t wide_limit = uint64_t{1} << 62;

/// v[i] = (x[i] - k g[i]) s[i] over n float32 values (x, g as bytes: any
/// alignment). Returns the sum of (x[i] - k g[i])^2 (in float, eight lanes)
/// and raises `most` to the largest |v[i]|'s bits (NaN above infinity). The
/// values v are one update's own arithmetic, the same in every run.
float scaled_deltas(const std::byte* x, const std::byte* g, float* v, size_t n,
                    float k, const float* s, uint32_t& most);

/// 2^e as a float, made from its bits where it is a normal float (a
/// grid's exponents are: -7 to 127 less 27, plus up to 20 weight bits),
/// as std::ldexp(1.0f, e) gives it without a library call per run.
float power_of_two(int e);

/// The integer an update adds at a value v of the grid: v rounded to the
/// nearest (ties to even), saturated at most_units; 0 for NaN (never
/// folded: the finite check refuses it first).
inline int64_t units_of(float v) {
  if (!(v == v))
    return 0;
  return static_cast<int64_t>(
      std::nearbyint(std::clamp(v, -most_units, most_units)));
}

/// The largest |x| of n float32 values, by their bits (NaN above all).
uint32_t largest_bits(const std::byte* x, size_t n);

/// A 16-bit (or float32) run of n elements as float32 bytes in `out`.
const std::byte* as_floats(dtype t, const std::byte* x, size_t n, float* out);

/// The grid exponent e of a run of n elements of type t at `g`: the least
/// power of two above their largest |g| is 2^e, at least least_exponent.
int run_exponent(dtype t, const std::byte* g, uint64_t n);

#if defined(__x86_64__) && defined(__GNUC__)
/// Eight lanes of a fused fold (a model-sized sum's int32, open
/// positions' int64): d = x - k g and q = d s of float32 values at x, g
/// (any alignment), d^2 added into `squares`, |q|'s bits kept in `top`;
/// returns the integers cvtps2dq makes of q (rounded to the nearest, ties
/// to even; INT32_MIN past int32). The operations and lanes of
/// scaled_deltas, so the same bits.
[[gnu::target("avx2")]] inline __m256i units8(const std::byte* x,
                                              const std::byte* g,
                                              const float* s, __m256 k,
                                              __m256& squares, __m256i& top) {
  auto a = _mm256_loadu_ps(reinterpret_cast<const float*>(x));
  auto b = _mm256_loadu_ps(reinterpret_cast<const float*>(g));
  auto d = _mm256_sub_ps(a, _mm256_mul_ps(k, b));
  auto q = _mm256_mul_ps(d, _mm256_loadu_ps(s));
  squares = _mm256_add_ps(squares, _mm256_mul_ps(d, d));
  top = _mm256_max_epu32(top, _mm256_and_si256(_mm256_castps_si256(q),
                                               _mm256_set1_epi32(0x7fffffff)));
  return _mm256_cvtps_epi32(q);
}

/// The lanes of units8's `squares` added in order, and `most` raised to
/// the largest of `top`'s, as scaled_deltas ends its vector part.
[[gnu::target("avx2")]] inline float lanes_sum(__m256 squares, __m256i top,
                                               uint32_t& most) {
  alignas(32) float lanes[8];
  alignas(32) uint32_t tops[8];
  _mm256_store_ps(lanes, squares);
  _mm256_store_si256(reinterpret_cast<__m256i*>(tops), top);
  float sum = 0;
  for (int j = 0; j < 8; ++j) {
    sum += lanes[j];
    most = std::max(most, tops[j]);
  }
  return sum;
}
#endif

/// Calls each(at, end, counted) over elements [0, len) of the block that
/// starts at element o of a chunk, in turn, split where the chunk's byte
/// ranges `skip` (outside the distance, in order; elements of `element`
/// bytes) begin and end: `counted` false inside them.
template <class Ranges, class F>
void split_runs(const Ranges& skip, uint64_t element, uint64_t o, uint64_t len,
                F&& each) {
  uint64_t at = 0;
  auto run = [&](uint64_t end, bool counted) {
    if (end > at)
      each(at, end, counted);
    at = std::max(at, end);
  };
  for (const auto& [from, to] : skip) {
    run(std::clamp<uint64_t>(from / element, o, o + len) - o, true);
    run(std::clamp<uint64_t>(to / element, o, o + len) - o, false);
  }
  run(len, true);
}

/// One value of a fused fold's tail: v = (x - k g) s, its d^2 added to
/// `sum` and |v|'s bits to `most`, as scaled_deltas's tail.
inline float tail_unit(const std::byte* x, const std::byte* g, float s, float k,
                       float& sum, uint32_t& most) {
  float a, b;
  std::memcpy(&a, x, 4);
  std::memcpy(&b, g, 4);
  float d = a - k * b;
  float v = d * s;
  sum += d * d;
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  most = std::max(most, bits & 0x7fffffffu);
  return v;
}

} // namespace fedcaf::grid
