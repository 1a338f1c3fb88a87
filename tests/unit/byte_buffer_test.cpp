// The spill folder's room, checked before a window-mode relay's first
// round: a folder too small is named with its room and what is needed. A
// mapped file's writeback, started only where a checkpoint will copy it.

#include <doctest/doctest.h>

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include "fedcaf/byte_buffer.hpp"

using namespace fedcaf;

TEST_CASE("spill_room: ok where the folder has room, else it names the "
          "folder, its room and the need") {
  CHECK(spill_room(1, "a test"));
  auto full = spill_room(uint64_t{1} << 62, "a window-mode relay");
  REQUIRE_FALSE(full);
  CHECK(full.err().code == errc::io_error);
  CHECK(full.err().message.find("a window-mode relay may write up to") == 0);
  CHECK(full.err().message.find(spill_dir()) != std::string::npos);
  CHECK(full.err().message.find("set TMPDIR") != std::string::npos);
}

namespace {

/// The pages of [0, bytes) of `fd` that are dirty in the page cache, by
/// cachestat(2) (Linux 6.5; not every libc wraps it); nullopt where the
/// kernel has no such call.
std::optional<uint64_t> dirty_pages(int fd, uint64_t bytes) {
  struct {
    uint64_t off, len;
  } range{0, bytes};
  struct {
    uint64_t cache, dirty, writeback, evicted, recently_evicted;
  } stat{};
  if (::syscall(451 /* cachestat, x86-64 and arm64 */, fd, &range, &stat, 0) !=
      0)
    return std::nullopt;
  return stat.dirty;
}

} // namespace

TEST_CASE("a mapped file's released pages stay dirty in the page cache "
          "unless its writeback was asked for, and then are handed to the "
          "disk at once") {
  struct statfs fs {};
  REQUIRE(::statfs(spill_dir().c_str(), &fs) == 0);
  if (fs.f_type == TMPFS_MAGIC) { // memory: no writeback to start
    MESSAGE("skipped: " << spill_dir() << " is a tmpfs");
    return;
  }
  constexpr uint64_t bytes = 8 << 20;
  auto path =
      spill_dir() + "/fedcaf-writeback-test-" + std::to_string(::getpid());
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  REQUIRE(fd >= 0);
  ::unlink(path.c_str());
  REQUIRE(::ftruncate(fd, bytes) == 0);
  auto mapped =
      byte_buffer::map_file("/proc/self/fd/" + std::to_string(fd), 0, bytes);
  REQUIRE(mapped);
  auto& model = *mapped;
  auto round = [&](std::byte value) {
    std::memset(model.data(), static_cast<int>(value), bytes);
    model.release(0, bytes);
    return dirty_pages(fd, bytes);
  };
  auto kept = round(std::byte{1});
  if (!kept) {
    MESSAGE("skipped: no cachestat(2) in this kernel");
    ::close(fd);
    return;
  }
  // A flusher of the kernel's own writes pages back only after 30 s dirty,
  // or far beyond 8 MiB dirty: these stay (each round rewrites them).
  CHECK(*kept == bytes / 4096);
  auto shared = model.share();
  model.write_back_released(); // a checkpoint's source
  auto handed = round(std::byte{2});
  CHECK(*handed == 0);
  // The copy made before keeps its own setting.
  std::memset(shared.data(), 3, bytes);
  shared.release(0, bytes);
  CHECK(*dirty_pages(fd, bytes) == bytes / 4096);
  ::close(fd);
}
