#include "fedcaf/carried.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "fedcaf/element.hpp"

namespace fedcaf {

namespace {

/// Reads element i of integer or bool array `p` of dtype `t`.
int64_t load_integer(dtype t, const std::byte* p, size_t i) {
  auto read = [p, i]<class T>(T) {
    T x;
    std::memcpy(&x, p + i * sizeof(T), sizeof(T));
    return static_cast<int64_t>(x);
  };
  switch (t) {
  case dtype::int64:
    return read(int64_t{});
  case dtype::int32:
    return read(int32_t{});
  case dtype::int16:
    return read(int16_t{});
  case dtype::int8:
    return read(int8_t{});
  case dtype::uint8:
    return read(uint8_t{});
  case dtype::boolean:
    return read(uint8_t{}) != 0;
  default:
    return 0;
  }
}

/// Writes `v`, rounded and clamped to dtype `t`'s range, as element i.
void store_rounded(dtype t, std::byte* p, size_t i, double v) {
  auto write = [p, i, v]<class T>(T) {
    double r = std::isnan(v) ? 0.0 : std::nearbyint(v);
    r = std::clamp(r, static_cast<double>(std::numeric_limits<T>::min()),
                   static_cast<double>(std::numeric_limits<T>::max()));
    // 2^63 - 1 is not a double: the largest double below 2^63.
    T x = r >= 9.2233720368547748e18 ? std::numeric_limits<T>::max()
                                     : static_cast<T>(r);
    std::memcpy(p + i * sizeof(T), &x, sizeof(T));
  };
  switch (t) {
  case dtype::int64:
    return write(int64_t{});
  case dtype::int32:
    return write(int32_t{});
  case dtype::int16:
    return write(int16_t{});
  case dtype::int8:
    return write(int8_t{});
  case dtype::uint8:
    return write(uint8_t{});
  case dtype::boolean: {
    uint8_t b = v >= 0.5 ? 1 : 0;
    std::memcpy(p + i, &b, 1);
    return;
  }
  default:
    return;
  }
}

uint64_t elements(const tensor_info& t) {
  return t.byte_size / dtype_bytes(t.type);
}

} // namespace

bool is_carried_kind(dtype t) {
  return t == dtype::int64 || t == dtype::int32 || t == dtype::int16 ||
         t == dtype::int8 || t == dtype::uint8 || t == dtype::boolean;
}

uint64_t exact_integer_limit(dtype t) {
  if (t == dtype::float16)
    return uint64_t{1} << 11;
  if (t == dtype::bfloat16)
    return uint64_t{1} << 8;
  return uint64_t{1} << 24;
}

uint64_t held_bytes(const tensor_info& t) {
  return t.held ? elements(t) * dtype_bytes(*t.held) : t.byte_size;
}

result<manifest> carry_layout(const manifest& held) {
  const tensor_info* first = nullptr;
  for (const auto& t : held.tensors) {
    if (is_floating(t.type) && !first)
      first = &t;
    if (is_floating(t.type) && t.type != first->type)
      return error{errc::unsupported_dtype,
                   "tensor '" + t.name + "' is " +
                       std::string{dtype_name(t.type)} + " and tensor '" +
                       first->name + "' " +
                       std::string{dtype_name(first->type)} +
                       "; averaging needs the floating tensors of one of "
                       "F32, BF16, F16 (integer and bool tensors travel in "
                       "it)"};
    if (!is_floating(t.type) && !is_carried_kind(t.type))
      return error{errc::unsupported_dtype,
                   "tensor '" + t.name + "' is " +
                       std::string{dtype_name(t.type)} +
                       "; fedcaf averages F32, BF16 and F16 tensors and "
                       "carries integer and bool ones"};
  }
  if (!first)
    return error{errc::unsupported_dtype,
                 "the model has no F32, BF16 or F16 tensor: its integer and "
                 "bool tensors have no floating dtype to travel in"};
  manifest out;
  out.tensors.reserve(held.tensors.size());
  for (const auto& t : held.tensors) {
    if (is_floating(t.type) || t.held) {
      out.tensors.push_back(t);
      continue;
    }
    auto c = make_tensor_info(t.name, first->type, t.shape);
    c.held = t.type;
    out.tensors.push_back(std::move(c));
  }
  return out;
}

result<void> widen(const tensor_info& t, std::span<const std::byte> from,
                   std::span<std::byte> to) {
  FEDCAF_REQUIRE(t.held && from.size() == held_bytes(t) &&
                     to.size() == t.byte_size,
                 errc::internal, t.name, from.size(), to.size());
  auto limit = static_cast<int64_t>(exact_integer_limit(t.type));
  auto n = elements(t);
  for (size_t i = 0; i < n; ++i) {
    auto v = load_integer(*t.held, from.data(), i);
    if (v > limit || v < -limit)
      return error{errc::unsupported_dtype,
                   "tensor '" + t.name + "' (" +
                       std::string{dtype_name(*t.held)} + ") holds " +
                       std::to_string(v) + ", which " +
                       std::string{dtype_name(t.type)} +
                       " does not hold exactly (integer tensors travel in the "
                       "model's floating dtype: up to +-" +
                       std::to_string(limit) + ")"};
    store_element(t.type, to.data(), i, static_cast<float>(v));
  }
  return {};
}

void narrow(const tensor_info& t, std::span<const std::byte> from,
            std::span<std::byte> to) {
  if (!t.held || from.size() != t.byte_size || to.size() != held_bytes(t))
    return;
  auto n = elements(t);
  for (size_t i = 0; i < n; ++i)
    store_rounded(*t.held, to.data(), i, load_element(t.type, from.data(), i));
}

} // namespace fedcaf
