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

#include <cstddef>
#include <cstdint>

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
int64_t units_of(float v);

/// The largest |x| of n float32 values, by their bits (NaN above all).
uint32_t largest_bits(const std::byte* x, size_t n);

/// A 16-bit (or float32) run of n elements as float32 bytes in `out`.
const std::byte* as_floats(dtype t, const std::byte* x, size_t n, float* out);

/// The grid exponent e of a run of n elements of type t at `g`: the least
/// power of two above their largest |g| is 2^e, at least least_exponent.
int run_exponent(dtype t, const std::byte* g, uint64_t n);

} // namespace fedcaf::grid
