#include "protocol/upload_stream.hpp"

#include <algorithm>
#include <cstring>

namespace fedcaf {

upload_stream::upload_stream(std::shared_ptr<const chunk_plan> plan,
                             uint32_t round, uint32_t round_window, hooks how)
    : plan_(std::move(plan)), round_(round), round_window_(round_window),
      hooks_(std::move(how)) {}

result<upload_stream::acceptance>
upload_stream::on_accept(const msg::frame& f) {
  auto a = msg::decode<msg::accept>(f);
  // Not in this round, or (a server before this one) the round is no
  // longer open: the client waits for the next roundStart.
  if (!a &&
      (a.err().code == errc::not_in_round || a.err().code == errc::wrong_round))
    return acceptance{a.err().message};
  if (!a)
    return a.err();
  if (a->next_sequence > plan_->chunk_count())
    return error{errc::out_of_range, "the server resumes the upload at "
                                     "chunk " +
                                         std::to_string(a->next_sequence)};
  stream_id_ = a->stream_id;
  auto window = std::max(1u, std::min(a->window, round_window_));
  window_.emplace(plan_->chunk_count(), window);
  window_->resume(a->first_unacknowledged, a->next_sequence);
  return acceptance{std::nullopt, a->first_unacknowledged, a->next_sequence};
}

upload_stream::outgoing
upload_stream::take_chunk(const const_model_view& model) {
  outgoing out;
  out.seq = window_->take();
  out.extent = plan_->extent(out.seq);
  out.frame = encode(out.seq, model, out.payload_bytes);
  out.resent = out.seq < sent_high_;
  sent_high_ = std::max(sent_high_, out.seq + 1);
  return out;
}

msg::frame upload_stream::encode(uint64_t seq, const const_model_view& model,
                                 uint64_t& sent) {
  const auto& e = plan_->extent(seq);
  msg::chunk_header h{stream_id_, round_, seq, e.tensor_index, e.tensor_offset};
  h.float_sums = hooks_.float_sums && hooks_.float_sums(e.model_offset);
  if (hooks_.encode) {
    auto bytes = hooks_.encode(seq, model);
    sent = bytes.size();
    return msg::encode_chunk(h, sent, [&bytes](std::span<std::byte> dst) {
      std::memcpy(dst.data(), bytes.data(), dst.size());
    });
  }
  sent = e.bytes;
  auto gather = [this, seq, &model](const msg::chunk_append& append) {
    plan_->for_each_source(seq, model, append);
  };
  if (!hooks_.mask)
    return msg::encode_chunk_gathered(h, e.bytes, gather);
  return msg::encode_chunk_gathered(
      h, e.bytes, gather,
      [this, &e](std::span<std::byte> dst) { mask(e.model_offset / 4, dst); });
}

/// In place where the frame's bytes are 4-byte aligned, else through a
/// chunk-sized scratch.
void upload_stream::mask(uint64_t first_element, std::span<std::byte> dst) {
  if (reinterpret_cast<uintptr_t>(dst.data()) % alignof(uint32_t) == 0) {
    clipped_ += hooks_.mask(first_element, dst);
    return;
  }
  scratch_.assign(dst.begin(), dst.end());
  clipped_ += hooks_.mask(first_element, scratch_);
  std::memcpy(dst.data(), scratch_.data(), dst.size());
}

result<upload_stream::credit_outcome>
upload_stream::on_credit(const msg::frame& f) {
  auto c = msg::decode<msg::credit>(f);
  if (!c && (c.err().code == errc::stream_reset ||
             c.err().code == errc::unknown_stream))
    return credit_outcome::reset;
  if (!c)
    return c.err();
  if (!window_)
    return error{errc::bad_sequence, "a credit before the accept"};
  if (auto ok = window_->ack(c->sequence); !ok)
    return ok.err();
  return complete() ? credit_outcome::complete : credit_outcome::more;
}

uint64_t upload_stream::restart() {
  auto again = window_ ? window_->acked() * plan_->chunk_bytes() : 0;
  window_.reset();
  sent_high_ = 0;
  clipped_ = 0;
  return again;
}

uint64_t upload_stream::take_clipped() {
  auto n = clipped_;
  clipped_ = 0;
  return n;
}

} // namespace fedcaf
