#pragma once
// Reads a process's memory from the kernel (/proc/<pid>/status), and sets
// up malloc for a process that streams chunk frames.
// Thread-safety: reentrant, except tune_malloc_for_streams.

#include <cstdint>
#include <optional>

namespace fedcaf {

struct memory_sample {
  uint64_t rss_bytes = 0;      ///< VmRSS
  uint64_t peak_rss_bytes = 0; ///< VmHWM: the high-water mark
  uint64_t anon_bytes = 0;     ///< RssAnon
  uint64_t file_bytes = 0;     ///< RssFile
};

/// Returns the current sample of process `pid` (0: this process); fields
/// the kernel does not report stay 0. Returns nullopt iff the process is
/// gone.
std::optional<memory_sample> sample_memory(int pid);

/// Returns the current sample of this process.
memory_sample sample_memory();

/// Sets malloc up for a process whose chunk frames (about chunk_bytes each)
/// are allocated on one thread and freed on another, many times a second:
/// one arena, so a freed frame's memory is reused by the next frame instead
/// of lingering in another thread's arena (the server's memory then grows
/// by about what its clients have in flight: tests/perf/memory_matrix.sh);
/// frames up to 32 MiB from the heap, never mmap'd; and freed memory kept
/// (up to 64 MiB) rather than handed back to the kernel after each frame,
/// which would fault the same pages in again for the next one (in a VM,
/// page faults cost more than the copies: tests/perf/stream_bench). Peak
/// memory is unchanged: what is kept is what the process used before.
/// Call before any thread starts.
void tune_malloc_for_streams();

} // namespace fedcaf
