#pragma once
// Owned, uninitialised or zeroed raw memory for model bytes and accumulators.
// Pages are not touched on allocation, so resident memory grows only as the
// buffer is written. Thread-safety: none; one owner at a time (move-only).

#include <cstddef>
#include <cstdlib>
#include <memory>
#include <span>
#include <utility>

namespace fedcaf {

class byte_buffer {
public:
  byte_buffer() = default;
  byte_buffer(byte_buffer&& other) noexcept
      : data_(std::move(other.data_)), size_(std::exchange(other.size_, 0)) {}
  byte_buffer& operator=(byte_buffer&& other) noexcept {
    data_ = std::move(other.data_);
    size_ = std::exchange(other.size_, 0);
    return *this;
  }

  /// Returns `size` bytes of zeroes (calloc: fresh pages cost nothing until
  /// touched). Throws std::bad_alloc iff memory is exhausted.
  static byte_buffer zeroed(size_t size);

  /// Returns `size` bytes of unspecified content.
  static byte_buffer uninitialized(size_t size);

  std::byte* data() { return data_.get(); }
  const std::byte* data() const { return data_.get(); }
  size_t size() const { return size_; }
  std::span<std::byte> bytes() { return {data(), size_}; }
  std::span<const std::byte> bytes() const { return {data(), size_}; }

private:
  struct free_deleter {
    void operator()(std::byte* p) const { std::free(p); }
  };
  byte_buffer(std::byte* p, size_t size) : data_(p), size_(size) {}

  std::unique_ptr<std::byte[], free_deleter> data_;
  size_t size_ = 0;
};

} // namespace fedcaf
