#pragma once
// A client's download of one round's model, receiver-driven: it fetches
// chunks 0, 1, ... with at most `window` fetches unanswered (each fetch is
// one credit), checks each chunk that answers a fetch against the chunk
// plan (the codec has checked its checksum), decodes its values if the
// server compresses downloads, and writes them straight into the model's
// memory. After a lost connection the fetches in flight are asked again.
// It sends nothing and reads no clock: the client actor sends the fetches
// it returns and hands it the answers.
// Thread-safety: none; owned by the client actor.

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "fedcaf/chunk_plan.hpp"
#include "fedcaf/compression.hpp"
#include "fedcaf/credit_window.hpp"
#include "messages/codec.hpp"

namespace fedcaf {

class download_stream {
public:
  /// Sees chunk `seq`'s values (float32 bytes) before they overwrite the
  /// model's memory there (delta_encoder::arrive).
  using arrival_hook =
      std::function<void(uint64_t seq, std::span<const std::byte> values)>;

  /// What one chunk brought.
  struct arrival {
    uint64_t wire_bytes = 0; ///< payload bytes as sent (encoded or not)
    chunk_extent extent;     ///< where its values went in the model
  };

  /// The download of the model `announced` names (its round, model version
  /// and window; a window of 0 counts as 1), cut by `plan`. Chunks carry
  /// values encoded by `compression` iff compression.down. `hook`, if set,
  /// sees the values of every chunk received.
  download_stream(std::shared_ptr<const chunk_plan> plan,
                  const msg::round_start& announced,
                  compression_config compression, arrival_hook hook = {});

  /// Returns true iff another fetch may be sent now.
  bool can_fetch() const { return window_.can_send(); }

  /// The next chunk a fetch would ask for. REQUIRES: can_fetch().
  const chunk_extent& next_extent() const {
    return plan_->extent(window_.next());
  }

  /// True iff a fetch is unanswered.
  bool in_flight() const { return window_.in_flight() > 0; }

  /// The chunks whose bytes touch model bytes [offset, + bytes).
  std::vector<uint64_t> chunks_touching(uint64_t offset, uint64_t bytes) const;

  /// Takes `f`, the answer to a fetch of chunk `seq` made again (not one
  /// of take_fetch's), and copies its bytes that lie in model bytes
  /// [offset, + out.size()) to `out`. Returns an error iff the frame is
  /// not chunk `seq` (or does not decode).
  result<void> copy_part(uint64_t seq, const msg::frame& f, uint64_t offset,
                         std::span<std::byte> out);

  /// Returns the fetch of the next chunk and counts it in flight.
  /// REQUIRES: can_fetch().
  msg::fetch take_fetch();

  /// Takes `f`, the answer to the fetch of chunk `seq`: checks that it is
  /// chunk `seq` of the plan, shows its values to the hook and copies them
  /// into `model`. Returns what it brought, or an error iff `f` is malformed
  /// or fails its checksum, carries another sequence number or a stream id,
  /// does not decode, or does not match the plan; `model` is then unchanged.
  /// REQUIRES: take_fetch() returned chunk `seq`; `model` has the plan's
  /// layout.
  result<arrival> receive(uint64_t seq, const msg::frame& f,
                          const model_view& model);

  /// Counts chunk `seq` as received. Returns an error iff it is not the
  /// oldest fetch in flight (answers out of order).
  result<void> ack(uint64_t seq) { return window_.ack(seq); }

  /// After a lost connection: the fetches in flight are sent again. Returns
  /// the bytes fetched a second time, a chunk size for each.
  uint64_t rewind();

  /// Returns true iff every chunk has been received.
  bool complete() const { return window_.complete(); }
  /// The most fetches that were unanswered at once.
  uint32_t peak_in_flight() const { return window_.peak_in_flight(); }
  /// The largest payload a chunk of this download may carry.
  uint64_t max_payload_bytes() const;

private:
  /// Chunk `seq`'s model bytes from frame `f` (decoded: they live in
  /// decoded_ until the next call), checked against the plan, and the
  /// payload's size on the wire.
  result<std::pair<std::span<const std::byte>, uint64_t>>
  payload(uint64_t seq, const msg::frame& f);

  std::shared_ptr<const chunk_plan> plan_;
  uint32_t round_;
  uint64_t model_version_;
  compression_config compression_;
  arrival_hook hook_;
  credit_window window_;
  std::vector<float> decoded_; ///< compressed downloads: a chunk's values
};

} // namespace fedcaf
