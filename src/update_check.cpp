#include "fedcaf/update_check.hpp"

#include <fnmatch.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>
#include <type_traits>

#include "fedcaf/element.hpp"
#include "fedcaf/kernel.hpp"

namespace fedcaf {

namespace {

/// Calls f(tensor_index, chunk_offset, bytes) for each tensor's piece of
/// chunk `seq`, in order.
template <class F>
void for_each_piece(const manifest& m, const chunk_plan& plan, uint64_t seq,
                    F&& f) {
  const auto& e = plan.extent(seq);
  auto tensor = e.tensor_index;
  auto offset = e.tensor_offset;
  uint64_t done = 0;
  while (done < e.bytes && tensor < m.tensors.size()) {
    auto n = std::min(e.bytes - done, m.tensors[tensor].byte_size - offset);
    f(tensor, done, n);
    done += n;
    ++tensor;
    offset = 0;
  }
}

/// True iff any element of `n` elements of width W at p has a magnitude
/// (its bits without the sign) above `limit`: NaN and infinity lie above
/// every finite limit. A magnitude m <= `magnitude` plus (`magnitude` -
/// limit) reaches the sign bit iff m > limit and never carries out of its
/// element, so one add and one or per element find it: a branch-free pass
/// the compiler vectorizes (it runs at the speed of the caches, below the
/// checksum's cost).
template <class Bits>
[[gnu::always_inline]] inline bool any_above_in(const std::byte* p, size_t n,
                                                Bits magnitude, Bits limit) {
  Bits lift = magnitude - std::min(limit, magnitude);
  Bits hit = 0;
  for (size_t i = 0; i < n; ++i) {
    Bits x;
    std::memcpy(&x, p + i * sizeof(Bits), sizeof(Bits));
    hit |= static_cast<Bits>((x & magnitude) + lift);
  }
  return (hit & static_cast<Bits>(~magnitude)) != 0;
}

#if defined(__x86_64__) && defined(__GNUC__)
/// As any_above_in, in AVX2's 32-byte vectors (chosen at run time).
template <class Bits>
[[gnu::target("avx2")]] bool any_above_avx2(const std::byte* p, size_t n,
                                            Bits magnitude, Bits limit) {
  return any_above_in(p, n, magnitude, limit);
}
#endif

template <class Bits>
bool any_above(const std::byte* p, size_t n, Bits magnitude, Bits limit) {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2)
    return any_above_avx2(p, n, magnitude, limit);
#endif
  return any_above_in(p, n, magnitude, limit);
}

template <class Bits, class Value> Bits bits_of(Value v) {
  Bits b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

/// True iff an element is NaN, infinite, or of a magnitude above max_abs.
bool out_of_bounds(dtype t, const std::byte* p, uint64_t bytes,
                   double max_abs) {
  switch (t) {
  case dtype::float32: {
    auto limit = static_cast<float>(
        std::min<double>(max_abs, std::numeric_limits<float>::max()));
    return any_above<uint32_t>(p, bytes / 4, 0x7fffffffu,
                               bits_of<uint32_t>(limit));
  }
  case dtype::float16: {
    uint16_t limit = max_abs >= 65504.0
                         ? uint16_t{0x7bff} // the largest finite half
                         : float_to_f16(static_cast<float>(max_abs));
    return any_above<uint16_t>(p, bytes / 2, 0x7fffu, limit);
  }
  case dtype::bfloat16: {
    auto limit = static_cast<float>(
        std::min<double>(max_abs, std::numeric_limits<float>::max()));
    // Truncated: the largest bfloat16 at most the limit.
    auto bits = static_cast<uint16_t>(bits_of<uint32_t>(limit) >> 16);
    return any_above<uint16_t>(p, bytes / 2, 0x7fffu, bits);
  }
  case dtype::float64:
    return any_above<uint64_t>(
        p, bytes / 8, 0x7fffffffffffffffull,
        bits_of<uint64_t>(
            std::min(max_abs, std::numeric_limits<double>::max())));
  default:
    return false; // integers are always finite
  }
}

/// The largest magnitude out_of_bounds allows a float32 or bfloat16 element
/// under `max_abs`, as float32 bits (bfloat16: its upper half, any lower).
uint32_t limit_bits32(dtype t, double max_abs) {
  auto limit = bits_of<uint32_t>(static_cast<float>(
      std::min<double>(max_abs, std::numeric_limits<float>::max())));
  if (t == dtype::bfloat16) // truncated, as out_of_bounds does
    return (limit & 0xffff0000u) | 0xffffu;
  return limit;
}

using v4f = float __attribute__((vector_size(16)));
using v4d = double __attribute__((vector_size(32)));
using v4u16 = uint16_t __attribute__((vector_size(8)));
using v4u32 = uint32_t __attribute__((vector_size(16)));

/// Four elements at p + 4 i as float: float32 as they are, bfloat16 widened
/// (its bits are a float's upper half).
template <class Bits>
[[gnu::always_inline]] inline v4f four(const std::byte* p, uint64_t i) {
  if constexpr (sizeof(Bits) == 4) {
    v4f x;
    std::memcpy(&x, p + i * 16, sizeof x);
    return x;
  } else {
    v4u16 h;
    std::memcpy(&h, p + i * 8, sizeof h);
    auto w = __builtin_convertvector(h, v4u32) << 16;
    v4f x;
    std::memcpy(&x, &w, sizeof x);
    return x;
  }
}

/// The sum of (u_i - k g_i)^2 (g null: of u_i^2) over n float32 or
/// bfloat16 elements, in float64: four vectors of four sums side by side,
/// added at the end, so the loop runs at the memory's speed (the scalar
/// loop with eight sums ran at half of it: the compiler kept the sums on
/// the stack; tests/perf/fold_bench). The tail goes through `scalar`.
/// `above` (not null: the elements' bits as float32, bfloat16's upper half,
/// and the largest magnitude allowed as such bits) is set iff an element of
/// u lies above it (any_above_in's test), in the same pass: the same sum.
struct bounds32 {
  uint32_t limit; ///< the largest magnitude allowed, as float32 bits
  bool above = false;
};
template <class Bits, class Scalar>
[[gnu::always_inline]] inline double
squares_vector(const std::byte* u, const std::byte* g, uint64_t n, double k,
               Scalar scalar, bounds32* above = nullptr) {
  v4d s0 = {}, s1 = {}, s2 = {}, s3 = {};
  v4d kk = {k, k, k, k};
  constexpr uint32_t magnitude = 0x7fffffffu;
  auto lift = magnitude - std::min(above ? above->limit : 0u, magnitude);
  v4u32 hit = {};
  uint64_t i = 0;
  auto pass = [&](auto with_g, auto checked) {
    auto add = [&](v4d & sum, uint64_t at) __attribute__((always_inline)) {
      auto x = four<Bits>(u, at);
      if constexpr (decltype(checked)::value) {
        v4u32 b;
        std::memcpy(&b, &x, sizeof b);
        hit |= (b & magnitude) + lift;
      }
      auto d = __builtin_convertvector(x, v4d);
      if constexpr (decltype(with_g)::value)
        d -= kk * __builtin_convertvector(four<Bits>(g, at), v4d);
      sum += d * d;
    };
    for (; i + 16 <= n; i += 16) {
      auto q = i / 4;
      add(s0, q);
      add(s1, q + 1);
      add(s2, q + 2);
      add(s3, q + 3);
    }
  };
  if (g && above)
    pass(std::true_type{}, std::true_type{});
  else if (g)
    pass(std::true_type{}, std::false_type{});
  else if (above)
    pass(std::false_type{}, std::true_type{});
  else
    pass(std::false_type{}, std::false_type{});
  v4d s = (s0 + s1) + (s2 + s3);
  double sum = (s[0] + s[1]) + (s[2] + s[3]);
  if (above) {
    auto lanes = hit[0] | hit[1] | hit[2] | hit[3];
    for (uint64_t j = i; j < n; ++j) { // the tail, tested as the vectors
      Bits b;
      std::memcpy(&b, u + j * sizeof(Bits), sizeof b);
      auto bits = static_cast<uint32_t>(b) << (32 - 8 * sizeof(Bits));
      lanes |= (bits & magnitude) + lift;
    }
    above->above |= (lanes & ~magnitude) != 0;
  }
  for (; i < n; ++i) {
    double d = scalar(u, i) - (g ? k * scalar(g, i) : 0.0);
    sum += d * d;
  }
  return sum;
}

/// The sum of (load(u, i) - k load(g, i))^2 over n elements (g null: of
/// load(u, i)^2): one pass, the loader inlined (no call per element).
template <class Load>
[[gnu::always_inline]] inline double
squares_loaded(const std::byte* u, const std::byte* g, uint64_t n, Load load,
               double k) {
  constexpr uint64_t lanes = 8;
  double sums[lanes] = {};
  uint64_t i = 0;
  for (; i + lanes <= n; i += lanes)
    for (uint64_t j = 0; j < lanes; ++j) {
      double d = load(u, i + j) - (g ? k * load(g, i + j) : 0.0);
      sums[j] += d * d;
    }
  for (; i < n; ++i) {
    double d = load(u, i) - (g ? k * load(g, i) : 0.0);
    sums[0] += d * d;
  }
  double sum = 0;
  for (double s : sums)
    sum += s;
  return sum;
}

/// As squares_loaded, the elements stored as Bits and made a value by
/// `convert`.
template <class Bits, class Convert>
[[gnu::always_inline]] inline double
sum_of_squares(const std::byte* u, const std::byte* g, uint64_t n,
               Convert convert, double k, bounds32* above = nullptr) {
  auto load = [convert](const std::byte* p, uint64_t i) {
    Bits x;
    std::memcpy(&x, p + i * sizeof(Bits), sizeof(Bits));
    return static_cast<double>(convert(x));
  };
  if constexpr (std::is_same_v<Bits, float>)
    return squares_vector<uint32_t>(u, g, n, k, load, above);
  return squares_loaded(u, g, n, load, k);
}

/// The sum of (u - k g)^2 over the elements of type t in `bytes`. With
/// `above` (float32 and bfloat16 only): also whether an element of u lies
/// above its limit, in the same pass.
FEDCAF_KERNEL double distance_of(dtype t, const std::byte* u,
                                 const std::byte* g, uint64_t bytes,
                                 double k = 1, bounds32* above = nullptr) {
  switch (t) {
  case dtype::float64:
    return sum_of_squares<double>(
        u, g, bytes / 8, [](double x) { return x; }, k);
  case dtype::float32:
    return sum_of_squares<float>(
        u, g, bytes / 4, [](float x) { return x; }, k, above);
  case dtype::bfloat16:
    return squares_vector<uint16_t>(
        u, g, bytes / 2, k,
        [](const std::byte* p, uint64_t i) {
          uint16_t x;
          std::memcpy(&x, p + i * 2, 2);
          return static_cast<double>(bf16_to_float(x));
        },
        above);
  case dtype::float16:
    return sum_of_squares<uint16_t>(
        u, g, bytes / 2, [](uint16_t x) { return f16_to_float(x); }, k);
  default:
    return 0; // integers are not part of the update's norm
  }
}

/// The error of check_finite for a value out of bounds in tensor `tensor`.
error out_of_bounds_error(const manifest& m, uint64_t seq, uint32_t tensor,
                          double max_abs) {
  const auto& t = m.tensors[tensor];
  auto limit = std::min<double>(max_abs, finite_limit(t.type));
  char bound[32];
  std::snprintf(bound, sizeof bound, "%.4g", limit);
  auto what = std::isinf(max_abs)
                  ? std::string{"NaN or infinite values"}
                  : std::string{"NaN, infinite values or values beyond +-"} +
                        bound +
                        " (the sum of the round's updates would overflow)";
  return error{errc::poisoned_update, "chunk " + std::to_string(seq) +
                                          " holds " + what + " (tensor '" +
                                          t.name + "')"};
}

} // namespace

bool any_out_of_bounds(dtype t, std::span<const std::byte> bytes,
                       double max_abs) {
  return out_of_bounds(t, bytes.data(), bytes.size(), max_abs);
}

bool outside_distance(const tensor_info& t) {
  return t.held || t.name.ends_with(".running_mean") ||
         t.name.ends_with(".running_var");
}

std::vector<std::pair<uint64_t, uint64_t>>
uncounted_ranges(const manifest& m, const chunk_plan& plan, uint64_t seq) {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  for_each_piece(m, plan, seq, [&](uint32_t tensor, uint64_t at, uint64_t n) {
    if (outside_distance(m.tensors[tensor]))
      out.emplace_back(at, at + n);
  });
  return out;
}

result<void> check_finite(const manifest& m, const chunk_plan& plan,
                          uint64_t seq, std::span<const std::byte> bytes,
                          double max_abs) {
  std::optional<uint32_t> bad;
  for_each_piece(m, plan, seq, [&](uint32_t tensor, uint64_t at, uint64_t n) {
    if (!bad &&
        out_of_bounds(m.tensors[tensor].type, bytes.data() + at, n, max_abs))
      bad = tensor;
  });
  if (bad)
    return out_of_bounds_error(m, seq, *bad, max_abs);
  return {};
}

namespace {

/// A chunk's distance is the sum, in order, of its segments' distances:
/// 64 KiB of the chunk's bytes each (an element in the segment its first
/// byte lies in), each summed alone, on one thread or several.
constexpr uint64_t segment_bytes = 64 << 10;

/// One segment's share of a distance: its sum, or the first tensor out of
/// bounds in it.
struct segment_sum {
  double sum = 0;
  std::optional<uint32_t> bad;
};

/// Calls f(tensor, at, n) for the elements of each of chunk `seq`'s
/// pieces (for_each_piece's) in segment s, in order.
template <class F>
void for_each_in_segment(const manifest& m, const chunk_plan& plan,
                         uint64_t seq, uint64_t s, F&& f) {
  auto lo = s * segment_bytes, hi = lo + segment_bytes;
  for_each_piece(m, plan, seq, [&](uint32_t tensor, uint64_t at, uint64_t n) {
    auto w = dtype_bytes(m.tensors[tensor].type);
    auto first = [&](uint64_t edge) { // the first element from `edge` on
      return edge <= at ? at
                        : std::min(at + n, at + (edge - at + w - 1) / w * w);
    };
    auto from = first(lo), to = first(hi);
    if (from < to)
      f(tensor, from, to - from);
  });
}

/// The segments' sums of a chunk of `bytes`, in order: the first segment's
/// error, else the sum of their sums. `measure(s)` measures segment s;
/// `split` measures ranges of segments in parts.
template <class Measure>
segment_sum in_segment_order(uint64_t bytes, work_split split,
                             Measure measure) {
  auto count = (bytes + segment_bytes - 1) / segment_bytes;
  auto parts = static_cast<unsigned>(std::min<uint64_t>(split.parts, count));
  segment_sum out;
  if (!split.pool || parts <= 1) {
    for (uint64_t s = 0; s < count && !out.bad; ++s) {
      auto r = measure(s);
      out.sum += r.sum;
      out.bad = r.bad;
    }
    return out;
  }
  std::vector<segment_sum> sums(count);
  split.run(parts, [&](unsigned p) {
    for (auto s = count * p / parts; s < count * (p + 1) / parts; ++s)
      if ((sums[s] = measure(s)).bad)
        break; // the segments after it in the part count for nothing
  });
  for (uint64_t s = 0; s < count && !out.bad; ++s) {
    out.sum += sums[s].sum;
    out.bad = sums[s].bad;
  }
  return out;
}

} // namespace

result<double> checked_distance(const manifest& m, const chunk_plan& plan,
                                uint64_t seq, std::span<const std::byte> update,
                                std::span<const std::byte> global,
                                double max_abs, double k, work_split split) {
  auto base = plan.extent(seq).model_offset;
  auto r = in_segment_order(update.size(), split, [&](uint64_t s) {
    segment_sum out;
    for_each_in_segment(
        m, plan, seq, s, [&](uint32_t tensor, uint64_t at, uint64_t n) {
          if (out.bad)
            return;
          auto type = m.tensors[tensor].type;
          const auto* u = update.data() + at;
          const auto* g = global.data() + base + at;
          bool counted = !outside_distance(m.tensors[tensor]);
          if (counted && (type == dtype::float32 || type == dtype::bfloat16)) {
            bounds32 above{limit_bits32(type, max_abs)};
            out.sum += distance_of(type, u, g, n, k, &above);
            if (above.above)
              out.bad = tensor;
          } else if (out_of_bounds(type, u, n, max_abs)) {
            out.bad = tensor;
          } else if (counted) {
            out.sum += distance_of(type, u, g, n, k);
          }
        });
    return out;
  });
  if (r.bad)
    return out_of_bounds_error(m, seq, *r.bad, max_abs);
  return r.sum;
}

double squared_distance(const manifest& m, const chunk_plan& plan, uint64_t seq,
                        std::span<const std::byte> update,
                        std::span<const std::byte> global, double k,
                        work_split split) {
  auto base = plan.extent(seq).model_offset;
  return in_segment_order(update.size(), split,
                          [&](uint64_t s) {
                            segment_sum out;
                            for_each_in_segment(
                                m, plan, seq, s,
                                [&](uint32_t tensor, uint64_t at, uint64_t n) {
                                  if (!outside_distance(m.tensors[tensor]))
                                    out.sum += distance_of(
                                        m.tensors[tensor].type,
                                        update.data() + at,
                                        global.data() + base + at, n, k);
                                });
                            return out;
                          })
      .sum;
}

double squared_norm(const manifest& m, const chunk_plan& plan, uint64_t seq,
                    std::span<const std::byte> model) {
  double sum = 0;
  auto base = plan.extent(seq).model_offset;
  for_each_piece(m, plan, seq, [&](uint32_t tensor, uint64_t at, uint64_t n) {
    if (!outside_distance(m.tensors[tensor]))
      sum += distance_of(m.tensors[tensor].type, model.data() + base + at,
                         nullptr, n);
  });
  return sum;
}

result<std::vector<bool>>
kept_tensors(const manifest& m,
             const std::vector<std::pair<std::string, tensor_rule>>& rules) {
  auto matches = [](const std::string& pattern, const tensor_info& t) {
    return fnmatch(pattern.c_str(), t.name.c_str(), 0) == 0;
  };
  for (const auto& rule : rules)
    if (const auto& pattern = rule.first;
        std::none_of(m.tensors.begin(), m.tensors.end(),
                     [&](const tensor_info& t) { return matches(pattern, t); }))
      return error{errc::bad_config,
                   "server_configs.aggregator_kwargs.tensor_rules: '" +
                       pattern + "' matches no tensor of the model (" +
                       std::to_string(m.tensors.size()) +
                       " tensors, the first '" +
                       (m.tensors.empty() ? "" : m.tensors[0].name) + "')"};
  std::vector<bool> kept(m.tensors.size(), false);
  for (size_t t = 0; t < m.tensors.size(); ++t) {
    auto first = std::find_if(rules.begin(), rules.end(), [&](const auto& r) {
      return matches(r.first, m.tensors[t]);
    });
    kept[t] = first != rules.end() && first->second == tensor_rule::keep;
  }
  return kept;
}

bool touches_kept(const manifest& m, const chunk_plan& plan, uint64_t seq,
                  const std::vector<bool>& kept) {
  bool any = false;
  for_each_piece(m, plan, seq, [&](uint32_t tensor, uint64_t, uint64_t) {
    any = any || kept[tensor];
  });
  return any;
}

bool keep_kept(const manifest& m, const chunk_plan& plan, uint64_t seq,
               const std::vector<bool>& kept, std::span<std::byte> update,
               std::span<const std::byte> global) {
  bool any = false;
  auto start = plan.extent(seq).model_offset;
  for_each_piece(m, plan, seq, [&](uint32_t tensor, uint64_t at, uint64_t n) {
    if (!kept[tensor])
      return;
    std::memcpy(update.data() + at, global.data() + start + at, n);
    any = true;
  });
  return any;
}

} // namespace fedcaf
