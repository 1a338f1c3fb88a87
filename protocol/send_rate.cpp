#include "protocol/send_rate.hpp"

namespace fedcaf {

void send_rate::set_can_send(bool can_send, time_point now) {
  sendable_ = sendable(now);
  since_ = now;
  can_send_ = can_send;
}

void send_rate::moved(uint64_t bytes, time_point now) {
  total_ += bytes;
  auto at = sendable(now);
  marks_.push_back({at, total_});
  // Keep the last mark at or before the window's start: total_at needs it.
  while (marks_.size() > 1 && marks_[1].at + window_ <= at)
    marks_.pop_front();
}

send_rate::duration send_rate::sendable(time_point now) const {
  return can_send_ && now > since_ ? sendable_ + (now - since_) : sendable_;
}

uint64_t send_rate::total_at(duration at) const {
  uint64_t total = 0;
  for (const auto& m : marks_) {
    if (m.at > at)
      break;
    total = m.total;
  }
  return total;
}

std::optional<double> send_rate::rate(time_point now) const {
  auto at = sendable(now);
  if (window_ <= duration{} || at < window_)
    return std::nullopt;
  auto bytes = total_ - total_at(at - window_);
  return static_cast<double>(bytes) /
         std::chrono::duration<double>(window_).count();
}

} // namespace fedcaf
