#pragma once
// Bad input from peers is refused with a typed error frame sent back,
// counted, and logged; it never crashes a node. One counter is shared by the
// server-side actors so the report counts every refusal. Thread-safety: the
// counter is atomic; a refusal_log may be copied into any actor.

#include <atomic>
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
    log_line(who_, "refused: " + to_string(e));
    return msg::encode(e);
  }

  uint64_t count() const { return counter_->load(std::memory_order_relaxed); }

private:
  std::string who_;
  refusal_counter counter_;
};

} // namespace fedcaf
