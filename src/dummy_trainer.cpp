#include "fedcaf/dummy_trainer.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

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

void fill_synthetic(const manifest& layout, uint64_t seed, byte_buffer& dest) {
  constexpr size_t release_every = 64u << 20;
  uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
  size_t offset = 0, released = 0;
  for (const auto& t : layout.tensors) {
    auto* base = dest.data() + offset;
    auto n = t.byte_size / dtype_bytes(t.type);
    for (size_t i = 0; i < n; ++i) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      auto k = static_cast<int>(state >> 57) - 64; // [-64, 64)
      store_element(t.type, base, i, static_cast<float>(k) / 64.0f);
    }
    offset += t.byte_size;
    if (offset - released >= release_every) {
      dest.release(released, offset - released);
      released = offset;
    }
  }
  dest.release(released, offset - released);
}

model_snapshot synthetic_model(const manifest& layout, uint64_t seed) {
  model_snapshot s;
  s.layout = layout;
  s.bytes = byte_buffer::uninitialized(layout.total_bytes());
  fill_synthetic(layout, seed, s.bytes);
  return s;
}

result<byte_buffer> anonymous_file_buffer(const std::string& path,
                                          uint64_t size) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
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
                uint64_t samples)
      : layout_(std::move(layout)), params_(std::move(params)), add_(add),
        samples_(samples) {}

  const manifest& layout() const override { return layout_; }

  model_view parameters() override {
    return split_contiguous(layout_, params_.bytes());
  }

  result<train_metrics> train() override {
    auto start = std::chrono::steady_clock::now();
    if (add_ != 0)
      add_to_all();
    std::chrono::duration<double> took =
        std::chrono::steady_clock::now() - start;
    return train_metrics{0, samples_, took.count()};
  }

  uint64_t sample_count() const override { return samples_; }

  void release(uint64_t model_offset, uint64_t bytes) override {
    params_.release(model_offset, bytes);
  }

private:
  void add_to_all() {
    auto* base = params_.data();
    for (const auto& t : layout_.tensors) {
      auto n = t.byte_size / dtype_bytes(t.type);
      if (t.type == dtype::float32) {
        auto* x = reinterpret_cast<float*>(base);
        for (size_t i = 0; i < n; ++i)
          x[i] += add_;
      } else {
        for (size_t i = 0; i < n; ++i)
          store_element(t.type, base, i, load_element(t.type, base, i) + add_);
      }
      params_.release(static_cast<size_t>(base - params_.data()), t.byte_size);
      base += t.byte_size;
    }
  }

  manifest layout_;
  byte_buffer params_;
  float add_;
  uint64_t samples_;
};

} // namespace

result<std::unique_ptr<trainer>>
make_dummy_trainer(manifest layout, float add, uint64_t samples,
                   const dummy_storage& storage) {
  auto size = layout.total_bytes();
  if (storage.file.empty())
    return std::make_unique<dummy_trainer>(
        std::move(layout), byte_buffer::zeroed(size), add, samples);
  auto params = anonymous_file_buffer(storage.file, size);
  if (!params)
    return params.err();
  return std::make_unique<dummy_trainer>(std::move(layout), std::move(*params),
                                         add, samples);
}

} // namespace fedcaf
