#pragma once
// SIGINT and SIGTERM as a call on a thread of its own, so that a run ends
// cleanly and keeps its report. Thread-safety: on_interrupt and signal may
// be called from any thread.

#include <signal.h>

#include <atomic>
#include <functional>
#include <mutex>
#include <thread>

namespace fedcaf::cli {

/// Construct before any other thread starts: the two signals are blocked in
/// every thread created after it, and only its own thread takes them. The
/// first calls the handler (with no handler yet, the process ends at once);
/// a second one ends the process at once (exit code 128 + signal).
class interrupt_watch {
public:
  interrupt_watch();
  ~interrupt_watch();
  interrupt_watch(const interrupt_watch&) = delete;
  interrupt_watch& operator=(const interrupt_watch&) = delete;

  /// Calls `on` with the signal at the first SIGINT or SIGTERM; replaces
  /// the handler before (empty: none).
  void on_interrupt(std::function<void(int)> on);

  /// The first signal that arrived, or 0.
  int signal() const { return signal_.load(); }

private:
  void watch(sigset_t set);

  sigset_t old_mask_;
  std::mutex mtx_;
  std::function<void(int)> on_;
  std::atomic<int> signal_{0};
  std::thread thread_;
};

/// "SIGINT", "SIGTERM" or "signal N".
const char* signal_name(int sig);

} // namespace fedcaf::cli
