#include "fedcaf/manifest.hpp"

#include <cassert>
#include <set>

#include <xxhash.h>

namespace fedcaf {

size_t dtype_bytes(dtype t) {
  switch (t) {
  case dtype::float32:
    return 4;
  case dtype::float16:
    return 2;
  case dtype::bfloat16:
    return 2;
  case dtype::float64:
    return 8;
  case dtype::int64:
    return 8;
  case dtype::int32:
    return 4;
  case dtype::uint8:
    return 1;
  }
  return 0;
}

std::string_view dtype_name(dtype t) {
  switch (t) {
  case dtype::float32:
    return "F32";
  case dtype::float16:
    return "F16";
  case dtype::bfloat16:
    return "BF16";
  case dtype::float64:
    return "F64";
  case dtype::int64:
    return "I64";
  case dtype::int32:
    return "I32";
  case dtype::uint8:
    return "U8";
  }
  return "?";
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
  return {std::move(name), type, std::move(shape), bytes};
}

result<void> validate(const manifest& m) {
  std::set<std::string_view> names;
  for (size_t i = 0; i < m.tensors.size(); ++i) {
    const auto& t = m.tensors[i];
    FEDCAF_REQUIRE(!t.name.empty(), errc::manifest_mismatch, i);
    FEDCAF_REQUIRE(names.insert(t.name).second, errc::manifest_mismatch,
                   t.name);
    auto expected = element_count(t.shape) * dtype_bytes(t.type);
    FEDCAF_REQUIRE(t.byte_size == expected, errc::manifest_mismatch, t.name,
                   t.byte_size, expected);
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

} // namespace fedcaf
