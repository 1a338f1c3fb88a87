#pragma once
// A few threads kept for work cut into parts: run(n, f) calls f(0) ... f(n -
// 1) on the pool's threads and the caller's, and returns when every call
// has returned. Its threads sleep between runs (a condition variable), so
// a run costs a wake-up, not a thread's start: small enough for one chunk
// of a fold (a fraction of a millisecond).
//
// Thread-safety: one run at a time (run() from one thread, or callers'
// own lock); f is called concurrently for different parts and must be
// safe to, and must not throw.

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace fedcaf {

class work_pool {
public:
  /// A pool of `threads` in all, the caller's included (threads - 1 of
  /// its own; 0 or 1: none, every run on the caller's thread).
  explicit work_pool(unsigned threads);
  ~work_pool();
  work_pool(const work_pool&) = delete;
  work_pool& operator=(const work_pool&) = delete;

  /// The threads a run uses, the caller's included.
  unsigned threads() const {
    return static_cast<unsigned>(helpers_.size()) + 1;
  }

  /// Calls f(i) once for each i in [0, parts), on up to threads() threads,
  /// the caller's among them; returns when all have returned.
  void run(unsigned parts, const std::function<void(unsigned)>& f);

private:
  void serve();
  /// Takes and does parts of the current run until none is left.
  void take_parts();

  std::vector<std::thread> helpers_;
  std::mutex mutex_;
  std::condition_variable wake_; ///< a run started, or the pool ends
  std::condition_variable done_; ///< the last part of a run returned
  const std::function<void(unsigned)>* job_ = nullptr;
  unsigned parts_ = 0;
  unsigned next_ = 0;     ///< the next part to take
  unsigned finished_ = 0; ///< parts returned
  uint64_t run_ = 0;      ///< runs started
  bool stop_ = false;
};

/// Where a job may be cut into parts: a pool, and at most how many parts
/// (null or 1: the caller's thread alone).
struct work_split {
  work_pool* pool = nullptr;
  unsigned parts = 1;

  /// Calls f(p) for each of n parts, on the pool if there is one (then
  /// as work_pool::run), else in order on this thread.
  template <class F> void run(unsigned n, F&& f) const {
    if (pool && n > 1)
      pool->run(n, f);
    else
      for (unsigned p = 0; p < n; ++p)
        f(p);
  }
};

} // namespace fedcaf
