#pragma once
// Reads this process's memory from the kernel (/proc/self/status).
// Thread-safety: reentrant.

#include <cstdint>

namespace fedcaf {

struct memory_sample {
  uint64_t rss_bytes = 0;      ///< VmRSS
  uint64_t peak_rss_bytes = 0; ///< VmHWM: the high-water mark
  uint64_t anon_bytes = 0;     ///< RssAnon
  uint64_t file_bytes = 0;     ///< RssFile
};

/// Returns the current sample; fields the kernel does not report stay 0.
memory_sample sample_memory();

} // namespace fedcaf
