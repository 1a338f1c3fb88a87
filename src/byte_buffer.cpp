#include "fedcaf/byte_buffer.hpp"

#include <new>

namespace fedcaf {

namespace {

std::byte* checked(void* p, size_t size) {
  if (p == nullptr && size > 0)
    throw std::bad_alloc{};
  return static_cast<std::byte*>(p);
}

} // namespace

byte_buffer byte_buffer::zeroed(size_t size) {
  return {checked(std::calloc(size == 0 ? 1 : size, 1), size), size};
}

byte_buffer byte_buffer::uninitialized(size_t size) {
  // 64-byte alignment keeps float loads of every chunk aligned.
  auto rounded = (size + 63) / 64 * 64;
  return {checked(std::aligned_alloc(64, rounded == 0 ? 64 : rounded), size),
          size};
}

} // namespace fedcaf
