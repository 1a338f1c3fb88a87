#include "protocol/download_stream.hpp"

#include <algorithm>
#include <string>

namespace fedcaf {

download_stream::download_stream(std::shared_ptr<const chunk_plan> plan,
                                 const msg::round_start& announced,
                                 compression_config compression,
                                 arrival_hook hook)
    : plan_(std::move(plan)), round_(announced.round),
      model_version_(announced.model_version),
      compression_(std::move(compression)), hook_(std::move(hook)),
      window_(plan_->chunk_count(), std::max(1u, announced.window)) {}

msg::fetch download_stream::take_fetch() {
  return {round_, model_version_, window_.take()};
}

uint64_t download_stream::max_payload_bytes() const {
  auto raw = plan_->chunk_bytes();
  if (!compression_.down)
    return raw;
  return std::max(raw, encoded_bound(compression_, raw / 4 + 1));
}

result<download_stream::arrival>
download_stream::receive(uint64_t seq, const msg::frame& f,
                         const model_view& model) {
  auto c = msg::decode_chunk(f, max_payload_bytes());
  if (!c)
    return c.err();
  const auto& h = c->header;
  if (h.sequence != seq || h.stream_id != 0)
    return error{errc::bad_sequence,
                 "model chunk " + std::to_string(h.sequence) +
                     " answered fetch " + std::to_string(seq)};
  const auto& e = plan_->extent(seq);
  auto payload = c->bytes;
  if (compression_.down) { // the model's values, encoded
    decoded_.resize(e.bytes / 4);
    if (auto ok = decode(compression_, c->bytes, decoded_); !ok)
      return ok.err();
    payload = std::as_bytes(std::span{decoded_});
  }
  if (auto ok =
          plan_->check(seq, h.tensor_index, h.byte_offset, payload.size());
      !ok)
    return ok.err();
  if (hook_) // before the old values leave the chunk
    hook_(seq, payload);
  plan_->copy_in(seq, payload, model);
  return arrival{c->bytes.size(), e};
}

uint64_t download_stream::rewind() {
  auto again = window_.next() - window_.acked();
  window_.rewind();
  return again * plan_->chunk_bytes();
}

} // namespace fedcaf
