#include "fedcaf/update_check.hpp"

#include <cstring>

#include "fedcaf/element.hpp"

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

/// True iff any element of `n` elements of width W at p has all exponent
/// bits set (NaN or infinity): one branch-free pass the compiler vectorizes.
template <class Bits>
bool any_non_finite(const std::byte* p, size_t n, Bits exponent) {
  Bits hit = 0;
  for (size_t i = 0; i < n; ++i) {
    Bits x;
    std::memcpy(&x, p + i * sizeof(Bits), sizeof(Bits));
    hit |= static_cast<Bits>((x & exponent) == exponent);
  }
  return hit != 0;
}

bool non_finite(dtype t, const std::byte* p, uint64_t bytes) {
  switch (t) {
  case dtype::float32:
    return any_non_finite<uint32_t>(p, bytes / 4, 0x7f800000u);
  case dtype::float16:
    return any_non_finite<uint16_t>(p, bytes / 2, 0x7c00u);
  case dtype::bfloat16:
    return any_non_finite<uint16_t>(p, bytes / 2, 0x7f80u);
  case dtype::float64:
    return any_non_finite<uint64_t>(p, bytes / 8, 0x7ff0000000000000ull);
  default:
    return false; // integers are always finite
  }
}

/// The sum of (load(u, i) - load(g, i))^2 over n elements: one pass, the
/// loader inlined (no call per element).
template <class Load>
double squares_loaded(const std::byte* u, const std::byte* g, uint64_t n,
                      Load load) {
  double sum = 0;
  for (uint64_t i = 0; i < n; ++i) {
    double d = load(u, i) - load(g, i);
    sum += d * d;
  }
  return sum;
}

/// As squares_loaded, the elements stored as Bits and made a value by
/// `convert`.
template <class Bits, class Convert>
double sum_of_squares(const std::byte* u, const std::byte* g, uint64_t n,
                      Convert convert) {
  return squares_loaded(u, g, n, [convert](const std::byte* p, uint64_t i) {
    Bits x;
    std::memcpy(&x, p + i * sizeof(Bits), sizeof(Bits));
    return static_cast<double>(convert(x));
  });
}

double distance_of(dtype t, const std::byte* u, const std::byte* g,
                   uint64_t bytes) {
  switch (t) {
  case dtype::float64:
    return sum_of_squares<double>(u, g, bytes / 8, [](double x) { return x; });
  case dtype::float32:
    return sum_of_squares<float>(u, g, bytes / 4, [](float x) { return x; });
  case dtype::bfloat16:
    return sum_of_squares<uint16_t>(
        u, g, bytes / 2, [](uint16_t x) { return bf16_to_float(x); });
  case dtype::float16:
    return sum_of_squares<uint16_t>(u, g, bytes / 2,
                                    [](uint16_t x) { return f16_to_float(x); });
  default:
    return 0; // integers are not part of the update's norm
  }
}

} // namespace

result<void> check_finite(const manifest& m, const chunk_plan& plan,
                          uint64_t seq, std::span<const std::byte> bytes) {
  std::string bad;
  for_each_piece(m, plan, seq, [&](uint32_t tensor, uint64_t at, uint64_t n) {
    if (bad.empty() && non_finite(m.tensors[tensor].type, bytes.data() + at, n))
      bad = m.tensors[tensor].name;
  });
  if (!bad.empty())
    return error{errc::poisoned_update, "chunk " + std::to_string(seq) +
                                            " holds NaN or infinite values "
                                            "(tensor '" +
                                            bad + "')"};
  return {};
}

double squared_distance(const manifest& m, const chunk_plan& plan, uint64_t seq,
                        std::span<const std::byte> update,
                        std::span<const std::byte> global) {
  double sum = 0;
  auto base = plan.extent(seq).model_offset;
  for_each_piece(m, plan, seq, [&](uint32_t tensor, uint64_t at, uint64_t n) {
    sum += distance_of(m.tensors[tensor].type, update.data() + at,
                       global.data() + base + at, n);
  });
  return sum;
}

} // namespace fedcaf
