// Each compression method's encode and decode over 1 MiB chunks, in one
// run, against copying the chunk (what an uncompressed chunk costs): the
// per-core throughput that decides whether a method keeps up with a link.
// zfp is also timed over the same values as one 1-D field (zfp blocks of 4
// values), the layout fedcaf does not use, to show why.
// Usage: codec_bench [--mib 256] [--chunk-kib 1024] [--scale 0.01]
//   values: normal(0, scale), as a trained update's delta

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <zfp.h>

#include "fedcaf/compression.hpp"

using namespace fedcaf;
using clock_type = std::chrono::steady_clock;

namespace {

double seconds_since(clock_type::time_point t) {
  return std::chrono::duration<double>(clock_type::now() - t).count();
}

/// libzfp over `n` floats as one 1-D field, fixed accuracy: the bytes
/// written (encode) or read (decode) in `buf`.
size_t zfp_1d(bool encode, float* x, size_t n, std::span<std::byte> buf,
              double tolerance) {
  auto* field = zfp_field_1d(x, zfp_type_float, n);
  auto* z = zfp_stream_open(nullptr);
  zfp_stream_set_accuracy(z, tolerance);
  auto* bits = stream_open(buf.data(), buf.size());
  zfp_stream_set_bit_stream(z, bits);
  zfp_stream_rewind(z);
  auto bytes = encode ? zfp_compress(z, field) : zfp_decompress(z, field);
  stream_close(bits);
  zfp_stream_close(z);
  zfp_field_free(field);
  return bytes;
}

} // namespace

int main(int argc, char** argv) {
  size_t mib = 256, chunk_kib = 1024;
  double scale = 0.01;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    if (k == "--mib")
      mib = std::strtoull(argv[i + 1], nullptr, 10);
    else if (k == "--chunk-kib")
      chunk_kib = std::strtoull(argv[i + 1], nullptr, 10);
    else if (k == "--scale")
      scale = std::strtod(argv[i + 1], nullptr);
    else {
      std::fprintf(stderr, "unknown option %s\n", argv[i]);
      return 2;
    }
  }
  size_t n = (mib << 20) / 4, chunk = (chunk_kib << 10) / 4;
  std::vector<float> x(n), y(chunk);
  std::mt19937_64 rng{1};
  std::normal_distribution<float> d{0.0f, static_cast<float>(scale)};
  for (auto& v : x)
    v = d(rng);

  auto t = clock_type::now();
  for (size_t at = 0; at < n; at += chunk)
    std::memcpy(y.data(), x.data() + at, 4 * std::min(chunk, n - at));
  double copy = seconds_since(t);
  double gb = 4.0 * n / 1e9;
  std::printf("%zu MiB of normal(0, %g) values, %zu KiB chunks, one core\n",
              mib, scale, chunk_kib);
  std::printf("%-10s %7s %9s %10s %9s %10s\n", "method", "ratio", "enc GB/s",
              "enc/copy", "dec GB/s", "dec/copy");
  std::printf("%-10s %7.3f %9.2f %10.3f %9.2f %10.3f\n", "copy", 1.0, gb / copy,
              1.0, gb / copy, 1.0);

  // Encodings go to one buffer, touched before the clock starts: the
  // figures are the codecs', not the page faults'.
  std::vector<std::byte> out;
  std::vector<size_t> ends; // where each chunk's encoding ends in `out`
  auto run = [&](const char* name, auto&& enc_chunk, auto&& dec_chunk,
                 size_t bound) {
    out.assign(bound, std::byte{1});
    ends.clear();
    size_t used = 0;
    auto t0 = clock_type::now();
    for (size_t at = 0; at < n; at += chunk) {
      used += enc_chunk(std::span{x}.subspan(at, std::min(chunk, n - at)),
                        std::span{out}.subspan(used));
      ends.push_back(used);
    }
    double enc = seconds_since(t0);
    t0 = clock_type::now();
    size_t from = 0, i = 0;
    for (size_t at = 0; at < n; at += chunk, ++i) {
      if (!dec_chunk(std::span{out}.subspan(from, ends[i] - from),
                     std::span{y}.first(std::min(chunk, n - at)))) {
        std::fprintf(stderr, "%s: a chunk did not decode\n", name);
        std::exit(1);
      }
      from = ends[i];
    }
    double dec = seconds_since(t0);
    std::printf("%-10s %7.3f %9.2f %10.3f %9.2f %10.3f\n", name,
                used / (4.0 * n), gb / enc, copy / enc, gb / dec, copy / dec);
  };
  size_t chunks = (n + chunk - 1) / chunk;
  for (auto m : {compression_method::fp16, compression_method::bf16,
                 compression_method::int8, compression_method::zfp}) {
    compression_config c;
    c.method = m;
    c.up = true;
    run(
        to_string(m),
        [&](std::span<const float> v, std::span<std::byte> o) {
          return encode(c, v, o);
        },
        [&](std::span<const std::byte> e, std::span<float> v) {
          return bool(decode(c, e, v));
        },
        chunks * encoded_bound(c, chunk));
  }
  // zfp as one 1-D field per chunk (zfp blocks of 4 values), for comparison.
  compression_config cz;
  cz.method = compression_method::zfp;
  run(
      "zfp (1-D)",
      [&](std::span<const float> v, std::span<std::byte> o) {
        return zfp_1d(true, const_cast<float*>(v.data()), v.size(), o,
                      cz.zfp_tolerance);
      },
      [&](std::span<const std::byte> e, std::span<float> v) {
        return zfp_1d(false, v.data(), v.size(),
                      std::span{const_cast<std::byte*>(e.data()), e.size()},
                      cz.zfp_tolerance) > 0;
      },
      chunks * encoded_bound(cz, chunk) * 2);
  return 0;
}
