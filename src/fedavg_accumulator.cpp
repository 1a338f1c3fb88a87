#include "fedcaf/fedavg_accumulator.hpp"

#include <cstring>

namespace fedcaf {

result<fedavg_accumulator> fedavg_accumulator::make(const manifest& m) {
  for (const auto& t : m.tensors)
    if (t.type != dtype::float32)
      return error{errc::unsupported_dtype,
                   "tensor '" + t.name + "' is " +
                     std::string{dtype_name(t.type)} +
                     "; FedAvg averages F32 tensors only"};
  return fedavg_accumulator{m.total_bytes()};
}

result<void> fedavg_accumulator::fold(uint64_t model_offset,
                                      std::span<const std::byte> x,
                                      double weight) {
  FEDCAF_REQUIRE(model_offset % sizeof(float) == 0 &&
                   x.size() % sizeof(float) == 0,
                 errc::out_of_range, model_offset, x.size());
  FEDCAF_REQUIRE(model_offset + x.size() <= total_bytes_, errc::out_of_range,
                 model_offset, x.size(), total_bytes_);
  if (sum_.size() == 0)
    sum_ = byte_buffer::zeroed(total_bytes_);
  auto* acc = reinterpret_cast<float*>(sum_.data() + model_offset);
  auto n = x.size() / sizeof(float);
  auto w = static_cast<float>(weight);
  if (reinterpret_cast<uintptr_t>(x.data()) % alignof(float) == 0) {
    const auto* in = reinterpret_cast<const float*>(x.data());
    for (size_t i = 0; i < n; ++i)
      acc[i] += w * in[i];
  } else {
    for (size_t i = 0; i < n; ++i) {
      float v;
      std::memcpy(&v, x.data() + i * sizeof(float), sizeof v);
      acc[i] += w * v;
    }
  }
  return {};
}

result<byte_buffer> fedavg_accumulator::finalize() {
  FEDCAF_REQUIRE(weight_sum_ > 0, errc::internal, weight_sum_);
  if (sum_.size() == 0)
    sum_ = byte_buffer::zeroed(total_bytes_);
  auto* acc = reinterpret_cast<float*>(sum_.data());
  auto n = total_bytes_ / sizeof(float);
  auto inv = static_cast<float>(1.0 / weight_sum_);
  for (size_t i = 0; i < n; ++i)
    acc[i] *= inv;
  weight_sum_ = 0;
  return std::move(sum_);
}

} // namespace fedcaf
