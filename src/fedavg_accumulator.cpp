#include "fedcaf/fedavg_accumulator.hpp"

#include <cstring>

#include "fedcaf/element.hpp"
#include "fedcaf/secagg.hpp"

namespace fedcaf {

namespace {

/// out[i] = w * x[i] (assign) or out[i] += w * x[i], x of dtype t.
template <bool Assign>
void scale_into(float* out, dtype t, const std::byte* x, size_t n, float w) {
  if (t == dtype::float32 &&
      reinterpret_cast<uintptr_t>(x) % alignof(float) == 0) {
    const auto* in = reinterpret_cast<const float*>(x);
    for (size_t i = 0; i < n; ++i)
      out[i] = Assign ? w * in[i] : out[i] + w * in[i];
    return;
  }
  for (size_t i = 0; i < n; ++i) {
    auto v = load_element(t, x, i);
    out[i] = Assign ? w * v : out[i] + w * v;
  }
}

} // namespace

result<fedavg_accumulator> fedavg_accumulator::make(const manifest& m,
                                                    chunk_plan plan) {
  auto type = common_floating_dtype(m);
  if (!type)
    return type.err();
  FEDCAF_REQUIRE(plan.total_bytes() == m.total_bytes(), errc::internal,
                 plan.total_bytes(), m.total_bytes());
  return fedavg_accumulator{m.total_bytes(), *type, std::move(plan)};
}

void fedavg_accumulator::recycle(byte_buffer&& buffer) {
  if (buffer.size() != total_bytes_)
    return;
  if (type_ == dtype::float32) {
    if (sum_.size() == 0)
      sum_ = std::move(buffer);
  } else if (spare_.size() == 0) {
    spare_ = std::move(buffer);
  }
}

result<void> fedavg_accumulator::fold_scaled(uint64_t seq,
                                             std::span<const std::byte> x,
                                             double weight, double scale) {
  FEDCAF_REQUIRE(seq < plan_.chunk_count(), errc::out_of_range, seq,
                 plan_.chunk_count());
  const auto& e = plan_.extent(seq);
  FEDCAF_REQUIRE(x.size() == e.bytes, errc::out_of_range, x.size(), e.bytes);
  FEDCAF_REQUIRE(weight > 0, errc::internal, weight);
  if (sum_.size() == 0)
    sum_ = byte_buffer::uninitialized(sum_bytes());
  if (weights_.empty())
    weights_.assign(plan_.chunk_count(), 0.0);
  auto element = dtype_bytes(type_);
  auto* acc = reinterpret_cast<float*>(sum_.data()) + e.model_offset / element;
  auto n = x.size() / element;
  auto w = static_cast<float>(scale);
  if (weights_[seq] > 0)
    scale_into<false>(acc, type_, x.data(), n, w);
  else
    scale_into<true>(acc, type_, x.data(), n, w);
  weights_[seq] += weight;
  return {};
}

std::span<std::byte> fedavg_accumulator::ring_bytes(uint64_t seq, bool& fresh) {
  if (sum_.size() == 0)
    sum_ = byte_buffer::uninitialized(sum_bytes());
  if (weights_.empty())
    weights_.assign(plan_.chunk_count(), 0.0);
  if (ring_started_.empty())
    ring_started_.assign(plan_.chunk_count(), false);
  const auto& e = plan_.extent(seq);
  fresh = !ring_started_[seq];
  ring_started_[seq] = true;
  return {sum_.data() + e.model_offset, e.bytes};
}

std::span<std::byte> fedavg_accumulator::ring(uint64_t seq) {
  bool fresh = false;
  auto bytes = ring_bytes(seq, fresh);
  if (fresh)
    std::memset(bytes.data(), 0, bytes.size());
  return bytes;
}

result<void> fedavg_accumulator::fold_ring(uint64_t seq,
                                           std::span<const std::byte> x) {
  FEDCAF_REQUIRE(seq < plan_.chunk_count() && type_ == dtype::float32,
                 errc::out_of_range, seq, plan_.chunk_count());
  FEDCAF_REQUIRE(x.size() == plan_.extent(seq).bytes, errc::out_of_range,
                 x.size(), plan_.extent(seq).bytes);
  bool fresh = false;
  auto sum = ring_bytes(seq, fresh);
  secagg::add_ring(sum, x, fresh);
  return {};
}

result<byte_buffer>
fedavg_accumulator::keep(std::span<const std::byte> global) {
  FEDCAF_REQUIRE(type_ == dtype::float32 && global.size() == total_bytes_,
                 errc::internal, global.size(), total_bytes_);
  if (sum_.size() == 0)
    sum_ = byte_buffer::uninitialized(sum_bytes());
  std::memcpy(sum_.data(), global.data(), global.size());
  weights_.clear();
  ring_started_.clear();
  return std::move(sum_);
}

void fedavg_accumulator::mark_folded(uint64_t seq, double weight) {
  if (weights_.empty())
    weights_.assign(plan_.chunk_count(), 0.0);
  weights_[seq] = weight;
}

result<byte_buffer>
fedavg_accumulator::finalize(std::span<const std::byte> global,
                             server_optimizer* opt) {
  FEDCAF_REQUIRE(!weights_.empty(), errc::internal, "no update was folded");
  FEDCAF_REQUIRE(global.size() == total_bytes_, errc::internal, global.size(),
                 total_bytes_);
  auto element = dtype_bytes(type_);
  auto* acc = reinterpret_cast<float*>(sum_.data());
  byte_buffer out;
  if (type_ != dtype::float32)
    out = spare_.size() ? std::move(spare_)
                        : byte_buffer::uninitialized(total_bytes_);
  for (uint64_t seq = 0; seq < plan_.chunk_count(); ++seq) {
    const auto& e = plan_.extent(seq);
    auto first = e.model_offset / element;
    auto n = e.bytes / element;
    const auto* old = global.data() + e.model_offset;
    if (weights_[seq] > 0 && sums_) {
      // a relay's partial sum: left as it is
    } else if (weights_[seq] > 0) {
      auto inv = static_cast<float>(1.0 / weights_[seq]);
      for (size_t i = first; i < first + n; ++i)
        acc[i] *= inv;
    } else {
      for (size_t i = 0; i < n; ++i)
        acc[first + i] = load_element(type_, old, i);
    }
    if (opt)
      opt->step(first, {acc + first, n}, {old, e.bytes}, weights_[seq]);
    // A sum of clamped updates is clamped at the root, after its division.
    saturate(acc + first, n,
             sums_ ? finite_limit(type_)
                   : std::min(limit_, finite_limit(type_)));
    if (type_ != dtype::float32)
      for (size_t i = first; i < first + n; ++i)
        store_element(type_, out.data(), i, acc[i]);
  }
  if (opt)
    opt->finish_round();
  if (sums_)
    position_weights_ = weights_;
  weights_.clear();
  ring_started_.clear();
  if (type_ == dtype::float32)
    return std::move(sum_);
  return out;
}

} // namespace fedcaf
