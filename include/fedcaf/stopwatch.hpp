#pragma once
// Elapsed wall time on the monotonic clock. Thread-safety: pure functions.

#include <chrono>

namespace fedcaf {

using steady_clock = std::chrono::steady_clock;

/// Returns the wall-clock time in seconds since the Unix epoch (comparable
/// between processes on one host).
inline double unix_seconds() {
  return std::chrono::duration<double>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// Returns the seconds elapsed since `start`.
inline double seconds_since(steady_clock::time_point start) {
  return std::chrono::duration<double>(steady_clock::now() - start).count();
}

} // namespace fedcaf
