#pragma once
// Compressed uploads with error feedback (Seide et al. 2014; Karimireddy et
// al. 2019, EF-SGD), on the client, chunk by chunk. With r the residual (what
// earlier encodings lost, 0 at first), g the model received and x the model
// trained, each chunk carries C(x - g + r) and the residual becomes
// (x - g + r) - D(C(x - g + r)). One model-sized float32 buffer holds
// s = g - r from the download until the next one (a resend, even after the
// upload closed, encodes the same bytes again). The new residual is taken
// chunk by chunk as the next model arrives, just before chunk k of the
// trained model is overwritten: r_k = v_k - D(C(v_k)) with v_k = x_k - s_k,
// then s'_k = g'_k - r_k; no pass of its own, no stall between rounds. So a
// client holds one extra model, in RAM or in a file as its model.
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

  /// What chunk `seq` of the trained `model` carries, before encoding:
  /// v = x - s. Valid until the next call.
  std::span<const float> delta(uint64_t seq, const const_model_view& model);

  /// The upload closed: the next round's arrivals take the residual from it.
  void upload_closed() { source_ = from_upload; }

  /// Takes every chunk's residual now, from `trained` (the model uploaded),
  /// which is about to go (a client that drops its model between rounds).
  void settle(const const_model_view& trained);

private:
  delta_encoder(compression_config c, chunk_plan plan, byte_buffer buffer);

  /// v = x - s at chunk `seq`, into delta_.
  void fill_delta(uint64_t seq, const const_model_view& model);
  /// arrive() for fixed-size encodings with error feedback, in one pass.
  void settle_and_arrive(uint64_t seq, std::span<const std::byte> g,
                         const const_model_view& trained);
  /// r = v - D(C(v)) (0 without error feedback) over s at chunk `seq`.
  void take_residual(uint64_t seq, const const_model_view& trained);
  std::span<float> stored(uint64_t seq);

  /// What a chunk's slot holds before the next model's chunk arrives.
  enum source { nothing, from_upload, residual };
  compression_config config_;
  chunk_plan plan_;
  byte_buffer buffer_;        ///< per chunk: s, or r between settle and arrive
  source source_ = nothing;   ///< after the last upload
  source arriving_ = nothing; ///< what this round's arrivals start from
  std::vector<bool> fresh_;   ///< per chunk: holds this round's s
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
