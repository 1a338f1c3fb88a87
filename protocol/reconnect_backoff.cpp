#include "protocol/reconnect_backoff.hpp"

#include <algorithm>

namespace fedcaf {

bool retries_hello(const error& refusal) {
  return refusal.code == errc::too_many_requests ||
         (refusal.code == errc::unknown_client &&
          refusal.message.ends_with(already_registered));
}

std::string reconnect_backoff::lost(time_point now, const std::string& why) {
  lost_at_ = now;
  delays_.restart();
  return "lost the server (" + why + "); reconnecting to " + server_;
}

result<reconnect_backoff::milliseconds>
reconnect_backoff::next_delay(time_point now, const std::string& why) {
  if (now - lost_at_ > give_up_after_)
    return error{errc::disconnected,
                 "the server at " + server_ + " was not back within " +
                     std::to_string(give_up_after_.count()) + " ms: " + why};
  return delays_.next();
}

} // namespace fedcaf
