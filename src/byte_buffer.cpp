#include "fedcaf/byte_buffer.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>

namespace fedcaf {

namespace {

std::byte* checked(void* p, size_t size) {
  if (p == nullptr && size > 0)
    throw std::bad_alloc{};
  return static_cast<std::byte*>(p);
}

size_t page_size() {
  static const auto n = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  return n;
}

} // namespace

void byte_buffer::deleter::operator()(std::byte* p) const {
  if (shared)
    return; // freed with the last copy of `shared`
  if (mapped > 0) {
    ::munmap(base, mapped);
    if (fd >= 0)
      ::close(fd);
  } else
    std::free(p);
}

byte_buffer byte_buffer::zeroed(size_t size) {
  return {checked(std::calloc(size == 0 ? 1 : size, 1), size), size};
}

byte_buffer byte_buffer::uninitialized(size_t size) {
  // 64-byte alignment keeps float loads of every chunk aligned.
  auto rounded = (size + 63) / 64 * 64;
  return {checked(std::aligned_alloc(64, rounded == 0 ? 64 : rounded), size),
          size};
}

result<byte_buffer> byte_buffer::map_file(const std::string& path,
                                          size_t offset, size_t size) {
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0)
    return error{errc::io_error, path + ": " + std::strerror(errno)};
  auto start = offset / page_size() * page_size();
  auto length = offset - start + size;
  void* p = ::mmap(nullptr, length == 0 ? 1 : length, PROT_READ | PROT_WRITE,
                   MAP_SHARED, fd, static_cast<off_t>(start));
  auto saved = errno;
  if (p == MAP_FAILED) {
    ::close(fd);
    return error{errc::io_error, path + ": mmap: " + std::strerror(saved)};
  }
  auto* base = static_cast<std::byte*>(p);
  return byte_buffer{base + (offset - start), size,
                     deleter{base, length == 0 ? 1 : length, fd, start}};
}

result<byte_buffer> byte_buffer::anonymous(size_t size) {
  auto length = size == 0 ? 1 : size;
  void* p = ::mmap(nullptr, length, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    return error{errc::io_error, std::string{"mmap of "} +
                                     std::to_string(size) +
                                     " bytes: " + std::strerror(errno)};
  auto* base = static_cast<std::byte*>(p);
  deleter d{base, length, -1, 0};
  d.anonymous = true;
  return byte_buffer{base, size, d};
}

void byte_buffer::discard_pages(size_t offset, size_t size) const {
  const auto& d = data_.get_deleter();
  if (!d.anonymous || size == 0)
    return;
  auto page = page_size();
  auto first = (offset + page - 1) / page * page;
  auto last = std::min(offset + size, size_) / page * page;
  if (offset + size >= size_) // the mapping's last page is this range's
    last = (size_ + page - 1) / page * page;
  if (last > first)
    ::madvise(d.base + first, last - first, MADV_DONTNEED);
}

byte_buffer byte_buffer::share() {
  auto& d = data_.get_deleter();
  if (!d.shared && data_) {
    auto plain = d; // frees the memory once, from the last owner
    // Let go first: a failed control block frees it through `plain`.
    auto* p = data_.release();
    d.shared = std::shared_ptr<std::byte>{p, plain};
    data_.reset(p);
  }
  return byte_buffer{data_.get(), size_, d};
}

std::string byte_buffer::mapped_file() const {
  const auto& d = data_.get_deleter();
  if (!file_backed() || data_.get() != d.base)
    return {};
  auto start = reinterpret_cast<uintptr_t>(d.base);
  auto end = start + (d.mapped + page_size() - 1) / page_size() * page_size();
  char path[96];
  std::snprintf(path, sizeof path, "/proc/self/map_files/%lx-%lx",
                static_cast<unsigned long>(start),
                static_cast<unsigned long>(end));
  return path;
}

void byte_buffer::release(size_t offset, size_t size) const {
  if (!file_backed() || size == 0)
    return;
  // Whole pages around the range: safe for a shared file mapping, whose
  // pages are never lost, only read back on the next access.
  auto* begin = data_.get() + offset;
  auto* base = data_.get_deleter().base;
  auto first = static_cast<size_t>(begin - base) / page_size() * page_size();
  const auto& d = data_.get_deleter();
  auto last = std::min(static_cast<size_t>(begin - base) + size, d.mapped);
  // Unmapping moves the pages' dirty bits to the page cache; where asked,
  // their writeback then starts at once: a later fsync (a checkpoint's copy
  // of this file) finds little left to wait for.
  ::madvise(base + first, last - first, MADV_DONTNEED);
  if (d.fd >= 0 && d.write_back)
    ::sync_file_range(d.fd, static_cast<off_t>(d.file_start + first),
                      static_cast<off_t>(last - first), SYNC_FILE_RANGE_WRITE);
}

void copy_released(const byte_buffer& from, byte_buffer& to) {
  constexpr size_t piece = size_t{64} << 20;
  for (size_t at = 0; at < from.size(); at += piece) {
    auto n = std::min(piece, from.size() - at);
    std::memcpy(to.data() + at, from.data() + at, n);
    from.release(at, n);
    to.release(at, n);
  }
}

spill_file::~spill_file() {
  if (fd_ >= 0)
    ::close(fd_);
}

std::string spill_dir() {
  const char* env = std::getenv("TMPDIR");
  return env && *env ? env : "/var/tmp";
}

result<void> spill_room(uint64_t bytes, const std::string& what) {
  auto dir = spill_dir();
  struct statvfs fs {};
  if (::statvfs(dir.c_str(), &fs) != 0)
    return error{errc::io_error, what + ": its spill folder " + dir +
                                     " (TMPDIR): " + std::strerror(errno)};
  auto room = static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
  if (room >= bytes)
    return {};
  auto mib = [](uint64_t b) { return std::to_string(b >> 20) + " MiB"; };
  return error{errc::io_error, what + " may write up to " + mib(bytes) +
                                   " to " + dir + " (TMPDIR), which has " +
                                   mib(room) +
                                   " free: set TMPDIR to a folder with room"};
}

void spill_file::write(std::span<const std::byte> bytes, uint64_t offset) {
  if (!failure_.empty())
    return;
  if (fd_ < 0) {
    auto dir = spill_dir();
    fd_ = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd_ < 0) {
      failure_ = "a file under " + dir + ": " + std::strerror(errno);
      return;
    }
  }
  while (!bytes.empty()) {
    auto n =
        ::pwrite(fd_, bytes.data(), bytes.size(), static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      failure_ = std::string{"writing: "} +
                 (n < 0 ? std::strerror(errno) : "no space");
      return;
    }
    bytes = bytes.subspan(static_cast<size_t>(n));
    offset += static_cast<uint64_t>(n);
  }
}

result<void> spill_file::read(std::span<std::byte> out, uint64_t offset) const {
  while (!out.empty()) {
    auto n = fd_ < 0 ? -1
                     : ::pread(fd_, out.data(), out.size(),
                               static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return error{errc::io_error,
                   std::string{"reading: "} +
                       (n < 0 ? std::strerror(errno) : "the file is short")};
    out = out.subspan(static_cast<size_t>(n));
    offset += static_cast<uint64_t>(n);
  }
  return {};
}

result<void> spill_file::status() const {
  if (failure_.empty())
    return {};
  return error{errc::io_error, failure_};
}

} // namespace fedcaf
