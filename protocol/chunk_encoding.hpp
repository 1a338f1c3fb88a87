#pragma once
// Chunk frames whose payload is compressed (client_configs.comm_configs.
// compression), for the server's downloads (the client's uploads are
// encoded by its delta_encoder). Kept out of messages/, which the fuzz
// targets link without the encoders.

#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "fedcaf/compression.hpp"
#include "messages/codec.hpp"

namespace fedcaf {

/// Writes a chunk frame whose payload is `values` encoded by `c`: straight
/// into the frame for the fixed-size encodings, through `scratch` for zfp
/// (its size is known only once encoded). Sets `payload_bytes`.
/// REQUIRES: c.method != none.
inline msg::frame encode_compressed_chunk(const msg::chunk_header& h,
                                          const compression_config& c,
                                          std::span<const float> values,
                                          std::vector<std::byte>& scratch,
                                          uint64_t& payload_bytes) {
  if (fixed_size(c.method)) {
    payload_bytes = encoded_bound(c, values.size());
    return msg::encode_chunk(h, payload_bytes, [&](std::span<std::byte> dst) {
      encode(c, values, dst);
    });
  }
  scratch.resize(encoded_bound(c, values.size()));
  payload_bytes = encode(c, values, scratch);
  return msg::encode_chunk(h, payload_bytes, [&](std::span<std::byte> dst) {
    std::memcpy(dst.data(), scratch.data(), dst.size());
  });
}

} // namespace fedcaf
