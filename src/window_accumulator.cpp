#include "fedcaf/window_accumulator.hpp"

#include <algorithm>
#include <cassert>

#include "fedcaf/element.hpp"

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
      counts_(window, 0) {}

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
  FEDCAF_REQUIRE(count < contributors_, errc::bad_sequence, seq, count);
  auto* acc = slot(seq);
  auto n = e.bytes / dtype_bytes(type_);
  auto w = static_cast<float>(weight);
  for (size_t i = 0; i < n; ++i) {
    auto v = w * load_element(type_, x.data(), i);
    acc[i] = count == 0 ? v : acc[i] + v;
  }
  ++count;
  return {};
}

bool window_accumulator::ready() const {
  return low_ < plan_.chunk_count() && counts_[low_ % window_] == contributors_;
}

void window_accumulator::finalize_next(std::span<std::byte> model) {
  assert(ready() && model.size() == plan_.total_bytes());
  const auto& e = plan_.extent(low_);
  auto* acc = slot(low_);
  auto element = dtype_bytes(type_);
  auto* out = model.data() + e.model_offset;
  auto inv = static_cast<float>(1.0 / weight_sum_);
  for (size_t i = 0; i < e.bytes / element; ++i)
    store_element(type_, out, i, acc[i] * inv);
  counts_[low_ % window_] = 0;
  ++low_;
}

bool window_accumulator::finish_round() {
  if (low_ != plan_.chunk_count())
    return false;
  low_ = 0;
  weight_sum_ = 0;
  std::fill(counts_.begin(), counts_.end(), 0);
  return true;
}

void window_accumulator::restart(uint32_t contributors) {
  assert(contributors > 0);
  low_ = 0;
  weight_sum_ = 0;
  contributors_ = contributors;
  std::fill(counts_.begin(), counts_.end(), 0);
}

} // namespace fedcaf
