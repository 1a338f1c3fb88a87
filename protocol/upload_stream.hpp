#pragma once
// A client's upload of one round's update under the server's credits: the
// server's accept (a new stream, or one resumed where the server's stream
// stands), at most `window` chunks unacknowledged, a credit back per chunk
// consumed, then the end of the stream. Each chunk is written straight into
// its frame: the trained model's bytes, masked in place for SecAgg+ (the
// mask hook), or the bytes the delta encoder made (the encode hook). It
// counts what it sends a second time and the values the masking clipped.
// It sends nothing and reads no clock: the client actor sends the frames it
// returns and hands it the server's answers.
// Thread-safety: none; owned by the client actor.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "fedcaf/chunk_plan.hpp"
#include "fedcaf/credit_window.hpp"
#include "messages/codec.hpp"

namespace fedcaf {

class upload_stream {
public:
  /// Returns the bytes chunk `seq` of `model` carries, valid until the next
  /// call (delta_encoder::upload).
  using encode_hook = std::function<std::span<const std::byte>(
      uint64_t seq, const const_model_view& model)>;
  /// Replaces the float32 values in `values` (elements first_element, ...
  /// of the model) by their masked words, in place; returns how many were
  /// clipped. `values` is always 4-byte aligned.
  using mask_hook = std::function<uint64_t(uint64_t first_element,
                                           std::span<std::byte> values)>;
  /// True iff the chunk at model byte `model_offset` carries float32 sums
  /// in a relay's upload of int32 sums on the grid (Chunk.floatSums).
  using float_sums_hook = std::function<bool(uint64_t model_offset)>;
  /// How payloads are made: by `encode` if set, else the model's bytes,
  /// masked iff `mask` is set; each chunk flagged by `float_sums`, if set.
  struct hooks {
    encode_hook encode;
    mask_hook mask;
    float_sums_hook float_sums{};
  };

  /// What the server's answer to the offer says.
  struct acceptance {
    /// Set iff the client is not in this round: the server's reason.
    std::optional<std::string> sit_out;
    /// Credits owed for chunks sent before: [first_owed, next_owed).
    uint64_t first_owed = 0;
    uint64_t next_owed = 0;
  };

  /// One chunk to send.
  struct outgoing {
    msg::frame frame;
    uint64_t seq = 0;
    uint64_t payload_bytes = 0;
    bool resent = false; ///< a chunk at or below it was sent this round
    chunk_extent extent;
  };

  /// What a credit says: send more, the stream is complete (close it), or
  /// the server forgot the round's uploads (it will announce it again).
  enum class credit_outcome { more, complete, reset };

  /// The upload of round `round`'s update cut by `plan`; the server's
  /// window is capped at `round_window` (and at least 1).
  upload_stream(std::shared_ptr<const chunk_plan> plan, uint32_t round,
                uint32_t round_window, hooks how);

  /// Takes the server's answer to the offer. Returns whether the client
  /// sits out (not_in_round, or wrong_round: the round is no longer
  /// open) and which credits it is owed, or an error iff the answer is
  /// another error, malformed, or resumes past the last chunk. Afterwards
  /// chunks below first_owed count as acknowledged and sending goes on at
  /// next_owed.
  result<acceptance> on_accept(const msg::frame& f);

  /// Returns true iff a chunk may be sent now (accepted, credit left).
  /// The chunk take_chunk() sends next. REQUIRES: can_send().
  const chunk_extent& next_extent() const {
    return plan_->extent(window_->next());
  }
  bool can_send() const { return window_ && window_->can_send(); }
  /// As can_send(), and the next chunk lies within the first `ready`
  /// bytes of the model (relay_hooks::ready_bytes).
  bool can_send(uint64_t ready) const {
    if (!can_send())
      return false;
    const auto& e = plan_->extent(window_->next());
    return e.model_offset + e.bytes <= ready;
  }

  /// Returns the frame of the next chunk of `model` and counts it in
  /// flight. REQUIRES: can_send().
  /// (next_extent(): the chunk it takes.)
  outgoing take_chunk(const const_model_view& model);

  /// The request for the credit of chunk `seq` (owed since before a
  /// reconnect).
  msg::credit credit_request(uint64_t seq) const { return {stream_id_, seq}; }

  /// Takes the answer to a chunk or credit request. Returns what to do, or
  /// an error iff the answer is another error, malformed, or credits a
  /// chunk that is not the oldest in flight.
  result<credit_outcome> on_credit(const msg::frame& f);

  /// Returns true iff every chunk has been acknowledged.
  bool complete() const { return window_ && window_->complete(); }

  /// The end of this stream. REQUIRES: accepted.
  msg::end_of_stream end() const { return {stream_id_, plan_->chunk_count()}; }

  /// The server collects the round's updates again: the stream starts over
  /// (after a new offer). Returns the bytes acknowledged so far, which go a
  /// second time.
  uint64_t restart();

  /// Returns the values the masking clipped since the last call.
  uint64_t take_clipped();

  /// The most chunks unacknowledged at once (0 before the accept).
  uint32_t peak_in_flight() const {
    return window_ ? window_->peak_in_flight() : 0;
  }

private:
  /// Writes chunk `seq`'s payload into a new frame; sets `sent`.
  msg::frame encode(uint64_t seq, const const_model_view& model,
                    uint64_t& sent);
  void mask(uint64_t first_element, std::span<std::byte> dst);

  std::shared_ptr<const chunk_plan> plan_;
  uint32_t round_;
  uint32_t round_window_;
  hooks hooks_;
  std::optional<credit_window> window_; ///< from the accept on
  uint64_t stream_id_ = 0;
  uint64_t sent_high_ = 0; ///< one past the highest chunk sent
  uint64_t clipped_ = 0;
  std::vector<std::byte> scratch_; ///< masks an unaligned chunk
};

} // namespace fedcaf
