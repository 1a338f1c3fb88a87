#include "fedcaf/compression.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>

#include <cpuid.h>
#include <immintrin.h>
#include <zfp.h>

#include "fedcaf/element.hpp"
#include "fedcaf/kernel.hpp"

namespace fedcaf {

namespace {

struct zfp_stream_closer {
  void operator()(zfp_stream* z) const { zfp_stream_close(z); }
};
struct zfp_field_freer {
  void operator()(zfp_field* f) const { zfp_field_free(f); }
};
struct bitstream_closer {
  void operator()(bitstream* s) const { stream_close(s); }
};

/// A zfp stream in fixed-accuracy mode over `values` floats at `data`, seen
/// as zfp blocks of 64 consecutive values: a 4 x 4 x (values / 16) field,
/// whose 4 x 4 x 4 blocks are runs of 64 values in memory, then the last
/// values mod 16 as a 1-D field, in the same stream. libzfp 1.0 encodes
/// such 3-D blocks about 1.6x and decodes them 2.2x faster than 1-D blocks
/// of 4 values (tests/perf/codec_bench.cpp); chunks carry no shape, and
/// a run of 64 values compresses about as well as four runs of 4.
struct zfp_setup {
  std::unique_ptr<zfp_stream, zfp_stream_closer> stream{
      zfp_stream_open(nullptr)};
  std::unique_ptr<zfp_field, zfp_field_freer> runs, tail; // either may be null

  zfp_setup(double tolerance, float* data, size_t values) {
    zfp_stream_set_accuracy(stream.get(), tolerance);
    auto whole = values / 16 * 16;
    if (whole > 0)
      runs.reset(zfp_field_3d(data, zfp_type_float, 4, 4, whole / 16));
    if (whole < values)
      tail.reset(zfp_field_1d(data ? data + whole : nullptr, zfp_type_float,
                              values - whole));
  }
  size_t bound() {
    size_t n = 0;
    for (auto* f : {runs.get(), tail.get()})
      if (f)
        n += zfp_stream_maximum_size(stream.get(), f);
    return n;
  }
  /// Bytes written, 0 on failure.
  size_t compress() {
    size_t n = 0;
    for (auto* f : {runs.get(), tail.get()})
      if (f && (n = zfp_compress(stream.get(), f)) == 0)
        return 0;
    return n;
  }
  bool decompress() {
    for (auto* f : {runs.get(), tail.get()})
      if (f && zfp_decompress(stream.get(), f) == 0)
        return false;
    return true;
  }
};

uint64_t int8_bytes(uint64_t n) {
  return n + 4 * ((n + int8_block - 1) / int8_block);
}

// The kernels (FEDCAF_KERNEL: see fedcaf/kernel.hpp); fp16 through F16C's
// vcvtps2ph and vcvtph2ps, 8 values at a time, where the CPU has it.

bool has_f16c() {
  static const bool yes = [] {
    unsigned a = 0, b = 0, c = 0, d = 0; // CPUID leaf 1, ECX bit 29: F16C
    return __builtin_cpu_supports("avx2") && __get_cpuid(1, &a, &b, &c, &d) &&
           (c & bit_F16C) != 0;
  }();
  return yes;
}

__attribute__((target("avx2,f16c"))) void
to_f16_f16c(const float* x, std::byte* out, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(
        reinterpret_cast<__m128i*>(out + 2 * i),
        _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; ++i) {
    auto h = _cvtss_sh(x[i], _MM_FROUND_TO_NEAREST_INT);
    std::memcpy(out + 2 * i, &h, 2);
  }
}

__attribute__((target("avx2,f16c"))) void from_f16_f16c(const std::byte* in,
                                                        float* x, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(x + i, _mm256_cvtph_ps(_mm_loadu_si128(
                                reinterpret_cast<const __m128i*>(in + 2 * i))));
  for (; i < n; ++i) {
    unsigned short h;
    std::memcpy(&h, in + 2 * i, 2);
    x[i] = _cvtsh_ss(h);
  }
}

void to_f16(const float* x, std::byte* out, size_t n) {
  if (has_f16c())
    return to_f16_f16c(x, out, n);
  for (size_t i = 0; i < n; ++i) {
    auto h = float_to_f16(x[i]);
    std::memcpy(out + 2 * i, &h, 2);
  }
}

void from_f16(const std::byte* in, float* x, size_t n) {
  if (has_f16c())
    return from_f16_f16c(in, x, n);
  for (size_t i = 0; i < n; ++i)
    x[i] = load_element(dtype::float16, in, i);
}

/// Rounds to nearest even on the bits (a NaN stays a NaN or becomes an
/// infinity, which the server refuses either way).
FEDCAF_KERNEL void to_bf16(const float* x, std::byte* out, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    uint32_t b;
    std::memcpy(&b, x + i, 4);
    auto h = static_cast<uint16_t>((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
    std::memcpy(out + 2 * i, &h, 2);
  }
}

FEDCAF_KERNEL void from_bf16(const std::byte* in, float* x, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, in + 2 * i, 2);
    uint32_t b = uint32_t{h} << 16;
    std::memcpy(x + i, &b, 4);
  }
}

/// max |x| over n values, on the bits: for non-negative floats the integer
/// order is the float order, so the maximum vectorizes.
inline float abs_max(const float* x, size_t n) {
  uint32_t top = 0;
  for (size_t i = 0; i < n; ++i) {
    uint32_t b;
    std::memcpy(&b, x + i, 4);
    b &= 0x7fffffffu;
    top = b > top ? b : top;
  }
  float f;
  std::memcpy(&f, &top, 4);
  return f;
}

/// The blocks of a chunk, in one clone (the per-block loops inlined).
FEDCAF_KERNEL void encode_int8(const float* x, size_t count, std::byte* out) {
  for (size_t at = 0; at < count; at += int8_block) {
    auto n = std::min<size_t>(int8_block, count - at);
    float scale = abs_max(x + at, n) / 127.0f;
    std::memcpy(out, &scale, 4);
    float inv = scale > 0 ? 1.0f / scale : 0.0f;
    auto* q = out + 4;
    for (size_t i = 0; i < n; ++i) { // branch-free: it vectorizes
      auto v = x[at + i] * inv;
      v = v < -127.0f ? -127.0f : v;
      v = v > 127.0f ? 127.0f : v;
      auto r = static_cast<int32_t>(v + std::copysign(0.5f, v));
      q[i] = static_cast<std::byte>(static_cast<int8_t>(r));
    }
    out += 4 + n;
  }
}

/// Returns false iff a block's scale is not a finite value >= 0.
FEDCAF_KERNEL bool decode_int8(const std::byte* in, size_t count, float* x) {
  for (size_t at = 0; at < count; at += int8_block) {
    auto n = std::min<size_t>(int8_block, count - at);
    float scale;
    std::memcpy(&scale, in, 4);
    if (!(scale >= 0 && scale <= std::numeric_limits<float>::max()))
      return false;
    for (size_t i = 0; i < n; ++i)
      x[at + i] = static_cast<float>(static_cast<int8_t>(in[4 + i])) * scale;
    in += 4 + n;
  }
  return true;
}

} // namespace

const char* to_string(compression_method m) {
  switch (m) {
  case compression_method::fp16:
    return "fp16";
  case compression_method::bf16:
    return "bf16";
  case compression_method::int8:
    return "int8";
  case compression_method::zfp:
    return "zfp";
  default:
    return "none";
  }
}

std::optional<compression_method> parse_compression(std::string_view name) {
  for (auto m : {compression_method::none, compression_method::fp16,
                 compression_method::bf16, compression_method::int8,
                 compression_method::zfp})
    if (name == to_string(m))
      return m;
  return std::nullopt;
}

uint64_t encoded_bound(const compression_config& c, uint64_t n) {
  switch (c.method) {
  case compression_method::fp16:
  case compression_method::bf16:
    return 2 * n;
  case compression_method::int8:
    return int8_bytes(n);
  case compression_method::zfp:
    return zfp_setup{c.zfp_tolerance, nullptr, n}.bound();
  default:
    return 4 * n;
  }
}

size_t encode(const compression_config& c, std::span<const float> x,
              std::span<std::byte> out) {
  auto* o = out.data();
  switch (c.method) {
  case compression_method::fp16:
    to_f16(x.data(), o, x.size());
    return 2 * x.size();
  case compression_method::bf16:
    to_bf16(x.data(), o, x.size());
    return 2 * x.size();
  case compression_method::int8:
    encode_int8(x.data(), x.size(), o);
    return int8_bytes(x.size());
  case compression_method::zfp: {
    zfp_setup z{c.zfp_tolerance, const_cast<float*>(x.data()), x.size()};
    std::unique_ptr<bitstream, bitstream_closer> bits{
        stream_open(out.data(), out.size())};
    zfp_stream_set_bit_stream(z.stream.get(), bits.get());
    zfp_stream_rewind(z.stream.get());
    return z.compress();
  }
  default:
    std::memcpy(o, x.data(), 4 * x.size());
    return 4 * x.size();
  }
}

result<void> decode(const compression_config& c, std::span<const std::byte> in,
                    std::span<float> x) {
  auto wrong_size = [&] {
    return error{errc::out_of_range, std::to_string(in.size()) +
                                         " bytes are no " +
                                         to_string(c.method) + " encoding of " +
                                         std::to_string(x.size()) + " values"};
  };
  switch (c.method) {
  case compression_method::fp16:
  case compression_method::bf16: {
    if (in.size() != 2 * x.size())
      return wrong_size();
    if (c.method == compression_method::fp16)
      from_f16(in.data(), x.data(), x.size());
    else
      from_bf16(in.data(), x.data(), x.size());
    return {};
  }
  case compression_method::int8:
    if (in.size() != int8_bytes(x.size()))
      return wrong_size();
    if (!decode_int8(in.data(), x.size(), x.data()))
      return error{errc::poisoned_update,
                   "an int8 block's scale is not a finite value >= 0"};
    return {};
  case compression_method::zfp: {
    zfp_setup z{c.zfp_tolerance, x.data(), x.size()};
    auto bound = z.bound();
    if (in.size() > bound)
      return wrong_size();
    // zfp's bit stream reads whole 64-bit words and never more than the
    // bound for this many values: a zero-padded copy keeps it inside.
    thread_local std::vector<uint64_t> padded;
    padded.assign(bound / 8 + 2, 0);
    std::memcpy(padded.data(), in.data(), in.size());
    std::unique_ptr<bitstream, bitstream_closer> bits{
        stream_open(padded.data(), padded.size() * 8)};
    zfp_stream_set_bit_stream(z.stream.get(), bits.get());
    zfp_stream_rewind(z.stream.get());
    if (!z.decompress())
      return error{errc::out_of_range, "zfp bytes that do not decode"};
    return {};
  }
  default:
    if (in.size() != 4 * x.size())
      return wrong_size();
    std::memcpy(x.data(), in.data(), in.size());
    return {};
  }
}

} // namespace fedcaf
