#include "protocol/download_stream.hpp"

#include <algorithm>
#include <cstring>
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

result<std::pair<std::span<const std::byte>, uint64_t>>
download_stream::payload(uint64_t seq, const msg::frame& f) {
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
  return std::pair{payload, static_cast<uint64_t>(c->bytes.size())};
}

result<download_stream::arrival>
download_stream::receive(uint64_t seq, const msg::frame& f,
                         const model_view& model) {
  auto bytes = payload(seq, f);
  if (!bytes)
    return bytes.err();
  if (hook_) // before the old values leave the chunk
    hook_(seq, bytes->first);
  plan_->copy_in(seq, bytes->first, model);
  return arrival{bytes->second, plan_->extent(seq)};
}

std::vector<uint64_t> download_stream::chunks_touching(uint64_t offset,
                                                       uint64_t bytes) const {
  std::vector<uint64_t> out;
  for (uint64_t s = 0; s < plan_->chunk_count(); ++s) {
    const auto& e = plan_->extent(s);
    if (e.model_offset < offset + bytes && e.model_offset + e.bytes > offset)
      out.push_back(s);
  }
  return out;
}

result<void> download_stream::copy_part(uint64_t seq, const msg::frame& f,
                                        uint64_t offset,
                                        std::span<std::byte> out) {
  auto bytes = payload(seq, f);
  if (!bytes)
    return bytes.err();
  const auto& e = plan_->extent(seq);
  auto from = std::max(offset, e.model_offset);
  auto to = std::min(offset + out.size(), e.model_offset + e.bytes);
  if (from < to)
    std::memcpy(out.data() + (from - offset),
                bytes->first.data() + (from - e.model_offset), to - from);
  return {};
}

uint64_t download_stream::rewind() {
  auto again = window_.next() - window_.acked();
  window_.rewind();
  return again * plan_->chunk_bytes();
}

} // namespace fedcaf
