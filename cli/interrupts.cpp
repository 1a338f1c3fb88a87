#include "interrupts.hpp"

#include <pthread.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "fedcaf/log.hpp"

namespace fedcaf::cli {

namespace {

/// Ends the watch's thread (never sent from outside the process).
constexpr int stop_watch = SIGUSR2;

/// Prints "fedcaf: <sig>: <what>" on stderr, and the same line into the
/// log file (--log-file), if any.
void say(int sig, const char* what) {
  std::fprintf(stderr, "fedcaf: %s: %s\n", signal_name(sig), what);
  log_to_file_only(log_level::warning, "fedcaf",
                   std::string{signal_name(sig)} + ": " + what);
}

} // namespace

interrupt_watch::interrupt_watch() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, stop_watch);
  pthread_sigmask(SIG_BLOCK, &set, &old_mask_);
  thread_ = std::thread([this, set] { watch(set); });
}

interrupt_watch::~interrupt_watch() {
  pthread_kill(thread_.native_handle(), stop_watch);
  thread_.join();
  pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
}

void interrupt_watch::on_interrupt(std::function<void(int)> on) {
  std::lock_guard<std::mutex> guard{mtx_};
  on_ = std::move(on);
}

void interrupt_watch::watch(sigset_t set) {
  for (;;) {
    int sig = 0;
    if (sigwait(&set, &sig) != 0 || sig == stop_watch)
      return;
    std::function<void(int)> on;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      on = on_;
    }
    if (signal_.exchange(sig) != 0 || !on) {
      say(sig, "stopping now");
      _exit(128 + sig);
    }
    say(sig, "ending the run and writing the report (again to stop at once)");
    on(sig);
  }
}

const char* signal_name(int sig) {
  switch (sig) {
  case SIGINT:
    return "SIGINT";
  case SIGTERM:
    return "SIGTERM";
  default:
    return "a signal";
  }
}

} // namespace fedcaf::cli
