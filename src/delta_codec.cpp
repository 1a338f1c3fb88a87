#include "fedcaf/delta_codec.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "fedcaf/dummy_trainer.hpp"

namespace fedcaf {

result<delta_encoder> delta_encoder::make(const compression_config& c,
                                          const manifest& layout,
                                          chunk_plan plan,
                                          const std::string& storage_dir) {
  for (const auto& t : layout.tensors)
    if (t.type != dtype::float32)
      return error{errc::unsupported_dtype,
                   "compression needs a float32 model; tensor " + t.name +
                       " is " + std::string{dtype_name(t.type)}};
  auto size = plan.total_bytes();
  byte_buffer buffer;
  if (storage_dir.empty()) {
    buffer = byte_buffer::zeroed(size);
  } else {
    static std::atomic<uint64_t> made{0};
    auto mapped = anonymous_file_buffer(storage_dir + "/fedcaf-residual-" +
                                            std::to_string(::getpid()) + "-" +
                                            std::to_string(made++),
                                        size);
    if (!mapped)
      return mapped.err();
    buffer = std::move(*mapped);
  }
  return delta_encoder{c, std::move(plan), std::move(buffer)};
}

delta_encoder::delta_encoder(compression_config c, chunk_plan plan,
                             byte_buffer buffer)
    : config_(c), plan_(std::move(plan)), buffer_(std::move(buffer)),
      packed_(plan_.chunk_count(), 0) {
  auto values = plan_.chunk_bytes() / 4 + 1;
  delta_.resize(values);
  decoded_.resize(values);
  encoded_.resize(encoded_bound(config_, values));
}

std::span<float> delta_encoder::stored(uint64_t seq) {
  const auto& e = plan_.extent(seq);
  return {reinterpret_cast<float*>(buffer_.data() + e.model_offset),
          e.bytes / 4};
}

std::span<std::byte> delta_encoder::stored_bytes(uint64_t seq) {
  const auto& e = plan_.extent(seq);
  return {buffer_.data() + e.model_offset, e.bytes};
}

namespace {

/// How packed slots keep a residual: bfloat16.
compression_config residual_encoding() {
  compression_config c;
  c.method = compression_method::bf16;
  return c;
}

} // namespace

std::span<const float> delta_encoder::packed_residual(uint64_t seq) {
  auto n = plan_.extent(seq).bytes / 4;
  auto r = std::span{decoded_}.first(n);
  (void)decode(residual_encoding(), stored_bytes(seq).first(2 * n), r);
  return r;
}

void delta_encoder::begin_round() {
  fresh_.assign(plan_.chunk_count(), false);
  arriving_ = source_;
  source_ = nothing; // until this round's upload closes
}

void delta_encoder::arrive(uint64_t seq, std::span<const std::byte> g,
                           const const_model_view& trained) {
  if (seq >= fresh_.size() || fresh_[seq])
    return;
  fresh_[seq] = true;
  auto s = stored(seq);
  std::span<const float> r; // empty: no residual
  if (packed_[seq] > 0 && arriving_ != nothing) {
    r = packed_residual(seq);
  } else if (arriving_ != nothing) {
    if (arriving_ == from_upload)
      take_residual(seq, trained);
    r = s;
  }
  for (size_t i = 0; i < s.size(); ++i) {
    float x;
    std::memcpy(&x, g.data() + 4 * i, 4);
    s[i] = r.empty() ? x : x - r[i];
  }
  packed_[seq] = 0;
  const auto& e = plan_.extent(seq);
  buffer_.release(e.model_offset, e.bytes); // file-backed only
}

std::span<const std::byte>
delta_encoder::upload(uint64_t seq, const const_model_view& model) {
  auto slot = stored_bytes(seq);
  auto half = slot.size() / 2;
  const auto& e = plan_.extent(seq);
  if (auto bytes = packed_[seq]; bytes > 0) { // a resend: the same bytes
    buffer_.release(e.model_offset, e.bytes);
    return slot.subspan(half, bytes);
  }
  fill_delta(seq, model); // s is used up: v holds it
  auto v = std::span{delta_}.first(e.bytes / 4);
  // A fixed-size encoding that fits goes straight to its place in the
  // slot; zfp's needs room for its bound, more than the slot has.
  bool in_slot = config_.error_feedback && fixed_size(config_.method) &&
                 encoded_bound(config_, v.size()) <= half;
  auto into = in_slot ? slot.subspan(half) : std::span{encoded_};
  auto bytes = fedcaf::encode(config_, v, into);
  auto out = std::span<const std::byte>{into}.first(bytes);
  if (config_.error_feedback && bytes <= half) {
    // While v and its encoding are in cache: r' = v - D(C(v)), kept as
    // bfloat16 in the slot's first half, the encoding in its second.
    auto d = std::span{decoded_}.first(v.size());
    (void)decode(config_, out, d);
    for (size_t i = 0; i < v.size(); ++i)
      v[i] -= d[i];
    (void)fedcaf::encode(residual_encoding(), v, slot.first(half));
    if (!in_slot)
      std::memcpy(slot.data() + half, encoded_.data(), bytes);
    packed_[seq] = static_cast<uint32_t>(bytes);
    out = slot.subspan(half, bytes);
  }
  buffer_.release(e.model_offset, e.bytes);
  return out;
}

void delta_encoder::take_residual(uint64_t seq,
                                  const const_model_view& trained) {
  auto r = stored(seq);
  if (!config_.error_feedback) {
    std::fill(r.begin(), r.end(), 0.0f);
    return;
  }
  fill_delta(seq, trained);
  auto v = std::span{delta_}.first(r.size());
  auto n = fedcaf::encode(config_, v, encoded_);
  auto d = std::span{decoded_}.first(r.size());
  // Its own encoding: it decodes.
  (void)decode(config_, std::span{encoded_}.first(n), d);
  for (size_t i = 0; i < r.size(); ++i)
    r[i] = v[i] - d[i];
}

void delta_encoder::settle(const const_model_view& trained) {
  if (source_ != from_upload)
    return;
  for (uint64_t seq = 0; seq < plan_.chunk_count(); ++seq) {
    if (packed_[seq] > 0) {
      auto r = packed_residual(seq);
      std::copy(r.begin(), r.end(), stored(seq).begin());
      packed_[seq] = 0;
    } else {
      take_residual(seq, trained);
    }
    const auto& e = plan_.extent(seq);
    buffer_.release(e.model_offset, e.bytes);
  }
  source_ = residual;
}

void delta_encoder::fill_delta(uint64_t seq, const const_model_view& model) {
  auto s = stored(seq);
  auto v = std::span{delta_}.first(s.size());
  plan_.copy_out(seq, model, std::as_writable_bytes(v));
  for (size_t i = 0; i < s.size(); ++i)
    v[i] -= s[i];
}

result<void> decode_delta(const compression_config& c,
                          std::span<const std::byte> in,
                          std::span<const std::byte> global,
                          std::span<float> out) {
  if (auto ok = decode(c, in, out); !ok)
    return ok;
  for (size_t i = 0; i < out.size(); ++i) {
    float g;
    std::memcpy(&g, global.data() + 4 * i, 4);
    out[i] += g;
  }
  return {};
}

} // namespace fedcaf
