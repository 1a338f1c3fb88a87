#pragma once
// Reads a process's memory from the kernel (/proc/<pid>/status).
// Thread-safety: reentrant.

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

} // namespace fedcaf
