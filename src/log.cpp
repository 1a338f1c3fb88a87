#include "fedcaf/log.hpp"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>

namespace fedcaf {

void log_line(std::string_view who, std::string_view message) {
  static std::mutex mtx; // guards stderr only; no state is shared
  auto now = std::chrono::system_clock::now();
  auto t = std::chrono::system_clock::to_time_t(now);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                now.time_since_epoch())
                .count() %
            1000;
  std::tm tm{};
  localtime_r(&t, &tm);
  std::lock_guard<std::mutex> guard{mtx};
  std::fprintf(stderr, "%02d:%02d:%02d.%03d %.*s: %.*s\n", tm.tm_hour,
               tm.tm_min, tm.tm_sec, static_cast<int>(ms),
               static_cast<int>(who.size()), who.data(),
               static_cast<int>(message.size()), message.data());
}

} // namespace fedcaf
