#pragma once
// Owned raw memory for model bytes and accumulators: heap memory
// (uninitialised or zeroed; pages are not touched on allocation, so resident
// memory grows only as the buffer is written), or a shared mapping of a file
// whose pages can be handed back to the kernel after use, so that resident
// memory does not grow with the model at all.
// Thread-safety: none; one owner at a time (move-only).

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <span>
#include <string>
#include <utility>

#include "fedcaf/error.hpp"

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

  /// Maps bytes [offset, offset + size) of the file at `path` shared and
  /// read-write. The file must exist and be at least that long. Returns an
  /// error naming the file iff it cannot be opened or mapped.
  static result<byte_buffer> map_file(const std::string& path, size_t offset,
                                      size_t size);

  /// Returns `size` bytes of zeroes in a private anonymous mapping whose
  /// pages are given back one by one (discard_pages): memory that is
  /// written and forgotten piece by piece, so that only the pieces in use
  /// are resident (a window-mode relay's model). Returns an error iff it
  /// cannot be mapped.
  static result<byte_buffer> anonymous(size_t size);

  /// An anonymous mapping (anonymous()): gives back the pages that lie
  /// wholly inside [offset, offset + size); their bytes are lost (read as
  /// zeroes after). A no-op for other memory.
  void discard_pages(size_t offset, size_t size) const;

  /// Gives the pages holding [offset, offset + size) back to the kernel, iff
  /// the buffer maps a file: they leave this process's resident set, and
  /// their content stays in the file (a later access reads it back). Where
  /// write_back_released() was asked for, the kernel also starts writing
  /// those of them that are dirty to the disk (sync_file_range, not
  /// waiting). A no-op for heap memory.
  void release(size_t offset, size_t size) const;

  /// Makes release() start the writeback of the pages it gives back, for
  /// a file that is copied and fsynced later (a checkpoint's source), so
  /// that the writeback runs beside the work rather than all at the fsync.
  /// Off by default: a scratch file's pages, rewritten every round, stay in
  /// the page cache (writing each round's to the disk cost a 1 GiB
  /// disk-mode round about 18 %). Kept by share()'s copies made after it.
  void write_back_released() { data_.get_deleter().write_back = true; }

  /// Returns a second owner of this memory: it is freed (or unmapped) when
  /// the last owner goes, and each one's release() acts on it. Owners may
  /// live on different threads; what they write to the memory needs their
  /// own synchronisation.
  byte_buffer share();

  /// Returns true iff the buffer maps a file.
  bool file_backed() const {
    const auto& d = data_.get_deleter();
    return d.mapped > 0 && !d.anonymous;
  }

  /// Returns true iff the buffer is an anonymous mapping (anonymous()).
  bool anonymous_mapping() const { return data_.get_deleter().anonymous; }

  /// A file mapping's file, even unlinked, as /proc/self/map_files names
  /// it (openable by root, or where the kernel lets the owner); "" for
  /// heap memory and for a mapping that does not start at data().
  std::string mapped_file() const;

  std::byte* data() { return data_.get(); }
  const std::byte* data() const { return data_.get(); }
  size_t size() const { return size_; }
  std::span<std::byte> bytes() { return {data(), size_}; }
  std::span<const std::byte> bytes() const { return {data(), size_}; }

private:
  /// Frees heap memory, or unmaps [base, base + mapped) of a file mapping
  /// and closes its file.
  struct deleter {
    deleter() noexcept {}
    deleter(std::byte* b, size_t m, int f, size_t start) noexcept
        : base(b), mapped(m), fd(f), file_start(start) {}
    std::byte* base{nullptr}; ///< null for heap memory
    size_t mapped{0};         ///< 0 for heap memory
    int fd{-1};               ///< the mapped file (kept for its writeback)
    size_t file_start{0};     ///< the file offset base maps
    bool anonymous{false};    ///< an anonymous mapping (no file)
    bool write_back{false};   ///< release() starts the writeback
    /// Shared memory (share()): the last owner's copy frees it.
    std::shared_ptr<std::byte> shared{};
    void operator()(std::byte* p) const;
  };
  byte_buffer(std::byte* p, size_t size) : data_(p, deleter{}), size_(size) {}
  byte_buffer(std::byte* p, size_t size, deleter d)
      : data_(p, d), size_(size) {}

  std::unique_ptr<std::byte[], deleter> data_;
  size_t size_ = 0;
};

/// Copies `from` into `to` (REQUIRES: to.size() >= from.size()) 64 MiB at
/// a time, each piece's pages released in both behind it (file mappings:
/// the copy's resident memory stays one piece, whatever the size).
void copy_released(const byte_buffer& from, byte_buffer& to);

/// Bytes kept apart at offsets of their own in an unlinked temporary file
/// under $TMPDIR (else /var/tmp), opened at the first write: they stay in
/// the page cache or on disk, never in this process's resident memory.
/// A write that fails is remembered (status), not thrown. Move-only.
/// The folder spill files go to: $TMPDIR, else /var/tmp.
std::string spill_dir();

/// Returns ok iff spill_dir() has room for `bytes` more (statvfs: the
/// blocks free to this user), else an error (io_error) naming the folder,
/// its room and what is needed. `what` says who needs it, for the message.
result<void> spill_room(uint64_t bytes, const std::string& what);

class spill_file {
public:
  spill_file() = default;
  spill_file(spill_file&& other) noexcept
      : fd_(std::exchange(other.fd_, -1)), failure_(std::move(other.failure_)) {
  }
  spill_file& operator=(spill_file&&) = delete;
  ~spill_file();

  /// Writes `bytes` at `offset`; on failure status() says why from then on.
  void write(std::span<const std::byte> bytes, uint64_t offset);
  /// Reads bytes [offset, offset + out.size()) into `out`.
  result<void> read(std::span<std::byte> out, uint64_t offset) const;
  /// Returns ok iff every write so far succeeded.
  result<void> status() const;

private:
  int fd_ = -1;
  std::string failure_;
};

} // namespace fedcaf
