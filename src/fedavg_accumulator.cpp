#include "fedcaf/fedavg_accumulator.hpp"

#include <cstring>

namespace fedcaf {

namespace {

/// out[i] = w * x[i] (assign) or out[i] += w * x[i].
template <bool Assign>
void scale_into(float* out, const std::byte* x, size_t n, float w) {
  if (reinterpret_cast<uintptr_t>(x) % alignof(float) == 0) {
    const auto* in = reinterpret_cast<const float*>(x);
    for (size_t i = 0; i < n; ++i)
      out[i] = Assign ? w * in[i] : out[i] + w * in[i];
    return;
  }
  for (size_t i = 0; i < n; ++i) {
    float v;
    std::memcpy(&v, x + i * sizeof(float), sizeof v);
    out[i] = Assign ? w * v : out[i] + w * v;
  }
}

} // namespace

result<fedavg_accumulator> fedavg_accumulator::make(const manifest& m,
                                                    chunk_plan plan) {
  for (const auto& t : m.tensors)
    if (t.type != dtype::float32)
      return error{errc::unsupported_dtype,
                   "tensor '" + t.name + "' is " +
                       std::string{dtype_name(t.type)} +
                       "; FedAvg averages F32 tensors only"};
  FEDCAF_REQUIRE(plan.total_bytes() == m.total_bytes(), errc::internal,
                 plan.total_bytes(), m.total_bytes());
  return fedavg_accumulator{m.total_bytes(), std::move(plan)};
}

void fedavg_accumulator::recycle(byte_buffer&& buffer) {
  if (sum_.size() == 0 && buffer.size() == total_bytes_)
    sum_ = std::move(buffer);
}

result<void> fedavg_accumulator::fold(uint64_t seq,
                                      std::span<const std::byte> x,
                                      double weight) {
  FEDCAF_REQUIRE(seq < plan_.chunk_count(), errc::out_of_range, seq,
                 plan_.chunk_count());
  const auto& e = plan_.extent(seq);
  FEDCAF_REQUIRE(x.size() == e.bytes, errc::out_of_range, x.size(), e.bytes);
  if (sum_.size() == 0)
    sum_ = byte_buffer::uninitialized(total_bytes_);
  if (written_.empty())
    written_.assign(plan_.chunk_count(), false);
  auto* acc = reinterpret_cast<float*>(sum_.data() + e.model_offset);
  auto n = x.size() / sizeof(float);
  auto w = static_cast<float>(weight);
  if (written_[seq]) {
    scale_into<false>(acc, x.data(), n, w);
  } else {
    scale_into<true>(acc, x.data(), n, w);
    written_[seq] = true;
  }
  return {};
}

result<byte_buffer> fedavg_accumulator::finalize() {
  FEDCAF_REQUIRE(weight_sum_ > 0, errc::internal, weight_sum_);
  if (sum_.size() == 0)
    sum_ = byte_buffer::uninitialized(total_bytes_);
  written_.resize(plan_.chunk_count(), false);
  auto inv = static_cast<float>(1.0 / weight_sum_);
  for (uint64_t seq = 0; seq < plan_.chunk_count(); ++seq) {
    const auto& e = plan_.extent(seq);
    auto* acc = reinterpret_cast<float*>(sum_.data() + e.model_offset);
    auto n = e.bytes / sizeof(float);
    if (!written_[seq]) {
      std::memset(acc, 0, e.bytes);
      continue;
    }
    for (size_t i = 0; i < n; ++i)
      acc[i] *= inv;
  }
  weight_sum_ = 0;
  written_.clear();
  return std::move(sum_);
}

} // namespace fedcaf
