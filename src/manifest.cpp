#include "fedcaf/manifest.hpp"

#include <algorithm>
#include <cassert>
#include <set>

#include <xxhash.h>

namespace fedcaf {

namespace {

/// Every dtype with its element size and safetensors spelling.
struct dtype_traits {
  dtype type;
  size_t bytes;
  std::string_view name;
};

constexpr dtype_traits dtypes[] = {
    {dtype::float32, 4, "F32"},   {dtype::float16, 2, "F16"},
    {dtype::bfloat16, 2, "BF16"}, {dtype::float64, 8, "F64"},
    {dtype::int64, 8, "I64"},     {dtype::int32, 4, "I32"},
    {dtype::uint8, 1, "U8"},      {dtype::int16, 2, "I16"},
    {dtype::int8, 1, "I8"},       {dtype::boolean, 1, "BOOL"},
};

const dtype_traits* traits_of(dtype t) {
  for (const auto& d : dtypes)
    if (d.type == t)
      return &d;
  return nullptr;
}

} // namespace

size_t dtype_bytes(dtype t) {
  const auto* d = traits_of(t);
  return d ? d->bytes : 0;
}

std::string_view dtype_name(dtype t) {
  const auto* d = traits_of(t);
  return d ? d->name : "?";
}

result<dtype> dtype_from_name(std::string_view name) {
  for (const auto& d : dtypes)
    if (d.name == name)
      return d.type;
  return error{errc::unsupported_dtype,
               "unknown dtype '" + std::string{name} + "'"};
}

uint64_t manifest::total_bytes() const {
  uint64_t sum = 0;
  for (const auto& t : tensors)
    sum += t.byte_size;
  return sum;
}

namespace {

uint64_t element_count(const std::vector<uint64_t>& shape) {
  uint64_t n = 1;
  for (auto d : shape)
    n *= d;
  return n;
}

} // namespace

tensor_info make_tensor_info(std::string name, dtype type,
                             std::vector<uint64_t> shape) {
  auto bytes = element_count(shape) * dtype_bytes(type);
  return {std::move(name), type, std::move(shape), bytes, std::nullopt};
}

result<void> validate(const manifest& m) {
  FEDCAF_REQUIRE(m.tensors.size() <= max_model_tensors, errc::out_of_range,
                 m.tensors.size(), max_model_tensors);
  std::set<std::string_view> names;
  for (size_t i = 0; i < m.tensors.size(); ++i) {
    const auto& t = m.tensors[i];
    FEDCAF_REQUIRE(!t.name.empty(), errc::manifest_mismatch, i);
    FEDCAF_REQUIRE(names.insert(t.name).second, errc::manifest_mismatch,
                   t.name);
    auto expected = element_count(t.shape) * dtype_bytes(t.type);
    FEDCAF_REQUIRE(t.byte_size == expected, errc::manifest_mismatch, t.name,
                   t.byte_size, expected);
    // A carried tensor travels in a floating dtype, held as another one.
    auto floating = [](dtype x) {
      return x == dtype::float32 || x == dtype::float16 ||
             x == dtype::bfloat16 || x == dtype::float64;
    };
    FEDCAF_REQUIRE(!t.held || (floating(t.type) && t.type != dtype::float64 &&
                               dtype_bytes(*t.held) > 0 && !floating(*t.held)),
                   errc::manifest_mismatch, t.name);
  }
  return {};
}

uint64_t digest(const manifest& m) {
  XXH3_state_t* state = XXH3_createState();
  XXH3_64bits_reset(state);
  for (const auto& t : m.tensors) {
    XXH3_64bits_update(state, t.name.data(), t.name.size() + 1);
    auto type = static_cast<uint8_t>(t.type);
    XXH3_64bits_update(state, &type, 1);
    if (t.held) { // absent for a tensor held as it travels: digests stay
      uint8_t held[2] = {0xff, static_cast<uint8_t>(*t.held)};
      XXH3_64bits_update(state, held, 2);
    }
    uint64_t rank = t.shape.size();
    XXH3_64bits_update(state, &rank, sizeof rank);
    XXH3_64bits_update(state, t.shape.data(), rank * sizeof(uint64_t));
  }
  auto h = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  return h;
}

namespace {

template <class View, class Bytes> View split(const manifest& m, Bytes bytes) {
  assert(bytes.size() == m.total_bytes());
  View view;
  view.tensors.reserve(m.tensors.size());
  size_t offset = 0;
  for (const auto& t : m.tensors) {
    view.tensors.push_back(bytes.subspan(offset, t.byte_size));
    offset += t.byte_size;
  }
  return view;
}

} // namespace

model_view split_contiguous(const manifest& m, std::span<std::byte> bytes) {
  return split<model_view>(m, bytes);
}

const_model_view split_contiguous(const manifest& m,
                                  std::span<const std::byte> bytes) {
  return split<const_model_view>(m, bytes);
}

std::string shape_string(const std::vector<uint64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

result<void> compare_layouts(const manifest& ours, const manifest& theirs,
                             std::string_view theirs_name) {
  auto mismatch = [&](const std::string& why) {
    return error{errc::manifest_mismatch,
                 std::string{theirs_name} + " model layout differs: " + why};
  };
  auto n = std::min(ours.tensors.size(), theirs.tensors.size());
  for (size_t i = 0; i < n; ++i) {
    const auto& a = ours.tensors[i];
    const auto& b = theirs.tensors[i];
    if (a.name != b.name)
      return mismatch("tensor " + std::to_string(i) + " is '" + b.name +
                      "' there and '" + a.name + "' here");
    if (a.shape != b.shape || a.type != b.type)
      return mismatch("tensor '" + a.name + "' is " +
                      std::string{dtype_name(b.type)} + " " +
                      shape_string(b.shape) + " there and " +
                      std::string{dtype_name(a.type)} + " " +
                      shape_string(a.shape) + " here");
  }
  if (ours.tensors.size() > n)
    return mismatch("'" + ours.tensors[n].name + "' is missing there");
  if (theirs.tensors.size() > n)
    return mismatch("'" + theirs.tensors[n].name + "' is missing here");
  return {};
}

} // namespace fedcaf
