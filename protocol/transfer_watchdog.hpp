#pragma once
// Whether a transfer is stuck: a client's download or upload fails (or,
// remote, reconnects) only when no chunk or credit has moved for the idle
// timeout, however long the whole transfer takes. It reads no clock: the
// client actor passes the time in on each event and on its timer's ticks.
// Thread-safety: none; owned by the client actor.

#include <chrono>
#include <optional>
#include <string>

namespace fedcaf {

class transfer_watchdog {
public:
  using time_point = std::chrono::steady_clock::time_point;

  /// A transfer is stuck once nothing has moved for longer than
  /// `idle_timeout`.
  explicit transfer_watchdog(std::chrono::milliseconds idle_timeout)
      : idle_timeout_(idle_timeout) {}

  /// A transfer starts at `now`.
  void start(time_point now) {
    active_ = true;
    last_moved_ = now;
  }
  /// A chunk or a credit moved at `now`.
  void moved(time_point now) { last_moved_ = now; }
  /// No transfer is under way.
  void stop() { active_ = false; }
  /// Returns true iff a transfer is under way.
  bool active() const { return active_; }

  /// Returns why the transfer is stuck iff one is under way and nothing
  /// has moved since longer than the idle timeout before `now`.
  std::optional<std::string> stuck(time_point now) const {
    if (!active_ || now - last_moved_ <= idle_timeout_)
      return std::nullopt;
    return "no chunk or credit moved for " +
           std::to_string(idle_timeout_.count()) + " ms";
  }

private:
  std::chrono::milliseconds idle_timeout_;
  bool active_ = false;
  time_point last_moved_{};
};

} // namespace fedcaf
