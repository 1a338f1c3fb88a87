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
    : config_(c), plan_(std::move(plan)), buffer_(std::move(buffer)) {
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
  if (arriving_ == from_upload && config_.error_feedback &&
      fixed_size(config_.method))
    return settle_and_arrive(seq, g, trained);
  if (arriving_ == from_upload)
    take_residual(seq, trained);
  for (size_t i = 0; i < s.size(); ++i) {
    float x;
    std::memcpy(&x, g.data() + 4 * i, 4);
    s[i] = arriving_ == nothing ? x : x - s[i];
  }
  const auto& e = plan_.extent(seq);
  buffer_.release(e.model_offset, e.bytes); // file-backed only
}

void delta_encoder::settle_and_arrive(uint64_t seq,
                                      std::span<const std::byte> g,
                                      const const_model_view& trained) {
  // Pieces of whole int8 blocks encode as the chunk did: each piece's
  // residual and new s are made while it is in cache, in one pass.
  constexpr size_t piece = 16 * int8_block;
  auto s = stored(seq);
  auto v = std::span{delta_}.first(s.size());
  plan_.copy_out(seq, trained, std::as_writable_bytes(v));
  for (size_t at = 0; at < s.size(); at += piece) {
    auto n = std::min(piece, s.size() - at);
    auto vs = v.subspan(at, n);
    for (size_t i = 0; i < n; ++i)
      vs[i] -= s[at + i];
    auto bytes = fedcaf::encode(config_, vs, encoded_);
    auto d = std::span{decoded_}.first(n);
    (void)decode(config_, std::span{encoded_}.first(bytes), d);
    for (size_t i = 0; i < n; ++i) {
      float x;
      std::memcpy(&x, g.data() + 4 * (at + i), 4);
      s[at + i] = x - (vs[i] - d[i]);
    }
  }
  const auto& e = plan_.extent(seq);
  buffer_.release(e.model_offset, e.bytes); // file-backed only
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
    take_residual(seq, trained);
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

std::span<const float> delta_encoder::delta(uint64_t seq,
                                            const const_model_view& model) {
  fill_delta(seq, model);
  const auto& e = plan_.extent(seq);
  buffer_.release(e.model_offset, e.bytes);
  return std::span{delta_}.first(e.bytes / 4);
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
