#include "fedcaf/grid_units.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "fedcaf/element.hpp"
#include "fedcaf/kernel.hpp"

namespace fedcaf::grid {

namespace {

using v8f = float __attribute__((vector_size(32)));
using v8u = uint32_t __attribute__((vector_size(32)));

FEDCAF_KERNEL float grid_scaled_deltas(const std::byte* x, const std::byte* g,
                                       float* v, size_t n, float k,
                                       const float* s, uint32_t& most) {
  v8f squares = {};
  v8u top = {};
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    v8f a, b;
    std::memcpy(&a, x + i * 4, sizeof a);
    std::memcpy(&b, g + i * 4, sizeof b);
    v8f d = a - k * b;
    v8f scale;
    std::memcpy(&scale, s + i, sizeof scale);
    v8f q = d * scale;
    std::memcpy(v + i, &q, sizeof q);
    squares += d * d;
    v8u bits;
    std::memcpy(&bits, &q, sizeof bits);
    bits &= 0x7fffffffu;
    auto above = reinterpret_cast<v8u>(bits > top);
    top = (bits & above) | (top & ~above);
  }
  float sum = 0;
  for (int j = 0; j < 8; ++j) {
    sum += squares[j];
    most = std::max(most, static_cast<uint32_t>(top[j]));
  }
  for (; i < n; ++i) {
    float a, b;
    std::memcpy(&a, x + i * 4, 4);
    std::memcpy(&b, g + i * 4, 4);
    float d = a - k * b;
    v[i] = d * s[i];
    sum += d * d;
    uint32_t bits;
    std::memcpy(&bits, &v[i], 4);
    most = std::max(most, bits & 0x7fffffffu);
  }
  return sum;
}

FEDCAF_KERNEL uint32_t grid_largest_bits(const std::byte* x, size_t n) {
  uint32_t most = 0;
  for (size_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, x + i * 4, 4);
    most = std::max(most, bits & 0x7fffffffu);
  }
  return most;
}

} // namespace

float scaled_deltas(const std::byte* x, const std::byte* g, float* v, size_t n,
                    float k, const float* s, uint32_t& most) {
  return grid_scaled_deltas(x, g, v, n, k, s, most);
}

uint32_t largest_bits(const std::byte* x, size_t n) {
  return grid_largest_bits(x, n);
}

float power_of_two(int e) {
  if (e < -126 || e > 127)
    return std::ldexp(1.0f, e);
  return std::bit_cast<float>(static_cast<uint32_t>(e + 127) << 23);
}

const std::byte* as_floats(dtype t, const std::byte* x, size_t n, float* out) {
  if (t == dtype::float32)
    return x;
  for (size_t i = 0; i < n; ++i)
    out[i] = load_element(t, x, i);
  return reinterpret_cast<const std::byte*>(out);
}

int run_exponent(dtype t, const std::byte* g, uint64_t n) {
  float most = 0;
  if (t == dtype::float32) {
    auto bits = largest_bits(g, n);
    std::memcpy(&most, &bits, 4);
  } else {
    for (uint64_t i = 0; i < n; ++i)
      most = std::max(most, std::fabs(load_element(t, g, i)));
  }
  int e =
      most > 0 && std::isfinite(most) ? std::ilogb(most) + 1 : least_exponent;
  return std::clamp(e, least_exponent, 127);
}

} // namespace fedcaf::grid
