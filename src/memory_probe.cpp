#include "fedcaf/memory_probe.hpp"

#include <cstdio>
#include <cstring>

namespace fedcaf {

memory_sample sample_memory() {
  memory_sample s;
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr)
    return s;
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

} // namespace fedcaf
