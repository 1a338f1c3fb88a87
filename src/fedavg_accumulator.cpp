#include "fedcaf/fedavg_accumulator.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <thread>

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

constexpr int8_t unset_exponent = INT8_MIN;
/// A block's int32 sums take a contribution while |q| stays below
/// int32_room and the bound on |sum| below int32_limit.
constexpr uint64_t int32_limit = uint64_t{1} << 31;

/// acc[i] = (assign ? 0 : acc[i]) + sign * round(v[i]) in int32 (the
/// caller bounds it: no wrap), from `i` on, one element at a time.
void add_units_tail(std::byte* acc, const float* v, size_t i, size_t n,
                    int sign, bool assign) {
  for (; i < n; ++i) {
    auto q = static_cast<uint32_t>(units_of(v[i])); // mod 2^32
    if (sign < 0)
      q = 0u - q;
    uint32_t s = 0;
    if (!assign)
      std::memcpy(&s, acc + i * 4, 4);
    s += q;
    std::memcpy(acc + i * 4, &s, 4);
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
/// As add_units, eight at a time.
[[gnu::target("avx2")]] void add_units_avx2(std::byte* acc, const float* v,
                                            size_t n, int sign, bool assign) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256i q = _mm256_cvtps_epi32(_mm256_loadu_ps(v + i));
    if (sign < 0)
      q = _mm256_sub_epi32(_mm256_setzero_si256(), q);
    auto* at = reinterpret_cast<__m256i*>(acc + i * 4);
    if (!assign)
      q = _mm256_add_epi32(_mm256_loadu_si256(at), q);
    _mm256_storeu_si256(at, q);
  }
  add_units_tail(acc, v, i, n, sign, assign);
}
#endif

#if defined(__x86_64__) && defined(__GNUC__)
/// scaled_deltas, then add_units of its values with `sign` into acc, in
/// one pass without storing the values: the same bits in acc, in the sum
/// of squares it returns and in `most` (the same operations in the same
/// lanes; cvtps2dq rounds as add_units does). An add whose values then
/// prove too large is taken back out exactly by the same call with the
/// opposite sign (int32 adds wrap, and the same values come out).
[[gnu::target("avx2")]] float fold_units_avx2(std::byte* acc,
                                              const std::byte* x,
                                              const std::byte* g, size_t n,
                                              float k, const float* s, int sign,
                                              bool assign, uint32_t& most) {
  __m256 squares = _mm256_setzero_ps();
  __m256i top = _mm256_setzero_si256();
  const __m256 kk = _mm256_set1_ps(k);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    auto units = units8(x + i * 4, g + i * 4, s + i, kk, squares, top);
    auto* at = reinterpret_cast<__m256i*>(acc + i * 4);
    if (assign)
      _mm256_storeu_si256(at, units);
    else if (sign > 0)
      _mm256_storeu_si256(at, _mm256_add_epi32(_mm256_loadu_si256(at), units));
    else
      _mm256_storeu_si256(at, _mm256_sub_epi32(_mm256_loadu_si256(at), units));
  }
  float sum = lanes_sum(squares, top, most);
  for (; i < n; ++i) {
    float v = tail_unit(x + i * 4, g + i * 4, s[i], k, sum, most);
    add_units_tail(acc + i * 4, &v, 0, 1, sign, assign);
  }
  return sum;
}
#endif

/// fold_units_avx2 where the CPU has AVX2; else its two passes (values
/// into `v`, then added): the same bits either way.
float fold_units(std::byte* acc, const std::byte* x, const std::byte* g,
                 size_t n, float k, const float* s, int sign, bool assign,
                 uint32_t& most);

/// acc[i] = (assign ? 0 : acc[i]) + sign * round(v[i]) in int32, wrapping
/// never (the caller bounds it). cvtps2dq rounds to the nearest, ties to
/// even: as nearbyint does in the default rounding mode, which the int64
/// sums use. REQUIRES: |v[i]| < 2^31.
void add_units(std::byte* acc, const float* v, size_t n, int sign,
               bool assign) {
  size_t i = 0;
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2)
    return add_units_avx2(acc, v, n, sign, assign);
#endif
#if defined(__SSE2__)
  for (; i + 4 <= n; i += 4) {
    __m128i q = _mm_cvtps_epi32(_mm_loadu_ps(v + i));
    if (sign < 0)
      q = _mm_sub_epi32(_mm_setzero_si128(), q);
    auto* at = reinterpret_cast<__m128i*>(acc + i * 4);
    if (!assign)
      q = _mm_add_epi32(_mm_loadu_si128(at), q);
    _mm_storeu_si128(at, q);
  }
#endif
  add_units_tail(acc, v, i, n, sign, assign);
}

float fold_units(std::byte* acc, const std::byte* x, const std::byte* g,
                 size_t n, float k, const float* s, int sign, bool assign,
                 uint32_t& most) {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2)
    return fold_units_avx2(acc, x, g, n, k, s, sign, assign, most);
#endif
  alignas(64) float v[block_elements];
  float squares = 0;
  for (size_t at = 0; at < n; at += block_elements) {
    auto len = std::min<size_t>(block_elements, n - at);
    squares += scaled_deltas(x + at * 4, g + at * 4, v, len, k, s + at, most);
    add_units(acc + at * 4, v, len, sign, assign);
  }
  return squares;
}

/// out[i] = base g[i] + f[i] sum[i] in float, clamped to +-limit, sum[i]
/// int32 read from, and the result written over, the same bytes (float:
/// eight lanes; a delta's product rounds to 2^-24 of it, as a float32
/// sum's own additions do).
FEDCAF_KERNEL void settle_units(std::byte* sums, const std::byte* g, size_t n,
                                float base, const float* f, float limit) {
  for (size_t i = 0; i < n; ++i) {
    int32_t s;
    float gi;
    std::memcpy(&s, sums + i * 4, 4);
    std::memcpy(&gi, g + i * 4, 4);
    float r = base * gi + f[i] * static_cast<float>(s);
    r = r < -limit ? -limit : (r > limit ? limit : r);
    std::memcpy(sums + i * 4, &r, 4);
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
  fedavg_accumulator acc{m.total_bytes(), *type, std::move(plan)};
  const auto& p = acc.plan_;
  auto element = dtype_bytes(*type);
  uint64_t blocks = 0;
  for (uint64_t seq = 0; seq < p.chunk_count(); ++seq) {
    acc.first_block_.push_back(blocks);
    auto n = p.extent(seq).bytes / element;
    blocks += (n + block_elements - 1) / block_elements;
    acc.uncounted_.push_back(uncounted_ranges(m, p, seq));
  }
  acc.exponent_.assign(blocks * runs_per_block, unset_exponent);
  acc.bound_.assign(blocks, 0);
  acc.wide_index_.assign(blocks, 0);
  return acc;
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

void fedavg_accumulator::forget_round() {
  std::fill(exponent_.begin(), exponent_.end(), unset_exponent);
  std::fill(wide_index_.begin(), wide_index_.end(), 0u);
  wide_.clear();
  wide_bound_.clear();
  float_sum_.clear();
}

int fedavg_accumulator::grid_exponent(uint64_t r, uint64_t first, uint64_t n,
                                      const std::byte* global) {
  if (exponent_[r] != unset_exponent)
    return exponent_[r];
  int e = run_exponent(type_, global + first * dtype_bytes(type_), n);
  exponent_[r] = static_cast<int8_t>(e);
  return exponent_[r];
}

std::optional<double> fedavg_accumulator::apply(
    uint64_t seq, const std::byte* x, double weight, bool summed,
    const std::byte* global, int add, bool assign, uint64_t upto,
    std::optional<double> max_abs, uint64_t from, fold_part* part) {
  const auto& e = plan_.extent(seq);
  auto element = dtype_bytes(type_);
  auto first = e.model_offset / element;
  auto n = std::min(e.bytes / element, upto);
  auto* sums = sum_.data() + first * 4;
  const auto& skip = uncounted_[seq];
  auto k = summed ? static_cast<float>(weight) : 1.0f;
  auto w_scale =
      std::ldexp(summed ? 1.0f : static_cast<float>(weight), -weight_bits_);
  double distance = 0, segment = 0;
  auto flush = [&](uint64_t end) { // the segment ending at `end`
    distance += segment;
    if (part)
      part->squares[(end - 1) / segment_elements] = segment;
    segment = 0;
  };
  // What this call added before element o, taken back out (a first fold
  // at its position was written: nothing to take).
  auto take_back = [&](uint64_t o) {
    if (!assign && o > from)
      apply(seq, x, weight, summed, global, -1, false, o, std::nullopt, from);
  };
  // A part stops where a block leaves the plain path: the chunk is then
  // folded again on one thread, which takes every path.
  auto leave = [&](uint64_t o) -> std::optional<double> {
    take_back(o);
    if (part)
      part->off_path = true;
    return std::nullopt;
  };
  alignas(64) float v[block_elements];
  alignas(64) float xs[block_elements];
  alignas(64) float gs[block_elements];
  alignas(64) float s[block_elements]; // each element's scale
  for (uint64_t o = from, b = first_block_[seq] + from / block_elements; o < n;
       o += block_elements, ++b) {
    if (o > from && o % segment_elements == 0)
      flush(o);
    auto len = std::min(block_elements, n - o);
    // The bounds of check_finite, tested of the block about to be folded:
    // it is then in the caches for the fold.
    if (max_abs &&
        any_out_of_bounds(type_, {x + o * element, len * element}, *max_abs))
      return leave(o);
    for (uint64_t lo = 0; lo < len; lo += run_elements) {
      auto hi = std::min(lo + run_elements, len);
      auto scale = power_of_two(
          grid_bits - grid_exponent(b * runs_per_block + lo / run_elements,
                                    first + o + lo, hi - lo, global));
      std::fill(s + lo, s + hi, w_scale * scale);
    }
    auto* xb = as_floats(type_, x + o * element, len, xs);
    auto* gb = as_floats(type_, global + (first + o) * element, len, gs);
    auto* block = sums + o * 4;
    // An int32 block takes the values as they are made (fold_units);
    // otherwise they are made first (scaled_deltas), then added.
    bool fused = fused_ && add > 0 && wide_index_[b] == 0;
    if (part && !fused)
      return leave(o);
    // The block's runs split where tensors outside the distance lie (a
    // model-sized sum and open positions alike: the same squares).
    auto runs = [&](auto&& each) { split_runs(skip, element, o, len, each); };
    uint32_t most = 0;
    runs([&](uint64_t at, uint64_t end, bool counted) {
      auto sq = fused ? fold_units(block + at * 4, xb + at * 4, gb + at * 4,
                                   end - at, k, s + at, +1, assign, most)
                      : scaled_deltas(xb + at * 4, gb + at * 4, v + at,
                                      end - at, k, s + at, most);
      if (counted)
        segment += sq;
    });
    float top;
    std::memcpy(&top, &most, 4);
    // (a NaN's bits lie above infinity's: most_units, never cast)
    auto grows = static_cast<uint64_t>(top < most_units ? top : most_units) + 1;
    // A delta beyond the exact range (2^46 grid steps: 2^19 times its run's
    // magnitude, where the update bound refuses far less) is refused, and
    // what this call added before it taken back out: nothing changed.
    auto beyond = [&] { return leave(o); };
    uint64_t before = assign ? 0 : bound_[b];
    bool fits = top < int32_room && before + grows < int32_limit;
    if (part && !(fits && top < most_units)) { // this block out, then stop
      if (!assign)
        runs([&](uint64_t at, uint64_t end, bool) {
          uint32_t again = 0;
          fold_units(block + at * 4, xb + at * 4, gb + at * 4, end - at, k,
                     s + at, -1, false, again);
        });
      return leave(o);
    }
    if (fused && !(fits && top < most_units)) { // rare: taken back out
      // over the same runs, so that each value is subtracted as it was
      // added (a vector lane and a run's tail round values past int32
      // differently)
      uint32_t again = 0;
      if (!assign)
        runs([&](uint64_t at, uint64_t end, bool) {
          fold_units(block + at * 4, xb + at * 4, gb + at * 4, end - at, k,
                     s + at, -1, false, again);
        });
      if (top < most_units) // the values, for the wide sums below
        scaled_deltas(xb, gb, v, len, k, s, again);
    }
    if (add > 0 && !(top < most_units))
      return beyond();
    if (wide_index_[b] == 0) {
      if (add < 0 || fits) {
        if (!fused)
          add_units(block, v, len, add, assign);
        if (add > 0)
          bound_[b] = static_cast<uint32_t>(before + grows);
        continue;
      }
      // Its sums could outgrow int32: they move to int64 of their own.
      wide_.push_back(std::make_unique<int64_t[]>(len));
      wide_bound_.push_back(assign ? 0 : bound_[b]);
      wide_index_[b] = static_cast<uint32_t>(wide_.size());
      if (!assign)
        for (uint64_t i = 0; i < len; ++i) {
          int32_t s32;
          std::memcpy(&s32, block + i * 4, 4);
          wide_.back()[i] = s32;
        }
    }
    auto w = wide_index_[b] - 1;
    if (add > 0) {
      auto before = assign ? 0 : wide_bound_[w];
      if (before + grows >= wide_limit)
        return beyond();
      wide_bound_[w] = before + grows;
    }
    auto* wide = wide_[w].get();
    for (uint64_t i = 0; i < len; ++i)
      wide[i] = (assign ? 0 : wide[i]) + add * units_of(v[i]);
  }
  if (n > from)
    flush(n);
  return distance;
}

work_pool* fedavg_accumulator::pool() {
  if (!pool_)
    pool_ = std::make_unique<work_pool>(std::max(threads_, fold_threads_));
  return pool_.get();
}

std::optional<double> fedavg_accumulator::apply_in_parts(
    uint64_t seq, const std::byte* x, double weight, bool summed,
    const std::byte* global, bool assign, std::optional<double> max_abs) {
  auto n = plan_.extent(seq).bytes / dtype_bytes(type_);
  auto segments = (n + segment_elements - 1) / segment_elements;
  auto parts = static_cast<unsigned>(
      fused_ ? std::min<uint64_t>(fold_threads_, segments / 2) : 1);
  // A chunk with a block already in int64 would leave the plain path in
  // its part, then be folded again: it goes to one thread at once (an
  // update that sent a block wide costs the parts once, not every chunk
  // folded there after it).
  auto blocks = (n + block_elements - 1) / block_elements;
  auto wide = wide_index_.begin() + static_cast<ptrdiff_t>(first_block_[seq]);
  if (parts > 1 && std::any_of(wide, wide + static_cast<ptrdiff_t>(blocks),
                               [](uint32_t w) { return w != 0; }))
    parts = 1;
  if (parts <= 1)
    return apply(seq, x, weight, summed, global, +1, assign, UINT64_MAX,
                 max_abs);
  // Part p: segments [segments p / parts, segments (p + 1) / parts).
  auto edge = [&](unsigned p) {
    return std::min(n, segments * p / parts * segment_elements);
  };
  std::vector<double> squares(segments);
  std::vector<fold_part> part(parts);
  pool()->run(parts, [&](unsigned p) {
    part[p].squares = squares.data();
    apply(seq, x, weight, summed, global, +1, assign, edge(p + 1), max_abs,
          edge(p), &part[p]);
  });
  bool plain = std::none_of(part.begin(), part.end(),
                            [](const fold_part& f) { return f.off_path; });
  if (plain) {
    double distance = 0; // in segment order: the bits of one thread
    for (double s : squares)
      distance += s;
    return distance;
  }
  // Rare (a block to int64, a value too large or out of bounds): the parts
  // that went through are taken back out (a part that stopped took its own
  // back), their blocks' bounds put back, and the chunk is folded on this
  // thread, which takes every path.
  for (unsigned p = 0; p < parts; ++p)
    if (!part[p].off_path && !assign)
      apply(seq, x, weight, summed, global, -1, false, edge(p + 1),
            std::nullopt, edge(p));
  restore_bounds(seq);
  return apply(seq, x, weight, summed, global, +1, assign, UINT64_MAX, max_abs);
}

result<void> fedavg_accumulator::begin_fold(uint64_t seq, uint64_t bytes,
                                            double weight,
                                            std::span<const std::byte> global) {
  FEDCAF_REQUIRE(seq < plan_.chunk_count(), errc::out_of_range, seq,
                 plan_.chunk_count());
  const auto& e = plan_.extent(seq);
  FEDCAF_REQUIRE(bytes == e.bytes, errc::out_of_range, bytes, e.bytes);
  FEDCAF_REQUIRE(global.size() == total_bytes_, errc::internal, global.size(),
                 total_bytes_);
  FEDCAF_REQUIRE(weight > 0, errc::internal, weight);
  if (sum_.size() == 0)
    sum_ = byte_buffer::uninitialized(sum_bytes());
  if (weights_.empty())
    weights_.assign(plan_.chunk_count(), 0.0);
  undo_weight_ = weights_[seq];
  save_bounds(seq);
  return {};
}

result<double> fedavg_accumulator::fold_measured(
    uint64_t seq, std::span<const std::byte> x, double weight, bool summed,
    std::span<const std::byte> global, std::optional<double> max_abs) {
  if (auto ok = begin_fold(seq, x.size(), weight, global); !ok)
    return ok.err();
  auto d = apply_in_parts(seq, x.data(), weight, summed, global.data(),
                          !(weights_[seq] > 0), max_abs);
  if (!d)
    restore_bounds(seq);
  if (!d && max_abs && any_out_of_bounds(type_, x, *max_abs))
    return error{errc::poisoned_update,
                 "chunk " + std::to_string(seq) +
                     " holds NaN, infinite values or values beyond +-" +
                     std::to_string(*max_abs)};
  if (!d)
    return error{errc::poisoned_update,
                 "chunk " + std::to_string(seq) +
                     " holds a value beyond 2^19 times the magnitude of the "
                     "global model around it (the exact sum's range)"};
  weights_[seq] += weight;
  return *d;
}

void fedavg_accumulator::unfold(uint64_t seq, std::span<const std::byte> x,
                                double weight, bool summed,
                                std::span<const std::byte> global) {
  if (undo_weight_ > 0) // the first fold there was written: nothing to take
    apply(seq, x.data(), weight, summed, global.data(), -1, false);
  weights_[seq] = undo_weight_;
  restore_bounds(seq);
}

std::optional<double>
fedavg_accumulator::apply_grid(uint64_t seq, const std::byte* x, double weight,
                               const std::byte* global, int add, bool assign) {
  const auto& e = plan_.extent(seq);
  auto first = e.model_offset / 4; // float32 models only
  auto n = e.bytes / 4;
  auto* sums = sum_.data() + first * 4;
  auto load = [x](uint64_t i) {
    int32_t s;
    std::memcpy(&s, x + i * 4, 4);
    return s;
  };
  // Each block's largest |S| first: a sum beyond the exact range of
  // `weight` updates, or past what the block's int64 sums hold, is refused
  // before anything changed.
  auto blocks = (n + block_elements - 1) / block_elements;
  std::vector<uint64_t> most(blocks, 0);
  for (uint64_t k = 0; k < blocks; ++k) {
    auto o = k * block_elements, b = first_block_[seq] + k;
    for (uint64_t i = o; i < std::min(n, o + block_elements); ++i)
      most[k] = std::max<uint64_t>(
          most[k],
          static_cast<uint64_t>(std::abs(static_cast<int64_t>(load(i)))));
    if (add < 0)
      continue;
    uint64_t before = assign                ? 0
                      : wide_index_[b] == 0 ? bound_[b]
                                            : wide_bound_[wide_index_[b] - 1];
    if (static_cast<double>(most[k]) >=
            static_cast<double>(most_units) * weight ||
        before + most[k] >= wide_limit)
      return std::nullopt;
  }
  // The elements the distance counts: [0, n) less the ranges outside it
  // (in order), as element ranges, walked along with the runs.
  std::vector<std::pair<uint64_t, uint64_t>> counted;
  uint64_t next = 0;
  for (const auto& [from, to] : uncounted_[seq]) {
    if (from / 4 > next)
      counted.emplace_back(next, from / 4);
    next = std::max(next, to / 4);
  }
  if (next < n)
    counted.emplace_back(next, n);
  size_t at = 0; // the first counted range that may meet the next run
  double distance = 0, segment = 0;
  for (uint64_t k = 0; k < blocks; ++k) {
    auto o = k * block_elements, b = first_block_[seq] + k;
    auto len = std::min(block_elements, n - o);
    if (o > 0 && o % segment_elements == 0) {
      distance += segment;
      segment = 0;
    }
    // The distance of the sum from weight g: (u S)^2, u each run's step.
    for (uint64_t lo = 0; add > 0 && lo < len; lo += run_elements) {
      auto hi = std::min(lo + run_elements, len);
      double unit =
          power_of_two(grid_exponent(b * runs_per_block + lo / run_elements,
                                     first + o + lo, hi - lo, global) -
                       grid_bits + weight_bits_);
      while (at < counted.size() && counted[at].second <= o + lo)
        ++at;
      for (auto r = at; r < counted.size() && counted[r].first < o + hi; ++r)
        for (auto i = std::max(counted[r].first, o + lo);
             i < std::min(counted[r].second, o + hi); ++i) {
          double d = unit * load(i);
          segment += d * d;
        }
    }
    auto* block = sums + o * 4;
    uint64_t before = assign ? 0 : bound_[b];
    if (wide_index_[b] == 0) {
      if (add < 0 || before + most[k] < int32_limit) {
        for (uint64_t i = 0; i < len; ++i) {
          int32_t s = 0;
          if (!assign)
            std::memcpy(&s, block + i * 4, 4);
          s = static_cast<int32_t>(s + int64_t{add} * load(o + i));
          std::memcpy(block + i * 4, &s, 4);
        }
        if (add > 0)
          bound_[b] = static_cast<uint32_t>(before + most[k]);
        continue;
      }
      // Its sums could outgrow int32: they move to int64 of their own.
      wide_.push_back(std::make_unique<int64_t[]>(len));
      wide_bound_.push_back(before);
      wide_index_[b] = static_cast<uint32_t>(wide_.size());
      for (uint64_t i = 0; !assign && i < len; ++i) {
        int32_t s32;
        std::memcpy(&s32, block + i * 4, 4);
        wide_.back()[i] = s32;
      }
    }
    auto w = wide_index_[b] - 1;
    if (add > 0)
      wide_bound_[w] = (assign ? 0 : wide_bound_[w]) + most[k];
    auto* wide = wide_[w].get();
    for (uint64_t i = 0; i < len; ++i)
      wide[i] = (assign ? 0 : wide[i]) + int64_t{add} * load(o + i);
  }
  if (n > 0)
    distance += segment;
  return distance;
}

result<double>
fedavg_accumulator::fold_grid(uint64_t seq, std::span<const std::byte> x,
                              double weight,
                              std::span<const std::byte> global) {
  FEDCAF_REQUIRE(type_ == dtype::float32, errc::out_of_range,
                 dtype_name(type_));
  if (auto ok = begin_fold(seq, x.size(), weight, global); !ok)
    return ok.err();
  auto d = apply_grid(seq, x.data(), weight, global.data(), +1,
                      !(weights_[seq] > 0));
  if (!d) {
    restore_bounds(seq);
    return error{errc::poisoned_update,
                 "chunk " + std::to_string(seq) +
                     " holds a sum beyond 2^46 grid steps per update of its "
                     "weight (the exact sum's range)"};
  }
  weights_[seq] += weight;
  return *d;
}

void fedavg_accumulator::unfold_grid(uint64_t seq,
                                     std::span<const std::byte> x) {
  if (undo_weight_ > 0) // the first fold there was written: nothing to take
    apply_grid(seq, x.data(), 1, nullptr, -1, false);
  weights_[seq] = undo_weight_;
  restore_bounds(seq);
}

bool fedavg_accumulator::grid_output() const {
  if (!sums_ || !(grid_weight_ > 0) || type_ != dtype::float32)
    return false;
  for (uint64_t seq = 0; seq < plan_.chunk_count(); ++seq)
    if (weights_[seq] != grid_weight_ ||
        (!float_sum_.empty() && float_sum_[seq]))
      return false;
  for (uint64_t seq = 0; seq < plan_.chunk_count(); ++seq) {
    auto n = plan_.extent(seq).bytes / 4;
    for (uint64_t o = 0, b = first_block_[seq]; o < n; o += block_elements, ++b)
      for (uint64_t i = 0;
           wide_index_[b] != 0 && i < std::min(block_elements, n - o); ++i) {
        auto s = wide_[wide_index_[b] - 1][i];
        if (s != static_cast<int32_t>(s))
          return false;
      }
  }
  return true;
}

void fedavg_accumulator::narrow_chunk(uint64_t seq) {
  auto n = plan_.extent(seq).bytes / 4;
  auto* sums = sum_.data() + plan_.extent(seq).model_offset;
  for (uint64_t o = 0, b = first_block_[seq]; o < n; o += block_elements, ++b)
    for (uint64_t i = 0;
         wide_index_[b] != 0 && i < std::min(block_elements, n - o); ++i) {
      auto s = static_cast<int32_t>(wide_[wide_index_[b] - 1][i]);
      std::memcpy(sums + (o + i) * 4, &s, 4);
    }
}

void fedavg_accumulator::save_bounds(uint64_t seq) {
  auto first = bound_.begin() + static_cast<ptrdiff_t>(first_block_[seq]);
  auto last =
      seq + 1 < first_block_.size()
          ? bound_.begin() + static_cast<ptrdiff_t>(first_block_[seq + 1])
          : bound_.end();
  undo_bounds_.assign(first, last);
}

void fedavg_accumulator::restore_bounds(uint64_t seq) {
  std::copy(undo_bounds_.begin(), undo_bounds_.end(),
            bound_.begin() + static_cast<ptrdiff_t>(first_block_[seq]));
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
  on_grid_ = false;
  weights_.clear();
  ring_started_.clear();
  forget_round();
  return std::move(sum_);
}

void fedavg_accumulator::mark_folded(uint64_t seq, double weight) {
  if (weights_.empty())
    weights_.assign(plan_.chunk_count(), 0.0);
  if (float_sum_.empty())
    float_sum_.assign(plan_.chunk_count(), false);
  weights_[seq] = weight;
  float_sum_[seq] = true;
}

void fedavg_accumulator::settle_chunk(uint64_t seq, const std::byte* global,
                                      float limit) {
  const auto& e = plan_.extent(seq);
  auto element = dtype_bytes(type_);
  auto first = e.model_offset / element;
  auto n = e.bytes / element;
  auto w = weights_[seq];
  auto* sums = sum_.data() + first * 4;
  alignas(64) float gs[block_elements];
  for (uint64_t o = 0, b = first_block_[seq]; o < n; o += block_elements, ++b) {
    auto len = std::min(block_elements, n - o);
    // A relay's partial sum, W g + u S; else the mean, g + u S / W.
    auto base = sums_ ? w : 1.0;
    alignas(64) float f[block_elements]; // each element's factor
    for (uint64_t lo = 0; lo < len; lo += run_elements) {
      double unit = power_of_two(
          grid_exponent(b * runs_per_block + lo / run_elements, first + o + lo,
                        std::min(run_elements, len - lo), global) -
          grid_bits + weight_bits_);
      std::fill(f + lo, f + std::min(lo + run_elements, len),
                static_cast<float>(sums_ ? unit : unit / w));
    }
    // g read where it lies (float32), or widened into gs (16-bit).
    const auto* gb = as_floats(type_, global + (first + o) * element, len, gs);
    if (wide_index_[b] == 0) {
      settle_units(sums + o * 4, gb, len, static_cast<float>(base), f, limit);
      continue;
    }
    // A sum that fits in int32 settles as settle_units settles it: whether
    // its block went wide (a fold taken back out may have sent it there)
    // changes no bit of the model. Only a sum past int32 needs the width.
    auto w8 = wide_index_[b] - 1;
    const auto* wide = wide_[w8].get();
    for (uint64_t i = 0; i < len; ++i) {
      float gi;
      std::memcpy(&gi, gb + i * 4, 4);
      auto s = wide[i];
      auto r =
          s == static_cast<int32_t>(s)
              ? static_cast<float>(base) * gi +
                    f[i] * static_cast<float>(static_cast<int32_t>(s))
              : static_cast<float>(base * gi + f[i] * static_cast<double>(s));
      r = r < -limit ? -limit : (r > limit ? limit : r);
      std::memcpy(sums + (o + i) * 4, &r, 4);
    }
  }
}

result<byte_buffer>
fedavg_accumulator::finalize(std::span<const std::byte> global,
                             server_optimizer* opt) {
  const auto& observer = observer_;
  FEDCAF_REQUIRE(!weights_.empty(), errc::internal, "no update was folded");
  FEDCAF_REQUIRE(global.size() == total_bytes_, errc::internal, global.size(),
                 total_bytes_);
  auto element = dtype_bytes(type_);
  auto* acc = reinterpret_cast<float*>(sum_.data());
  byte_buffer out;
  if (type_ != dtype::float32)
    out = spare_.size() ? std::move(spare_)
                        : byte_buffer::uninitialized(total_bytes_);
  // A sum of clamped updates is clamped at the root, after its division.
  auto limit =
      sums_ ? finite_limit(type_) : std::min(limit_, finite_limit(type_));
  auto chunks = plan_.chunk_count();
  // A relay's int32 sums on the grid are the result as they are.
  on_grid_ = !opt && grid_output();
  grid_weight_ = 0;
  measured_.assign(observer && !on_grid_ ? chunks : 0, 0.0);
  // Each chunk on its own, the same bits on any thread: FedAvg's chunks
  // (no optimizer, whose steps keep state of their own) go to up to
  // threads_ threads, each a contiguous range of chunks.
  auto parts = opt ? 1u
                   : static_cast<unsigned>(
                         std::min<uint64_t>(threads_, (chunks + 3) / 4));
  auto settle_range = [&](uint64_t from, uint64_t to) {
    for (uint64_t seq = from; seq < to; ++seq) {
      if (on_grid_) {
        narrow_chunk(seq);
        continue;
      }
      const auto& e = plan_.extent(seq);
      auto first = e.model_offset / element;
      auto n = e.bytes / element;
      const auto* old = global.data() + e.model_offset;
      bool secure_sum = !float_sum_.empty() && float_sum_[seq];
      bool clamped = false;
      if (weights_[seq] > 0 && secure_sum && sums_) {
        // a relay's partial sum: left as it is
      } else if (weights_[seq] > 0 && secure_sum) {
        auto inv = static_cast<float>(1.0 / weights_[seq]);
        for (size_t i = first; i < first + n; ++i)
          acc[i] *= inv;
      } else if (weights_[seq] > 0) {
        // FedAvg's means are clamped as they are made; an optimizer's steps
        // after them.
        settle_chunk(seq, global.data(),
                     opt ? std::numeric_limits<float>::infinity() : limit);
        clamped = !opt;
      } else {
        for (size_t i = 0; i < n; ++i)
          acc[first + i] = load_element(type_, old, i);
      }
      if (opt)
        opt->step(first, {acc + first, n}, {old, e.bytes}, weights_[seq]);
      if (!clamped)
        saturate(acc + first, n, limit);
      if (type_ != dtype::float32)
        for (size_t i = first; i < first + n; ++i)
          store_element(type_, out.data(), i, acc[i]);
      if (observer)
        measured_[seq] = observer(
            seq, type_ == dtype::float32
                     ? std::span<const std::byte>{sum_.data(), total_bytes_}
                     : std::span<const std::byte>{out.data(), total_bytes_});
    }
  };
  if (parts <= 1)
    settle_range(0, chunks);
  else
    pool()->run(parts, [&](unsigned p) {
      settle_range(chunks * p / parts, chunks * (p + 1) / parts);
    });
  if (opt)
    opt->finish_round();
  if (sums_)
    position_weights_ = weights_;
  weights_.clear();
  ring_started_.clear();
  forget_round();
  if (type_ == dtype::float32)
    return std::move(sum_);
  return out;
}

} // namespace fedcaf
