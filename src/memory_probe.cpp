#include "fedcaf/memory_probe.hpp"

#include <malloc.h>

#include <cstdio>
#include <cstring>
#include <string>

namespace fedcaf {

memory_sample sample_memory() {
  return sample_memory(0).value_or(memory_sample{});
}

std::optional<memory_sample> sample_memory(int pid) {
  memory_sample s;
  auto path = pid == 0 ? std::string{"/proc/self/status"}
                       : "/proc/" + std::to_string(pid) + "/status";
  std::FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr)
    return std::nullopt;
  char line[256];
  while (std::fgets(line, sizeof line, f)) {
    unsigned long long kib = 0;
    if (std::sscanf(line, "VmRSS: %llu kB", &kib) == 1)
      s.rss_bytes = kib * 1024;
    else if (std::sscanf(line, "VmHWM: %llu kB", &kib) == 1)
      s.peak_rss_bytes = kib * 1024;
    else if (std::sscanf(line, "RssAnon: %llu kB", &kib) == 1)
      s.anon_bytes = kib * 1024;
    else if (std::sscanf(line, "RssFile: %llu kB", &kib) == 1)
      s.file_bytes = kib * 1024;
  }
  std::fclose(f);
  return s;
}

void tune_malloc_for_streams() {
  ::mallopt(M_ARENA_MAX, 1);
  ::mallopt(M_MMAP_THRESHOLD, 32 << 20);
  ::mallopt(M_TRIM_THRESHOLD, 64 << 20);
}

} // namespace fedcaf
