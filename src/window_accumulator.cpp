#include "fedcaf/window_accumulator.hpp"

#include <algorithm>
#include <cassert>
#include <cstring>

#include "fedcaf/element.hpp"
#include "fedcaf/secagg.hpp"

namespace fedcaf {

result<window_accumulator> window_accumulator::make(const manifest& m,
                                                    chunk_plan plan,
                                                    uint32_t window,
                                                    uint32_t contributors) {
  auto type = common_floating_dtype(m);
  if (!type)
    return type.err();
  FEDCAF_REQUIRE(window > 0 && contributors > 0, errc::bad_config, window,
                 contributors);
  return window_accumulator{*type, std::move(plan), window, contributors};
}

window_accumulator::window_accumulator(dtype type, chunk_plan plan,
                                       uint32_t window, uint32_t contributors)
    : type_(type), plan_(std::move(plan)), window_(window),
      contributors_(contributors),
      slot_floats_(plan_.chunk_bytes() / dtype_bytes(type) + 1),
      slots_(byte_buffer::uninitialized(window * slot_floats_ * sizeof(float))),
      counts_(window, 0), weights_(window, 0.0) {}

float* window_accumulator::slot(uint64_t seq) {
  return reinterpret_cast<float*>(slots_.data()) +
         (seq % window_) * slot_floats_;
}

result<void> window_accumulator::fold(uint64_t seq,
                                      std::span<const std::byte> x,
                                      double weight) {
  FEDCAF_REQUIRE(open(seq), errc::out_of_range, seq, low_, window_);
  const auto& e = plan_.extent(seq);
  FEDCAF_REQUIRE(x.size() == e.bytes, errc::out_of_range, x.size(), e.bytes);
  auto& count = counts_[seq % window_];
  FEDCAF_REQUIRE(count < needed(seq), errc::bad_sequence, seq, count);
  auto* acc = slot(seq);
  auto n = e.bytes / dtype_bytes(type_);
  auto w = static_cast<float>(weight);
  for (size_t i = 0; i < n; ++i) {
    auto v = w * load_element(type_, x.data(), i);
    acc[i] = count == 0 ? v : acc[i] + v;
  }
  ++count;
  weights_[seq % window_] += weight;
  return {};
}

result<void> window_accumulator::fold_ring(uint64_t seq,
                                           std::span<const std::byte> x) {
  FEDCAF_REQUIRE(open(seq), errc::out_of_range, seq, low_, window_);
  const auto& e = plan_.extent(seq);
  FEDCAF_REQUIRE(x.size() == e.bytes && e.bytes % 4 == 0 &&
                     type_ == dtype::float32,
                 errc::out_of_range, x.size(), e.bytes);
  auto& count = counts_[seq % window_];
  FEDCAF_REQUIRE(count < needed(seq), errc::bad_sequence, seq, count);
  secagg::add_ring({reinterpret_cast<std::byte*>(slot(seq)), e.bytes}, x,
                   count == 0);
  ++count;
  weights_[seq % window_] += 1.0;
  return {};
}

void window_accumulator::store_ring_next(std::span<std::byte> model) {
  assert(ready() && model.size() == plan_.total_bytes());
  const auto& e = plan_.extent(low_);
  auto& count = counts_[low_ % window_];
  if (count > 0)
    std::memcpy(model.data() + e.model_offset, slot(low_), e.bytes);
  else // nobody's chunk: an empty sum
    std::memset(model.data() + e.model_offset, 0, e.bytes);
  count = 0;
  weights_[low_ % window_] = 0;
  ++low_;
}

uint32_t window_accumulator::needed(uint64_t seq) const {
  auto gone = std::count_if(cuts_.begin(), cuts_.end(),
                            [seq](uint64_t at) { return at <= seq; });
  return contributors_ - std::min<uint32_t>(contributors_, gone);
}

bool window_accumulator::ready() const {
  return low_ < plan_.chunk_count() && counts_[low_ % window_] >= needed(low_);
}

void window_accumulator::finalize_next(std::span<std::byte> model,
                                       server_optimizer* opt) {
  assert(ready() && model.size() == plan_.total_bytes());
  const auto& e = plan_.extent(low_);
  auto* acc = slot(low_);
  auto element = dtype_bytes(type_);
  auto n = e.bytes / element;
  auto* out = model.data() + e.model_offset;
  auto& weight = weights_[low_ % window_];
  if (counts_[low_ % window_] > 0) {
    auto inv = static_cast<float>(1.0 / weight);
    for (size_t i = 0; i < n; ++i)
      acc[i] *= inv;
  } else {
    for (size_t i = 0; i < n; ++i)
      acc[i] = load_element(type_, out, i);
  }
  if (opt)
    opt->step(e.model_offset / element, {acc, n}, {out, e.bytes}, weight);
  saturate(acc, n, std::min(limit_, finite_limit(type_)));
  for (size_t i = 0; i < n; ++i)
    store_element(type_, out, i, acc[i]);
  counts_[low_ % window_] = 0;
  weight = 0;
  ++low_;
}

bool window_accumulator::finish_round() {
  if (low_ != plan_.chunk_count())
    return false;
  low_ = 0;
  cuts_.clear();
  std::fill(counts_.begin(), counts_.end(), 0);
  std::fill(weights_.begin(), weights_.end(), 0.0);
  return true;
}

void window_accumulator::restart(uint32_t contributors) {
  assert(contributors > 0);
  low_ = 0;
  contributors_ = contributors;
  cuts_.clear();
  std::fill(counts_.begin(), counts_.end(), 0);
  std::fill(weights_.begin(), weights_.end(), 0.0);
}

} // namespace fedcaf
