#include "fedcaf/window_accumulator.hpp"

#include <algorithm>
#include <cassert>
#include <cstring>

#include "fedcaf/element.hpp"
#include "fedcaf/kernel.hpp"
#include "fedcaf/secagg.hpp"

namespace fedcaf {

namespace {

/// acc[i] = scale * x_i (first) or acc[i] + scale * x_i, x_i element i of
/// the float32 array at x.
FEDCAF_KERNEL void add_scaled_f32(double* acc, const std::byte* x, size_t n,
                                  double scale, bool first) {
  auto at = [x](size_t i) {
    float f;
    std::memcpy(&f, x + i * sizeof f, sizeof f);
    return static_cast<double>(f);
  };
  if (first)
    for (size_t i = 0; i < n; ++i)
      acc[i] = scale * at(i);
  else
    for (size_t i = 0; i < n; ++i)
      acc[i] += scale * at(i);
}

/// The n float64 sums in `slot`'s bytes become the floats sum / divisor in
/// the same bytes (divisor 1: the sums themselves). A block of sums is read
/// before its floats are written, which lie at or before the bytes of sums
/// already read.
FEDCAF_KERNEL void means_in_place(float* slot, size_t n, double divisor) {
  constexpr size_t block = 16;
  const auto* sums = reinterpret_cast<const std::byte*>(slot);
  double x[block];
  size_t i = 0;
  for (; i + block <= n; i += block) {
    std::memcpy(x, sums + i * sizeof(double), sizeof x);
    for (size_t j = 0; j < block; ++j)
      slot[i + j] = static_cast<float>(x[j] / divisor);
  }
  std::memcpy(x, sums + i * sizeof(double), (n - i) * sizeof(double));
  for (size_t j = 0; i + j < n; ++j)
    slot[i + j] = static_cast<float>(x[j] / divisor);
}

/// The n float64 sums at `sums` as the floats sum / divisor, clamped to
/// +-limit, written to `out`: means_in_place, saturate and the copy into
/// the model in one pass, with the same operations (the same bits).
FEDCAF_KERNEL void settle_means(const std::byte* sums, float* out, size_t n,
                                double divisor, float limit) {
  for (size_t i = 0; i < n; ++i) {
    double s;
    std::memcpy(&s, sums + i * sizeof s, sizeof s);
    out[i] = std::clamp(static_cast<float>(s / divisor), -limit, limit);
  }
}

} // namespace

result<window_accumulator>
window_accumulator::make(const manifest& m, chunk_plan plan, uint32_t window,
                         uint32_t contributors, position_rule rule) {
  auto type = common_floating_dtype(m);
  if (!type)
    return type.err();
  FEDCAF_REQUIRE(window > 0 && contributors > 0, errc::bad_config, window,
                 contributors);
  FEDCAF_REQUIRE(rule.trim_ratio >= 0 && rule.trim_ratio < 0.5,
                 errc::bad_config, rule.trim_ratio);
  return window_accumulator{*type, std::move(plan), window, contributors, rule};
}

uint32_t position_rule::trimmed(uint32_t k) const {
  if (k == 0)
    return 0;
  switch (rule) {
  case trimmed_mean:
    return static_cast<uint32_t>(trim_ratio * k);
  case median:
    return (k - 1) / 2;
  default:
    return 0;
  }
}

window_accumulator::window_accumulator(dtype type, chunk_plan plan,
                                       uint32_t window, uint32_t contributors,
                                       position_rule rule)
    : type_(type), plan_(std::move(plan)), window_(window),
      contributors_(contributors), rule_(rule),
      depth_(rule.robust() ? contributors : 2),
      slot_floats_(plan_.chunk_bytes() / dtype_bytes(type) + 1),
      slots_(byte_buffer::uninitialized(uint64_t{window} * depth_ *
                                        slot_floats_ * sizeof(float))),
      counts_(window, 0), weights_(window, 0.0),
      tags_(rule.robust() ? uint64_t{window} * depth_ : 0) {}

float* window_accumulator::slot(uint64_t seq) {
  return reinterpret_cast<float*>(slots_.data()) +
         (seq % window_) * depth_ * slot_floats_;
}

work_split window_accumulator::split() {
  if (threads_ <= 1)
    return {};
  if (!pool_)
    pool_ = std::make_unique<work_pool>(threads_);
  return {pool_.get(), threads_};
}

template <class F> void window_accumulator::in_parts(uint64_t n, F&& f) {
  constexpr uint64_t least = 32768;
  auto parts = static_cast<unsigned>(std::min<uint64_t>(threads_, n / least));
  if (parts <= 1)
    return f(uint64_t{0}, n);
  auto edge = [&](unsigned p) {
    return p == parts ? n : n * p / parts / 16 * 16;
  };
  split().run(parts, [&](unsigned p) { f(edge(p), edge(p + 1)); });
}

result<void> window_accumulator::fold_sum(uint64_t seq,
                                          std::span<const std::byte> x,
                                          double weight) {
  FEDCAF_REQUIRE(!rule_.robust(), errc::internal, "a sum under a robust rule");
  return fold_scaled(seq, x, weight, 1.0, 0);
}

result<void> window_accumulator::fold(uint64_t seq,
                                      std::span<const std::byte> x,
                                      double weight, uint64_t tag) {
  return fold_scaled(seq, x, weight, weight, tag);
}

result<void> window_accumulator::fold_scaled(uint64_t seq,
                                             std::span<const std::byte> x,
                                             double weight, double scale,
                                             uint64_t tag) {
  FEDCAF_REQUIRE(open(seq), errc::out_of_range, seq, low_, window_);
  const auto& e = plan_.extent(seq);
  FEDCAF_REQUIRE(x.size() == e.bytes, errc::out_of_range, x.size(), e.bytes);
  auto& count = counts_[seq % window_];
  FEDCAF_REQUIRE(count < needed(seq) && (!rule_.robust() || count < depth_),
                 errc::bad_sequence, seq, count);
  auto n = e.bytes / dtype_bytes(type_);
  if (rule_.robust()) { // kept as it came, unweighted
    auto* keep = slot(seq) + count * slot_floats_;
    for (size_t i = 0; i < n; ++i)
      keep[i] = load_element(type_, x.data(), i);
    tags_[(seq % window_) * depth_ + count] = tag;
  } else { // a float64 sum, exact for a round's values (see the header)
    auto* acc = reinterpret_cast<double*>(slot(seq));
    bool first = count == 0;
    in_parts(n, [&](uint64_t from, uint64_t to) {
      if (type_ == dtype::float32)
        add_scaled_f32(acc + from, x.data() + from * 4, to - from, scale,
                       first);
      else
        for (auto i = from; i < to; ++i) {
          auto v =
              scale * static_cast<double>(load_element(type_, x.data(), i));
          acc[i] = first ? v : acc[i] + v;
        }
    });
  }
  ++count;
  weights_[seq % window_] += weight;
  return {};
}

void window_accumulator::reduce(uint64_t seq, size_t n, uint32_t k) {
  auto* base = slot(seq);
  auto t = rule_.trimmed(k);
  auto kept = k - 2 * t;
  std::vector<uint32_t> order(k);
  std::vector<uint64_t> dropped(k, 0);
  for (size_t i = 0; i < n; ++i) {
    // Insertion sort of the k values' indices: k is the clients of a
    // round, a handful; ties keep the order they were folded in.
    for (uint32_t j = 0; j < k; ++j) {
      auto v = base[j * slot_floats_ + i];
      auto at = j;
      for (; at > 0 && base[order[at - 1] * slot_floats_ + i] > v; --at)
        order[at] = order[at - 1];
      order[at] = j;
    }
    double sum = 0;
    for (auto j = t; j < t + kept; ++j)
      sum += base[order[j] * slot_floats_ + i];
    for (uint32_t j = 0; j < t; ++j) {
      ++dropped[order[j]];
      ++dropped[order[k - 1 - j]];
    }
    base[i] = static_cast<float>(sum / kept); // over contribution 0's value,
  }                                           // read before, not needed after
  if (t > 0)
    for (uint32_t j = 0; j < k; ++j)
      trimmed_[tags_[(seq % window_) * depth_ + j]] += dropped[j];
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

void window_accumulator::finalize_next(std::span<const std::byte> current,
                                       std::span<std::byte> next,
                                       server_optimizer* opt) {
  assert(ready() && current.size() == plan_.total_bytes() &&
         next.size() == current.size());
  const auto& e = plan_.extent(low_);
  auto* acc = slot(low_);
  auto element = dtype_bytes(type_);
  auto n = e.bytes / element;
  const auto* old = current.data() + e.model_offset;
  auto* out = next.data() + e.model_offset;
  auto& weight = weights_[low_ % window_];
  auto count = counts_[low_ % window_];
  // A sum of clamped updates is clamped at the root, after its division.
  auto limit =
      sums_ ? finite_limit(type_) : std::min(limit_, finite_limit(type_));
  auto divisor = sums_ ? 1.0 : weight;
  bool direct = count > 0 && !rule_.robust() && !opt && type_ == dtype::float32;
  if (direct) // FedAvg's means straight into the model, in one pass
    in_parts(n, [&](uint64_t from, uint64_t to) {
      settle_means(reinterpret_cast<const std::byte*>(acc) + from * 8,
                   reinterpret_cast<float*>(out) + from, to - from, divisor,
                   limit);
    });
  else if (count > 0 && rule_.robust())
    reduce(low_, n, count);
  else if (count > 0)
    means_in_place(acc, n, divisor);
  else
    for (size_t i = 0; i < n; ++i)
      acc[i] = load_element(type_, old, i);
  if (count > 0 && !rule_.robust() && sums_) {
    if (position_weights_.size() < plan_.chunk_count())
      position_weights_.resize(plan_.chunk_count(), 0.0);
    position_weights_[low_] = weight;
  }
  if (opt)
    opt->step(e.model_offset / element, {acc, n}, {old, e.bytes}, weight);
  if (!direct) {
    saturate(acc, n, limit);
    if (type_ == dtype::float32)
      std::memcpy(out, acc, n * sizeof(float));
    else
      for (size_t i = 0; i < n; ++i)
        store_element(type_, out, i, acc[i]);
  }
  counts_[low_ % window_] = 0;
  weight = 0;
  ++low_;
}

bool window_accumulator::finish_round() {
  if (low_ != plan_.chunk_count())
    return false;
  abandon_round();
  return true;
}

void window_accumulator::abandon_round() {
  low_ = 0;
  cuts_.clear();
  position_weights_.clear(); // a round's weights are its own
  std::fill(counts_.begin(), counts_.end(), 0);
  std::fill(weights_.begin(), weights_.end(), 0.0);
}

void window_accumulator::restart(uint32_t contributors) {
  assert(contributors > 0);
  low_ = 0;
  set_contributors(contributors);
  trimmed_.clear();
  cuts_.clear();
  position_weights_.clear();
  std::fill(counts_.begin(), counts_.end(), 0);
  std::fill(weights_.begin(), weights_.end(), 0.0);
}

} // namespace fedcaf
