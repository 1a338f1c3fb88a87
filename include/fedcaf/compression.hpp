#pragma once
// Per-chunk compression of float32 values (client_configs.comm_configs.
// compression): each chunk is encoded and decoded on its own, so a chunk
// still travels, is checked (its checksum covers the encoded bytes) and is
// folded the moment it arrives.
//
//   fp16, bf16  each value rounded to nearest-even: 2 bytes per value.
//   int8        blockwise absmax: per block of 256 values a float32 scale
//               s = max|x| / 127, then each value as round(x / s) in int8:
//               (256 + 4) / 1024 = 0.254 of the bytes.
//   zfp         zfp's fixed-accuracy mode (libzfp), 1-D blocks of 4 values,
//               every value within `zfp_tolerance`; variable size.
//
// Uploads carry deltas (trained minus received model) with error feedback
// (the client adds what its last encoding lost, see actors/client.cpp);
// downloads carry the model itself. Thread-safety: pure functions.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fedcaf/error.hpp"

namespace fedcaf {

enum class compression_method { none, fp16, bf16, int8, zfp };

/// "none", "fp16", "bf16", "int8" or "zfp".
const char* to_string(compression_method m);
std::optional<compression_method> parse_compression(std::string_view name);

struct compression_config {
  compression_method method = compression_method::none;
  bool up = false;   ///< uploads carry encoded deltas
  bool down = false; ///< downloads carry the encoded model
  double zfp_tolerance = 1e-3;
  bool error_feedback = true; ///< carry each upload's loss into the next

  /// The encoding uploads carry ("none" unless up), as an offer names it.
  std::string upload_encoding() const {
    return up ? to_string(method) : "none";
  }
};

constexpr uint32_t int8_block = 256;

/// The most bytes `n` values take encoded by `c.method` (exact for every
/// method but zfp).
uint64_t encoded_bound(const compression_config& c, uint64_t n);

/// Returns true iff every encoding of n values has the same size.
inline bool fixed_size(compression_method m) {
  return m != compression_method::zfp;
}

/// Encodes `x` into `out` (at least encoded_bound bytes); returns the bytes
/// written. REQUIRES: c.method != none.
size_t encode(const compression_config& c, std::span<const float> x,
              std::span<std::byte> out);

/// Decodes `in` into `x` (its size says how many values). Returns an error
/// iff `in` is not an encoding of that many values: wrong size, a scale
/// that is not finite, or zfp bytes that do not decode (read through a
/// copy padded to the bound, so that hostile bytes cannot make zfp read
/// past them). Decoded values may still be huge: the caller checks them.
result<void> decode(const compression_config& c, std::span<const std::byte> in,
                    std::span<float> x);

} // namespace fedcaf
