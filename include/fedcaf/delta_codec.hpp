#pragma once
// Compressed uploads with error feedback (Seide et al. 2014; Karimireddy et
// al. 2019, EF-SGD), on the client, chunk by chunk. With r the residual (what
// earlier encodings lost, 0 at first), g the model received and x the model
// trained, each chunk carries C(x - g + r) and the residual becomes
// (x - g + r) - D(C(x - g + r)). One model-sized buffer, in RAM or in a file
// as the client's model, holds per chunk of n values (4n bytes) either
//   s = g - r, float32, from the download until the chunk is uploaded; or
//   once uploaded ("packed"): the new residual r' = v - D(C(v)) as bfloat16
//   (2n bytes) and then the encoding C(v) itself (at most 2n bytes), with
//   v = x - s.
// The upload encodes and decodes each chunk while it is in cache (one
// encode, one decode per chunk and round); a resend, even after the upload
// closed, sends the stored bytes again; and as the next model arrives,
// s'_k = g'_k - r'_k is one cheap pass. A chunk whose encoding is larger
// than 2n bytes (zfp on values it cannot compress 2:1; int8 below 5
// values) stays unpacked: its residual is taken on arrival by encoding and
// decoding it again. bfloat16 keeps the residual to 2^-9 of itself (float32's
// range, so no residual is too small or too large to keep); what that
// rounding loses is lost once, not carried.
// Thread-safety: none; owned by the client actor.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "fedcaf/byte_buffer.hpp"
#include "fedcaf/chunk_plan.hpp"
#include "fedcaf/compression.hpp"
#include "fedcaf/error.hpp"
#include "fedcaf/manifest.hpp"

namespace fedcaf {

class delta_encoder {
public:
  /// Returns an encoder for float32 models cut by `plan`, its buffer in a
  /// file under `storage_dir` (empty: on the heap), or an error iff a tensor
  /// is not float32 or the file cannot be made.
  static result<delta_encoder> make(const compression_config& c,
                                    const manifest& layout, chunk_plan plan,
                                    const std::string& storage_dir);

  /// A new round's model is about to arrive: each chunk's s is remade as
  /// it does (arrive), from the last upload if it closed, else from the
  /// residual held (0 at first).
  void begin_round();

  /// Chunk `seq` of the new model (float32 values, `g`) arrives; `trained`
  /// still holds the model last uploaded there (it is about to be
  /// overwritten). Once per chunk and round; repeats change nothing.
  void arrive(uint64_t seq, std::span<const std::byte> g,
              const const_model_view& trained);

  /// The bytes chunk `seq` of the trained `model` carries: C(x - s), the
  /// same bytes each time it is asked for until the next model arrives.
  /// Valid until the next call.
  std::span<const std::byte> upload(uint64_t seq,
                                    const const_model_view& model);

  /// The upload closed: the next round's arrivals take the residual from it.
  void upload_closed() { source_ = from_upload; }

  /// Takes every chunk's residual now, from `trained` (the model uploaded),
  /// which is about to go (a client that drops its model between rounds).
  void settle(const const_model_view& trained);

private:
  delta_encoder(compression_config c, chunk_plan plan, byte_buffer buffer);

  /// v = x - s at chunk `seq`, into delta_.
  void fill_delta(uint64_t seq, const const_model_view& model);
  /// r = v - D(C(v)) (0 without error feedback) over s at chunk `seq`,
  /// for a chunk that is not packed.
  void take_residual(uint64_t seq, const const_model_view& trained);
  /// A packed chunk's residual, as float32 values, into decoded_.
  std::span<const float> packed_residual(uint64_t seq);
  std::span<float> stored(uint64_t seq);
  std::span<std::byte> stored_bytes(uint64_t seq);

  /// What a chunk's slot holds before the next model's chunk arrives.
  enum source { nothing, from_upload, residual };
  compression_config config_;
  chunk_plan plan_;
  byte_buffer buffer_;           ///< per chunk: s, packed, or r after settle
  source source_ = nothing;      ///< after the last upload
  source arriving_ = nothing;    ///< what this round's arrivals start from
  std::vector<bool> fresh_;      ///< per chunk: holds this round's s
  std::vector<uint32_t> packed_; ///< per chunk: its encoding's bytes, 0: not
  std::vector<float> delta_, decoded_;
  std::vector<std::byte> encoded_;
};

/// The server's side: writes g + D(in) into `out` (chunk `seq`'s values),
/// g being the model the client received, at that chunk (`global`).
/// Returns an error iff `in` does not decode to that many values.
result<void> decode_delta(const compression_config& c,
                          std::span<const std::byte> in,
                          std::span<const std::byte> global,
                          std::span<float> out);

} // namespace fedcaf
