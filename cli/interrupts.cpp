#include "interrupts.hpp"

#include <pthread.h>
#include <unistd.h>

#include <cstdio>

namespace fedcaf::cli {

namespace {

/// Ends the watch's thread (never sent from outside the process).
constexpr int stop_watch = SIGUSR2;

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
      std::fprintf(stderr, "fedcaf: %s: stopping now\n", signal_name(sig));
      _exit(128 + sig);
    }
    std::fprintf(stderr,
                 "fedcaf: %s: ending the run and writing the report (again "
                 "to stop at once)\n",
                 signal_name(sig));
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
