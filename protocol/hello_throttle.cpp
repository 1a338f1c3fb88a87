#include "protocol/hello_throttle.hpp"

#include <algorithm>

namespace fedcaf {

std::string host_of(const std::string& address) {
  auto colon = address.rfind(':');
  return colon == std::string::npos ? address : address.substr(0, colon);
}

hello_throttle::milliseconds
hello_throttle::backoff_left(const std::string& host, time_point now) {
  auto it = hosts_.find(host);
  if (it == hosts_.end() || now >= it->second.blocked_until)
    return milliseconds{0};
  ++it->second.refused;
  return std::chrono::ceil<milliseconds>(it->second.blocked_until - now);
}

hello_throttle::verdict hello_throttle::failed(const std::string& host,
                                               time_point now) {
  auto& e = touch(host);
  auto quiet_since = std::max(e.last_failure, e.blocked_until);
  if (e.next_backoff.count() == 0 || now - quiet_since > limits_.window)
    e.next_backoff = limits_.first_backoff; // a quiet window: start again
  // A window starts at the first failure after a quiet window (its
  // refusal is logged) or after a back-off (it is not: the burst's line
  // says it all).
  bool first = e.since == time_point{} || now - e.since > limits_.window;
  if (first || e.failures == 0) {
    e.failures = 0;
    e.since = now;
  }
  e.last_failure = now;
  if (++e.failures < limits_.failures)
    return {first, std::nullopt};
  auto backoff = e.next_backoff;
  e.blocked_until = now + backoff;
  e.next_backoff = std::min(backoff * 2, limits_.max_backoff);
  e.failures = 0;
  auto line = host + ": " + std::to_string(limits_.failures) +
              " failed Hellos within " +
              std::to_string(limits_.window.count()) +
              " s; its failing Hellos are refused unlogged for " +
              std::to_string(backoff.count()) + " ms";
  if (e.refused > 0)
    line +=
        " (" + std::to_string(e.refused) + " refused during its last back-off)";
  e.refused = 0;
  return {first, line};
}

hello_throttle::entry& hello_throttle::touch(const std::string& host) {
  auto it = hosts_.find(host);
  if (it != hosts_.end()) {
    order_.splice(order_.begin(), order_, it->second.order);
    return it->second;
  }
  if (hosts_.size() >= std::max<size_t>(limits_.max_hosts, 1)) {
    hosts_.erase(order_.back());
    order_.pop_back();
  }
  order_.push_front(host);
  auto& e = hosts_[host];
  e.order = order_.begin();
  return e;
}

} // namespace fedcaf
