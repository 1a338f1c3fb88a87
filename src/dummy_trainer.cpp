#include "fedcaf/dummy_trainer.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

#include "fedcaf/element.hpp"

namespace fedcaf {

manifest synthetic_layout(uint32_t num_tensors, uint64_t total_bytes,
                          dtype type) {
  manifest m;
  auto elements = total_bytes / dtype_bytes(type);
  for (uint32_t i = 0; i < num_tensors; ++i) {
    auto n = elements / num_tensors + (i < elements % num_tensors ? 1 : 0);
    m.tensors.push_back(
        make_tensor_info("layer." + std::to_string(i) + ".weight", type, {n}));
  }
  return m;
}

namespace {

/// Calls f(type, first byte, element count) on every piece of at most
/// 64 MiB of the tensors laid out in `buffer`, in order, and gives each
/// piece's pages back afterwards (a no-op for heap memory).
template <class F>
void for_each_piece(const manifest& layout, byte_buffer& buffer, F&& f) {
  constexpr size_t piece_bytes = 64u << 20;
  size_t offset = 0;
  for (const auto& t : layout.tensors) {
    auto element = dtype_bytes(t.type);
    for (size_t at = 0; at < t.byte_size; at += piece_bytes) {
      auto n = std::min(piece_bytes, t.byte_size - at);
      f(t.type, buffer.data() + offset + at, n / element);
      buffer.release(offset + at, n);
    }
    offset += t.byte_size;
  }
}

} // namespace

void fill_synthetic(const manifest& layout, uint64_t seed, byte_buffer& dest) {
  uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
  for_each_piece(layout, dest, [&](dtype type, std::byte* base, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      auto k = static_cast<int>(state >> 57) - 64; // [-64, 64)
      store_element(type, base, i, static_cast<float>(k) / 64.0f);
    }
  });
}

model_snapshot synthetic_model(const manifest& layout, uint64_t seed) {
  model_snapshot s;
  s.layout = layout;
  s.bytes = byte_buffer::uninitialized(layout.total_bytes());
  fill_synthetic(layout, seed, s.bytes);
  return s;
}

result<byte_buffer> anonymous_file_buffer(const std::string& wanted,
                                          uint64_t size) {
  // Another buffer of this process (a simulated tree's relays, each naming
  // its files alike) may hold the name for the moment between its open and
  // its unlink: then the name with a number after it.
  static std::atomic<uint64_t> taken{0};
  std::string path = wanted;
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  for (int tries = 0; fd < 0 && errno == EEXIST && tries < 16; ++tries) {
    path = wanted + "." + std::to_string(++taken);
    fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  }
  if (fd < 0)
    return error{errc::io_error, path + ": " + std::strerror(errno)};
  auto grown = ::ftruncate(fd, static_cast<off_t>(size));
  auto saved = errno;
  ::close(fd);
  if (grown != 0) {
    ::unlink(path.c_str());
    return error{errc::io_error, path + ": " + std::strerror(saved)};
  }
  auto buffer = byte_buffer::map_file(path, 0, size);
  ::unlink(path.c_str());
  return buffer;
}

namespace {

class dummy_trainer final : public trainer {
public:
  dummy_trainer(manifest layout, byte_buffer params, float add,
                uint64_t samples, float noise, uint64_t seed)
      : layout_(std::move(layout)), params_(std::move(params)), add_(add),
        samples_(samples) {
    if (noise > 0)
      fill_noise(noise, seed);
  }

  const manifest& layout() const override { return layout_; }

  model_view parameters() override {
    return split_contiguous(layout_, params_.bytes());
  }

  result<train_metrics> train() override {
    auto start = std::chrono::steady_clock::now();
    if (add_ != 0 || !noise_.empty())
      if (!add_to_all())
        return error{errc::cancelled,
                     "training stopped between two pieces of the model: the "
                     "run is ending"};
    std::chrono::duration<double> took =
        std::chrono::steady_clock::now() - start;
    train_metrics m;
    m.samples = samples_;
    m.seconds = took.count();
    return m;
  }

  uint64_t sample_count() const override { return samples_; }

  void release(uint64_t model_offset, uint64_t bytes) override {
    params_.release(model_offset, bytes);
  }

private:
  /// Adds to every element, a piece (of at most 64 MiB) at a time; returns
  /// false iff a stop was asked before the last piece (the rest is left).
  bool add_to_all() {
    bool stopped = false;
    for_each_piece(
        layout_, params_,
        [this, &stopped](dtype type, std::byte* base, size_t n) {
          stopped = stopped || stop_asked();
          if (stopped)
            return;
          if (type == dtype::float32) {
            auto* x = reinterpret_cast<float*>(base);
            if (noise_.empty()) {
              for (size_t i = 0; i < n; ++i)
                x[i] += add_;
              return;
            }
            for (size_t i = 0; i < n;) { // a run of the table at a time
              auto k = std::min(n - i, noise_.size() - noise_at_);
              const float* z = noise_.data() + noise_at_;
              for (size_t j = 0; j < k; ++j)
                x[i + j] += add_ + z[j];
              i += k;
              noise_at_ = (noise_at_ + k) % noise_.size();
            }
            return;
          }
          for (size_t i = 0; i < n; ++i)
            store_element(type, base, i, load_element(type, base, i) + add_);
        });
    if (!noise_.empty()) // the next round draws elsewhere in the table
      noise_at_ = (noise_at_ + 7919) % noise_.size();
    return !stopped;
  }

  /// A table of 2^20 values uniform in [-noise, noise) (the top 24 bits
  /// of a 64-bit LCG's state), added in turn: the noise costs what adding
  /// a constant does, and a codec's blocks (256 values at most) see no
  /// repetition.
  void fill_noise(float noise, uint64_t seed) {
    uint64_t state = seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
    noise_.resize(size_t{1} << 20);
    for (auto& z : noise_) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      auto u = static_cast<float>(state >> 40) * 0x1p-24f; // [0, 1)
      z = noise * (2.0f * u - 1.0f);
    }
  }

  manifest layout_;
  byte_buffer params_;
  float add_;
  uint64_t samples_;
  std::vector<float> noise_; ///< empty: no noise
  size_t noise_at_ = 0;      ///< where the next value is drawn
};

} // namespace

result<std::unique_ptr<trainer>>
make_dummy_trainer(manifest layout, float add, uint64_t samples,
                   const dummy_storage& storage, float noise, uint64_t seed) {
  auto size = layout.total_bytes();
  if (storage.file.empty())
    return std::make_unique<dummy_trainer>(std::move(layout),
                                           byte_buffer::zeroed(size), add,
                                           samples, noise, seed);
  auto params = anonymous_file_buffer(storage.file, size);
  if (!params)
    return params.err();
  return std::make_unique<dummy_trainer>(std::move(layout), std::move(*params),
                                         add, samples, noise, seed);
}

} // namespace fedcaf
