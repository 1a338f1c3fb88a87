#include "fedcaf/carried.hpp"

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <vector>

#include <doctest/doctest.h>

#include "fedcaf/element.hpp"
#include "fedcaf/safetensors.hpp"
#include "messages/codec.hpp"

using namespace fedcaf;

namespace {

/// A BatchNorm layer as PyTorch's state_dict holds it, and a bool mask.
manifest batchnorm_layout(dtype floating) {
  return {{make_tensor_info("bn.weight", floating, {4}),
           make_tensor_info("bn.running_mean", floating, {4}),
           make_tensor_info("bn.num_batches_tracked", dtype::int64, {}),
           make_tensor_info("mask", dtype::boolean, {3}),
           make_tensor_info("ids", dtype::int32, {2})}};
}

template <class T>
std::span<const std::byte> bytes_of(const std::vector<T>& v) {
  return {reinterpret_cast<const std::byte*>(v.data()), v.size() * sizeof(T)};
}

} // namespace

TEST_CASE("integer and bool tensors travel in the model's floating dtype") {
  auto carried = carry_layout(batchnorm_layout(dtype::bfloat16));
  REQUIRE(carried);
  REQUIRE(validate(*carried));
  const auto& t = carried->tensors;
  CHECK_FALSE(t[0].held);
  CHECK(t[2].type == dtype::bfloat16);
  CHECK(t[2].held == dtype::int64);
  CHECK(t[2].byte_size == 2);
  CHECK(t[3].held == dtype::boolean);
  CHECK(t[4].byte_size == 4);
  CHECK(held_bytes(t[4]) == 8);
  CHECK(*common_floating_dtype(*carried) == dtype::bfloat16);
  // The digest tells a carried tensor from a float one of the same shape.
  auto plain = *carried;
  plain.tensors[2].held.reset();
  CHECK(digest(plain) != digest(*carried));
  // What cannot travel is named.
  manifest mixed{{make_tensor_info("a", dtype::float32, {1}),
                  make_tensor_info("b", dtype::float16, {1})}};
  CHECK(carry_layout(mixed).err().message.find("'b' is F16") !=
        std::string::npos);
  manifest ints{{make_tensor_info("n", dtype::int64, {1})}};
  CHECK(carry_layout(ints).err().code == errc::unsupported_dtype);
  manifest doubles{{make_tensor_info("a", dtype::float32, {1}),
                    make_tensor_info("d", dtype::float64, {1})}};
  CHECK_FALSE(carry_layout(doubles));
}

TEST_CASE("a carried tensor comes back as the weighted mean rounded, a bool "
          "as the majority, clamped to its dtype") {
  auto layout = *carry_layout(batchnorm_layout(dtype::float32));
  const auto& counter = layout.tensors[2];
  std::vector<int64_t> n{937};
  std::vector<float> wire(1);
  REQUIRE(widen(counter, bytes_of(n),
                {reinterpret_cast<std::byte*>(wire.data()), 4}));
  CHECK(wire[0] == 937.0f);
  auto back = [&](const tensor_info& t, std::vector<float> mean) {
    std::vector<std::byte> out(held_bytes(t));
    narrow(t, bytes_of(mean), out);
    return out;
  };
  auto as_i64 = [](const std::vector<std::byte>& b) {
    int64_t v;
    std::memcpy(&v, b.data(), 8);
    return v;
  };
  CHECK(as_i64(back(counter, {936.5f})) == 936); // ties to even
  CHECK(as_i64(back(counter, {937.4f})) == 937);
  CHECK(as_i64(back(counter, {-3.6f})) == -4);
  const auto& mask = layout.tensors[3];
  auto m = back(mask, {0.5f, 0.49f, 1.0f});
  CHECK(m == std::vector<std::byte>{std::byte{1}, std::byte{0}, std::byte{1}});
  manifest small{{make_tensor_info("w", dtype::float32, {1}),
                  make_tensor_info("c", dtype::int8, {2})}};
  auto c = carry_layout(small)->tensors[1];
  auto clamped = back(c, {300.0f, -1e9f});
  CHECK(static_cast<int8_t>(clamped[0]) == 127);
  CHECK(static_cast<int8_t>(clamped[1]) == -128);
}

TEST_CASE("a value the floating dtype does not hold exactly is refused, "
          "naming the tensor") {
  auto layout = *carry_layout(batchnorm_layout(dtype::bfloat16));
  std::vector<int64_t> n{257}; // bfloat16 holds integers exactly to 256
  std::vector<std::byte> wire(2);
  auto r = widen(layout.tensors[2], bytes_of(n), wire);
  REQUIRE_FALSE(r);
  CHECK(r.err().message.find("'bn.num_batches_tracked' (I64) holds 257") !=
        std::string::npos);
  n[0] = 256;
  CHECK(widen(layout.tensors[2], bytes_of(n), wire));
}

TEST_CASE("a carried layout crosses the wire and is saved as the model "
          "holds it") {
  auto layout = *carry_layout(batchnorm_layout(dtype::float32));
  auto back = msg::decode<msg::round_start>(
      msg::encode(msg::round_start{1, 1, layout, 64, 2, {}}));
  REQUIRE(back);
  CHECK(back->model == layout);
  // Saved: the counter as I64 (rounded), the mask as BOOL.
  std::vector<float> values{1, 2,     3,    4,    0.5f, 0.25f, 0,
                            1, 41.6f, 0.7f, 0.2f, 0.5f, 7,     -2};
  std::vector<std::byte> bytes(values.size() * 4);
  std::memcpy(bytes.data(), values.data(), bytes.size());
  auto path = (std::filesystem::temp_directory_path() /
               ("fedcaf_carried_" + std::to_string(::getpid()) + ".st"))
                  .string();
  REQUIRE(write_safetensors(
      path, layout,
      split_contiguous(layout, std::span<const std::byte>{bytes})));
  auto f = safetensors_file::open(path);
  REQUIRE(f);
  CHECK(f->layout() == batchnorm_layout(dtype::float32));
  auto view = f->view();
  int64_t count;
  std::memcpy(&count, view.tensors[2].data(), 8);
  CHECK(count == 42);
  CHECK(view.tensors[3][0] == std::byte{1});
  CHECK(view.tensors[3][1] == std::byte{0});
  CHECK(view.tensors[3][2] == std::byte{1});
  int32_t ids[2];
  std::memcpy(ids, view.tensors[4].data(), 8);
  CHECK(ids[0] == 7);
  CHECK(ids[1] == -2);
  std::filesystem::remove(path);
}
