#pragma once
// Elapsed wall time on the monotonic clock. Thread-safety: pure functions.

#include <chrono>

namespace fedcaf {

using steady_clock = std::chrono::steady_clock;

/// Returns the seconds elapsed since `start`.
inline double seconds_since(steady_clock::time_point start) {
  return std::chrono::duration<double>(steady_clock::now() - start).count();
}

} // namespace fedcaf
