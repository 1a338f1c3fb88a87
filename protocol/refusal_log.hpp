#pragma once
// Bad input from peers is refused with a typed error frame sent back,
// counted, and logged; it never crashes a node. One counter is shared by the
// server-side actors so the report counts every refusal. Thread-safety: the
// counter is atomic; a refusal_log may be copied into any actor.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "fedcaf/error.hpp"
#include "fedcaf/log.hpp"
#include "messages/codec.hpp"

namespace fedcaf {

using refusal_counter = std::shared_ptr<std::atomic<uint64_t>>;

/// Returns a counter starting at zero.
inline refusal_counter make_refusal_counter() {
  return std::make_shared<std::atomic<uint64_t>>(0);
}

/// At most `limit` events per `period`, counted in fixed periods: a peer
/// past it is refused (too_many_requests). Reads no clock: the actor passes
/// its time. Thread-safety: one actor's.
class event_limit {
public:
  using time_point = std::chrono::steady_clock::time_point;

  event_limit(uint32_t limit, std::chrono::seconds period)
      : limit_(limit), period_(period) {}

  /// Counts one event at `now`; returns false iff it is past the limit.
  bool allow(time_point now) {
    if (now - started_ > period_) {
      started_ = now;
      count_ = 0;
    }
    return ++count_ <= limit_;
  }

  /// "more than <limit> <what> in <period> s", for the refusal.
  std::string exceeded(const std::string& what) const {
    return "more than " + std::to_string(limit_) + " " + what + " in " +
           std::to_string(period_.count()) + " s";
  }

private:
  uint32_t limit_;
  std::chrono::seconds period_;
  time_point started_{};
  uint32_t count_ = 0;
};

class refusal_log {
public:
  /// `who` names the refusing actor in log lines. A null counter gets one of
  /// its own.
  refusal_log(std::string who, refusal_counter counter)
      : who_(std::move(who)),
        counter_(counter ? std::move(counter) : make_refusal_counter()) {}

  /// Counts and logs `e`, and returns the error frame that answers the peer.
  msg::frame refuse(const error& e) const {
    counter_->fetch_add(1, std::memory_order_relaxed);
    log_line(log_level::warning, who_, "refused: " + to_string(e));
    return msg::encode(e);
  }

  /// As refuse(e), the log line naming the client it refuses (the answer
  /// is the same).
  msg::frame refuse(const error& e, const std::string& client) const {
    counter_->fetch_add(1, std::memory_order_relaxed);
    log_line(log_level::warning, who_,
             "refused " + client + ": " + to_string(e));
    return msg::encode(e);
  }

  /// As refuse(e), with its log line iff `logged` (a limiter that counts
  /// refusals and logs once per burst says so).
  msg::frame refuse_logged_if(const error& e, bool logged) const {
    if (logged)
      return refuse(e);
    counter_->fetch_add(1, std::memory_order_relaxed);
    return msg::encode(e);
  }

  uint64_t count() const { return counter_->load(std::memory_order_relaxed); }

private:
  std::string who_;
  refusal_counter counter_;
};

} // namespace fedcaf
