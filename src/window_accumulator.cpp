#include "fedcaf/window_accumulator.hpp"

#include <algorithm>
#include <cassert>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "fedcaf/element.hpp"
#include "fedcaf/grid_units.hpp"
#include "fedcaf/kernel.hpp"
#include "fedcaf/secagg.hpp"
#include "fedcaf/update_check.hpp"

namespace fedcaf {

namespace {

using namespace grid;

/// acc[i] = (assign ? 0 : acc[i]) + sign * units_of(v[i]) in int64 (the
/// two-pass fold: a block with a value past int32, a take-back, a host
/// without AVX2; fold_units64_avx2 makes the rest in one pass).
FEDCAF_KERNEL void add_units64(int64_t* acc, const float* v, size_t n, int sign,
                               bool assign) {
  for (size_t i = 0; i < n; ++i)
    acc[i] = (assign ? 0 : acc[i]) + sign * units_of(v[i]);
}

/// out[i] = base g[i] + f[i] s[i], clamped to +-limit: in float where s[i]
/// fits in int32, else in double (fedavg_accumulator::settle_chunk's
/// arithmetic, so the same bits).
FEDCAF_KERNEL void settle_sums(const int64_t* sums, const std::byte* g,
                               float* out, size_t n, double base,
                               const float* f, float limit) {
  auto b = static_cast<float>(base);
  for (size_t i = 0; i < n; ++i) {
    auto s = sums[i];
    float gi;
    std::memcpy(&gi, g + i * 4, 4);
    auto r =
        s == static_cast<int32_t>(s)
            ? b * gi + f[i] * static_cast<float>(static_cast<int32_t>(s))
            : static_cast<float>(base * gi + f[i] * static_cast<double>(s));
    out[i] = r < -limit ? -limit : (r > limit ? limit : r);
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
/// scaled_deltas (grid_units.hpp) and add_units64 of its values, in one pass
/// without storing them: the same squares (the same operations in the same
/// lanes), the same `most`, the same integers where every |value| stays
/// below int32_room. A larger value adds cvtps2dq's INT32_MIN instead: the
/// caller takes the call back out with `sign` -1 (the same integers come
/// out) and folds the values in two passes.
[[gnu::target("avx2")]] float
fold_units64_avx2(int64_t* acc, const std::byte* x, const std::byte* g,
                  size_t n, float k, const float* s, int sign, bool assign,
                  uint32_t& most) {
  __m256 squares = _mm256_setzero_ps();
  __m256i top = _mm256_setzero_si256();
  const __m256 kk = _mm256_set1_ps(k);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    auto units = units8(x + i * 4, g + i * 4, s + i, kk, squares, top);
    auto lo = _mm256_cvtepi32_epi64(_mm256_castsi256_si128(units));
    auto hi = _mm256_cvtepi32_epi64(_mm256_extracti128_si256(units, 1));
    auto* at = reinterpret_cast<__m256i*>(acc + i);
    if (!assign) {
      auto was_lo = _mm256_loadu_si256(at), was_hi = _mm256_loadu_si256(at + 1);
      lo = sign > 0 ? _mm256_add_epi64(was_lo, lo)
                    : _mm256_sub_epi64(was_lo, lo);
      hi = sign > 0 ? _mm256_add_epi64(was_hi, hi)
                    : _mm256_sub_epi64(was_hi, hi);
    }
    _mm256_storeu_si256(at, lo);
    _mm256_storeu_si256(at + 1, hi);
  }
  float sum = lanes_sum(squares, top, most);
  for (; i < n; ++i) {
    float v = tail_unit(x + i * 4, g + i * 4, s[i], k, sum, most);
    auto q = v < int32_room && v > -int32_room
                 ? static_cast<int64_t>(_mm_cvtss_si32(_mm_set_ss(v)))
                 : int64_t{INT32_MIN};
    acc[i] = (assign ? 0 : acc[i]) + sign * q;
  }
  return sum;
}
#endif

/// settle_sums where every sum fits in int32 (its float path alone, which
/// the compiler vectorizes).
FEDCAF_KERNEL void settle_small(const int64_t* sums, const std::byte* g,
                                float* out, size_t n, float base,
                                const float* f, float limit) {
  for (size_t i = 0; i < n; ++i) {
    float gi;
    std::memcpy(&gi, g + i * 4, 4);
    auto r =
        base * gi + f[i] * static_cast<float>(static_cast<int32_t>(sums[i]));
    out[i] = r < -limit ? -limit : (r > limit ? limit : r);
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
  window_accumulator acc{*type, std::move(plan), window, contributors, rule};
  for (uint64_t seq = 0; seq < acc.plan_.chunk_count(); ++seq)
    acc.uncounted_.push_back(uncounted_ranges(m, acc.plan_, seq));
  return acc;
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
      tags_(rule.robust() ? uint64_t{window} * depth_ : 0),
      blocks_per_slot_((slot_floats_ - 1 + grid::block_elements - 1) /
                       grid::block_elements),
      bounds_(rule.robust() ? 0 : uint64_t{window} * blocks_per_slot_, 0),
      runs_per_slot_((slot_floats_ - 1 + grid::run_elements - 1) /
                     grid::run_elements),
      exponents_(rule.robust() ? 0 : uint64_t{window} * runs_per_slot_) {}

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
    return p == parts ? n : n * p / parts / block_elements * block_elements;
  };
  split().run(parts, [&](unsigned p) { f(edge(p), edge(p + 1)); });
}

result<const std::byte*>
window_accumulator::admits(uint64_t seq, std::span<const std::byte> x,
                           std::span<const std::byte> global) const {
  FEDCAF_REQUIRE(open(seq), errc::out_of_range, seq, low_, window_);
  const auto& e = plan_.extent(seq);
  FEDCAF_REQUIRE(x.size() == e.bytes, errc::out_of_range, x.size(), e.bytes);
  auto count = counts_[seq % window_];
  FEDCAF_REQUIRE(count < needed(seq) && (!rule_.robust() || count < depth_),
                 errc::bad_sequence, seq, count);
  FEDCAF_REQUIRE(global.empty() || global.size() == plan_.total_bytes(),
                 errc::internal, global.size(), plan_.total_bytes());
  return global.empty() ? nullptr : global.data() + e.model_offset;
}

result<void> window_accumulator::fold(uint64_t seq,
                                      std::span<const std::byte> x,
                                      double weight,
                                      std::span<const std::byte> global,
                                      uint64_t tag) {
  if (on_grid()) {
    auto d = fold_measured(seq, x, weight, false, global);
    return d ? result<void>{} : result<void>{d.err()};
  }
  if (auto ok = admits(seq, x, {}); !ok)
    return ok.err();
  auto& count = counts_[seq % window_];
  auto n = x.size() / dtype_bytes(type_);
  auto* keep = slot(seq) + count * slot_floats_; // as it came, unweighted
  for (size_t i = 0; i < n; ++i)
    keep[i] = load_element(type_, x.data(), i);
  tags_[(seq % window_) * depth_ + count] = tag;
  ++count;
  weights_[seq % window_] += weight;
  return {};
}

result<void> window_accumulator::fold_sum(uint64_t seq,
                                          std::span<const std::byte> x,
                                          double weight,
                                          std::span<const std::byte> global) {
  FEDCAF_REQUIRE(on_grid(), errc::internal, "a sum under a robust rule");
  auto d = fold_measured(seq, x, weight, true, global);
  return d ? result<void>{} : result<void>{d.err()};
}

void window_accumulator::measure_grid(uint64_t seq, const std::byte* g) {
  auto element = dtype_bytes(type_);
  auto n = plan_.extent(seq).bytes / element;
  auto* out = exponents(seq);
  for (uint64_t o = 0; o < n; o += run_elements)
    out[o / run_elements] = static_cast<int8_t>(
        g ? run_exponent(type_, g + o * element, std::min(run_elements, n - o))
          : least_exponent);
}

bool window_accumulator::apply(uint64_t seq, const std::byte* x, double weight,
                               bool summed, const std::byte* g, int add,
                               bool assign, uint64_t from, uint64_t to,
                               std::optional<double> max_abs, double* squares) {
  auto element = dtype_bytes(type_);
  const auto& skip = uncounted_[seq];
  auto* acc = sums(seq);
  auto k = summed ? static_cast<float>(weight) : 1.0f;
  auto w_scale =
      std::ldexp(summed ? 1.0f : static_cast<float>(weight), -weight_bits_);
  auto fail = [&](uint64_t o) { // what this call added before o, taken out
    if (add > 0 && !assign && o > from)
      apply(seq, x, weight, summed, g, -1, false, from, o, std::nullopt,
            nullptr);
    return false;
  };
  auto* bound = bounds(seq);
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool fused_fold = __builtin_cpu_supports("avx2");
#else
  constexpr bool fused_fold = false;
#endif
  alignas(64) float v[block_elements];
  alignas(64) float xs[block_elements];
  alignas(64) float gs[block_elements];
  alignas(64) float s[block_elements]; // each element's scale
  const auto* e = exponents(seq);
  for (auto o = from; o < to; o += block_elements) {
    auto len = std::min(block_elements, to - o);
    if (max_abs &&
        any_out_of_bounds(type_, {x + o * element, len * element}, *max_abs))
      return fail(o);
    for (uint64_t lo = 0; lo < len; lo += run_elements)
      std::fill(s + lo, s + std::min(lo + run_elements, len),
                w_scale * power_of_two(grid_bits - e[(o + lo) / run_elements]));
    auto* xb = as_floats(type_, x + o * element, len, xs);
    const auto* gb = as_floats(type_, g + o * element, len, gs);
    // The block's runs split where tensors outside the distance lie (a
    // model-sized sum and open positions alike: the same squares).
    auto runs = [&](auto&& each) { split_runs(skip, element, o, len, each); };
    uint32_t most = 0;
    // Values made and added in one pass (AVX2), taken back out if one
    // proves too large for it; else made, then added.
    bool fused = fused_fold && add > 0;
    runs([&](uint64_t at, uint64_t end, bool counted) {
      float sq = 0;
#if defined(__x86_64__) && defined(__GNUC__)
      if (fused)
        sq = fold_units64_avx2(acc + o + at, xb + at * 4, gb + at * 4, end - at,
                               k, s + at, +1, assign, most);
#endif
      if (!fused)
        sq = scaled_deltas(xb + at * 4, gb + at * 4, v + at, end - at, k,
                           s + at, most);
      if (counted && squares)
        squares[o / segment_elements] += sq;
    });
    float largest;
    std::memcpy(&largest, &most, 4);
    // A delta beyond the exact range (2^46 grid steps), or a block whose
    // bound on |sum| would reach 2^62 (a model-sized sum's block's limit),
    // is refused, and what this call added before it taken back out.
    auto b = o / block_elements;
    uint64_t before = assign ? 0 : bound[b], grows = 0;
    bool beyond = add > 0 && !(largest < most_units);
    if (add > 0 && !beyond) {
      grows = static_cast<uint64_t>(largest) + 1;
      beyond = before + grows >= wide_limit;
    }
    if (fused && (beyond || !(largest < int32_room))) { // rare: taken back
#if defined(__x86_64__) && defined(__GNUC__)
      uint32_t again = 0;
      if (!assign)
        runs([&](uint64_t at, uint64_t end, bool) {
          fold_units64_avx2(acc + o + at, xb + at * 4, gb + at * 4, end - at, k,
                            s + at, -1, false, again);
        });
      scaled_deltas(xb, gb, v, len, k, s, again); // made, added below
#endif
      fused = false;
    }
    if (beyond)
      return fail(o);
    if (add > 0)
      bound[b] = before + grows;
    if (!fused)
      add_units64(acc + o, v, len, add, assign);
  }
  return true;
}

result<const std::byte*>
window_accumulator::begin_fold(uint64_t seq, std::span<const std::byte> x,
                               std::span<const std::byte> global,
                               double weight) {
  auto g = admits(seq, x, global);
  if (!g || *g)
    return g;
  // No g (a window-mode relay's round given up): the contribution is
  // counted, its values never folded or refused: the sum goes nowhere.
  auto at = seq % window_;
  if (counts_[at] == 0) {
    std::memset(sums(seq), 0, plan_.extent(seq).bytes / dtype_bytes(type_) * 8);
    std::fill(bounds(seq), bounds(seq) + blocks_per_slot_, uint64_t{0});
    measure_grid(seq, nullptr);
  }
  undo_bounds_.assign(bounds(seq), bounds(seq) + blocks_per_slot_);
  undo_weight_ = weights_[at];
  undo_folded_ = false;
  ++counts_[at];
  weights_[at] += weight;
  return nullptr;
}

result<double> window_accumulator::fold_measured(
    uint64_t seq, std::span<const std::byte> x, double weight, bool summed,
    std::span<const std::byte> global, std::optional<double> max_abs) {
  FEDCAF_REQUIRE(on_grid(), errc::internal, "a robust rule's fold measured");
  auto g = begin_fold(seq, x, global, weight);
  if (!g)
    return g.err();
  if (!*g) // counted, nothing folded: no g
    return 0.0;
  const auto& e = plan_.extent(seq);
  auto n = e.bytes / dtype_bytes(type_);
  auto at = seq % window_;
  bool assign = counts_[at] == 0;
  if (assign) // the position's grid, from g, for its folds and settling
    measure_grid(seq, *g);
  undo_bounds_.assign(bounds(seq), bounds(seq) + blocks_per_slot_);
  auto segments = (n + segment_elements - 1) / segment_elements;
  auto parts =
      static_cast<unsigned>(std::min<uint64_t>(threads_, segments / 2));
  parts = std::max(parts, 1u);
  auto edge = [&](unsigned p) {
    return std::min(n, segments * p / parts * segment_elements);
  };
  std::vector<double> squares(segments, 0.0);
  std::vector<char> ok(parts, 0);
  auto part = [&](unsigned p) {
    ok[p] = apply(seq, x.data(), weight, summed, *g, +1, assign, edge(p),
                  edge(p + 1), max_abs, squares.data());
  };
  if (parts == 1)
    part(0);
  else
    split().run(parts, part);
  if (!std::all_of(ok.begin(), ok.end(), [](char c) { return c; })) {
    for (unsigned p = 0; p < parts && !assign; ++p)
      if (ok[p])
        apply(seq, x.data(), weight, summed, *g, -1, false, edge(p),
              edge(p + 1), std::nullopt, nullptr);
    std::copy(undo_bounds_.begin(), undo_bounds_.end(), bounds(seq));
    if (max_abs && any_out_of_bounds(type_, x, *max_abs))
      return error{errc::poisoned_update,
                   "chunk " + std::to_string(seq) +
                       " holds NaN, infinite values or values beyond +-" +
                       std::to_string(*max_abs)};
    return error{errc::poisoned_update,
                 "chunk " + std::to_string(seq) +
                     " holds a value beyond 2^19 times the magnitude of the "
                     "global model around it (the exact sum's range)"};
  }
  undo_weight_ = weights_[at];
  undo_folded_ = true;
  ++counts_[at];
  weights_[at] += weight;
  double distance = 0; // in segment order: the bits of one thread
  for (double d : squares)
    distance += d;
  return distance;
}

void window_accumulator::unfold(uint64_t seq, std::span<const std::byte> x,
                                double weight, bool summed,
                                std::span<const std::byte> global) {
  auto at = seq % window_;
  assert(counts_[at] > 0);
  --counts_[at];
  // The first fold there was written: nothing to take; nor from a round
  // given up (no g: nothing was folded).
  if (counts_[at] > 0 && undo_folded_) {
    const auto& e = plan_.extent(seq);
    apply(seq, x.data(), weight, summed, global.data() + e.model_offset, -1,
          false, 0, e.bytes / dtype_bytes(type_), std::nullopt, nullptr);
  }
  std::copy(undo_bounds_.begin(), undo_bounds_.end(), bounds(seq));
  weights_[at] = undo_weight_;
}

result<double>
window_accumulator::fold_grid(uint64_t seq, std::span<const std::byte> x,
                              double weight,
                              std::span<const std::byte> global) {
  FEDCAF_REQUIRE(takes_grid(), errc::out_of_range, dtype_name(type_));
  auto g = begin_fold(seq, x, global, weight);
  if (!g)
    return g.err();
  if (!*g) // counted, nothing folded: no g
    return 0.0;
  const auto& e = plan_.extent(seq);
  auto n = e.bytes / 4;
  auto at = seq % window_;
  bool assign = counts_[at] == 0;
  auto* bound = bounds(seq);
  auto load = [&x](uint64_t i) {
    int32_t s;
    std::memcpy(&s, x.data() + i * 4, 4);
    return int64_t{s};
  };
  // Each block's largest |S| first: a sum beyond the exact range of
  // `weight` updates, or past what the block's int64 sums hold (its bound
  // reaching 2^62, as a model-sized sum's block), changes nothing.
  auto blocks = (n + block_elements - 1) / block_elements;
  std::vector<uint64_t> most(blocks, 0);
  for (uint64_t i = 0; i < n; ++i) {
    auto& m = most[i / block_elements];
    m = std::max<uint64_t>(m, static_cast<uint64_t>(std::abs(load(i))));
  }
  for (uint64_t b = 0; b < blocks; ++b)
    if (static_cast<double>(most[b]) >=
            static_cast<double>(most_units) * weight ||
        (assign ? 0 : bound[b]) + most[b] >= wide_limit)
      return error{errc::poisoned_update,
                   "chunk " + std::to_string(seq) +
                       " holds a sum beyond 2^46 grid steps per update of "
                       "its weight (the exact sum's range)"};
  // The distance of the sum from weight g: (u S)^2 per counted element
  // in element order, u its run's step, summed per segment as a
  // model-sized sum sums it.
  double distance = 0, segment = 0;
  if (assign)
    measure_grid(seq, *g);
  const auto* exps = exponents(seq);
  for (uint64_t o = 0; o < n; o += block_elements) {
    auto len = std::min(block_elements, n - o);
    if (o > 0 && o % segment_elements == 0) {
      distance += segment;
      segment = 0;
    }
    split_runs(uncounted_[seq], 4, o, len,
               [&](uint64_t at, uint64_t end, bool counted) {
                 for (auto i = o + at; counted && i < o + end; ++i) {
                   double unit = power_of_two(exps[i / run_elements] -
                                              grid_bits + weight_bits_);
                   double d = unit * static_cast<double>(load(i));
                   segment += d * d;
                 }
               });
  }
  distance += segment;
  auto* acc = sums(seq);
  for (uint64_t i = 0; i < n; ++i)
    acc[i] = (assign ? 0 : acc[i]) + load(i);
  undo_bounds_.assign(bound, bound + blocks_per_slot_);
  undo_weight_ = weights_[at];
  undo_folded_ = true;
  for (uint64_t b = 0; b < blocks; ++b)
    bound[b] = (assign ? 0 : bound[b]) + most[b];
  ++counts_[at];
  weights_[at] += weight;
  return distance;
}

void window_accumulator::unfold_grid(uint64_t seq,
                                     std::span<const std::byte> x) {
  auto at = seq % window_;
  assert(counts_[at] > 0);
  --counts_[at];
  auto* acc = sums(seq);
  for (uint64_t i = 0; counts_[at] > 0 && undo_folded_ && i < x.size() / 4;
       ++i) {
    int32_t s;
    std::memcpy(&s, x.data() + i * 4, 4);
    acc[i] -= s;
  }
  std::copy(undo_bounds_.begin(), undo_bounds_.end(), bounds(seq));
  weights_[at] = undo_weight_;
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

void window_accumulator::settle_grid(const std::byte* g, float* out,
                                     uint64_t from, uint64_t to, double weight,
                                     float limit) {
  auto element = dtype_bytes(type_);
  const auto* acc = sums(low_);
  // Written over the slot's own sums: a block's floats lie over sums
  // already read (this block's, read before they are written, or earlier
  // ones').
  bool in_slot = out == slot(low_);
  const auto* bound = bounds(low_);
  alignas(64) float gs[block_elements];
  alignas(64) float f[block_elements]; // each element's factor
  alignas(64) float r[block_elements];
  const auto* e = exponents(low_);
  for (auto o = from; o < to; o += block_elements) {
    auto len = std::min(block_elements, to - o);
    for (uint64_t lo = 0; lo < len; lo += run_elements) {
      double unit =
          power_of_two(e[(o + lo) / run_elements] - grid_bits + weight_bits_);
      std::fill(f + lo, f + std::min(lo + run_elements, len),
                static_cast<float>(sums_ ? unit : unit / weight));
    }
    const auto* gb = as_floats(type_, g + o * element, len, gs);
    auto* into = in_slot ? r : out + o;
    if (bound[o / block_elements] < (uint64_t{1} << 31)) // the float path
      settle_small(acc + o, gb, into, len,
                   static_cast<float>(sums_ ? weight : 1.0), f, limit);
    else
      settle_sums(acc + o, gb, into, len, sums_ ? weight : 1.0, f, limit);
    if (in_slot)
      std::memcpy(out + o, r, len * sizeof(float));
  }
}

bool window_accumulator::fits_int32(uint64_t n) {
  const auto* bound = bounds(low_);
  const auto* s = sums(low_);
  for (uint64_t o = 0; o < n; o += block_elements) {
    if (bound[o / block_elements] < (uint64_t{1} << 31))
      continue; // every |sum| of the block is below its bound
    for (auto i = o; i < std::min(n, o + block_elements); ++i)
      if (s[i] != static_cast<int32_t>(s[i]))
        return false;
  }
  return true;
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
  bool mean = count > 0 && !rule_.robust();
  bool direct = mean && !opt && type_ == dtype::float32;
  // A relay's sum of the round's weight in int32: its sums as they are.
  bool on_grid = direct && sums_ && grid_out_ &&
                 (low_ == 0 || (!position_weights_.empty() &&
                                weight == position_weights_[0])) &&
                 fits_int32(n);
  if (on_grid)
    in_parts(n, [&](uint64_t from, uint64_t to) {
      const auto* s = sums(low_);
      auto* into = reinterpret_cast<int32_t*>(out);
      for (auto i = from; i < to; ++i)
        into[i] = static_cast<int32_t>(s[i]);
    });
  else if (direct) // FedAvg's means straight into the model, in one pass
    in_parts(n, [&](uint64_t from, uint64_t to) {
      settle_grid(old, reinterpret_cast<float*>(out), from, to, weight, limit);
    });
  else if (mean) // an optimizer's steps clamp after them
    settle_grid(old, acc, 0, n, weight,
                opt ? std::numeric_limits<float>::infinity() : limit);
  else if (count > 0)
    reduce(low_, n, count);
  else
    for (size_t i = 0; i < n; ++i)
      acc[i] = load_element(type_, old, i);
  if (count > 0 && !rule_.robust() && sums_) {
    if (position_weights_.size() < plan_.chunk_count())
      position_weights_.resize(plan_.chunk_count(), 0.0);
    position_weights_[low_] = weight;
  }
  if (grid_out_) {
    if (position_grid_.size() < plan_.chunk_count())
      position_grid_.resize(plan_.chunk_count(), 0);
    position_grid_[low_] = on_grid;
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
  position_grid_.clear();
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
  position_grid_.clear();
  std::fill(counts_.begin(), counts_.end(), 0);
  std::fill(weights_.begin(), weights_.end(), 0.0);
}

} // namespace fedcaf
