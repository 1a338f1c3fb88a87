#include "fedcaf/dummy_trainer.hpp"

#include <chrono>

namespace fedcaf {

manifest synthetic_layout(uint32_t num_tensors, uint64_t total_bytes) {
  manifest m;
  auto elements = total_bytes / sizeof(float);
  for (uint32_t i = 0; i < num_tensors; ++i) {
    auto n = elements / num_tensors + (i < elements % num_tensors ? 1 : 0);
    m.tensors.push_back(make_tensor_info(
        "layer." + std::to_string(i) + ".weight", dtype::float32, {n}));
  }
  return m;
}

model_snapshot synthetic_model(const manifest& layout, uint64_t seed) {
  model_snapshot s;
  s.layout = layout;
  s.bytes = byte_buffer::uninitialized(layout.total_bytes());
  auto* x = reinterpret_cast<float*>(s.bytes.data());
  auto n = layout.total_bytes() / sizeof(float);
  uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < n; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    // Multiples of 1/1024 in [-1, 1): sums of a few of them are exact.
    x[i] = static_cast<float>(static_cast<int>(state >> 53) - 1024) / 1024.0f;
  }
  return s;
}

namespace {

class dummy_trainer final : public trainer {
public:
  dummy_trainer(manifest layout, float add, uint64_t samples)
      : layout_(std::move(layout)),
        params_(byte_buffer::zeroed(layout_.total_bytes())), add_(add),
        samples_(samples) {}

  const manifest& layout() const override { return layout_; }

  model_view parameters() override {
    return split_contiguous(layout_, params_.bytes());
  }

  result<train_metrics> train() override {
    auto start = std::chrono::steady_clock::now();
    if (add_ != 0) {
      auto* x = reinterpret_cast<float*>(params_.data());
      auto n = params_.size() / sizeof(float);
      for (size_t i = 0; i < n; ++i)
        x[i] += add_;
    }
    std::chrono::duration<double> took =
        std::chrono::steady_clock::now() - start;
    return train_metrics{0, samples_, took.count()};
  }

  uint64_t sample_count() const override { return samples_; }

private:
  manifest layout_;
  byte_buffer params_;
  float add_;
  uint64_t samples_;
};

} // namespace

std::unique_ptr<trainer> make_dummy_trainer(manifest layout, float add,
                                            uint64_t samples) {
  return std::make_unique<dummy_trainer>(std::move(layout), add, samples);
}

} // namespace fedcaf
