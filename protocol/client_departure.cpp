#include "protocol/client_departure.hpp"

#include <utility>

namespace fedcaf {

client_departure::client_departure(
    std::shared_ptr<const departure> leaving,
    std::shared_ptr<const std::atomic<bool>> done_heard)
    : leaving_(std::move(leaving)), done_heard_(std::move(done_heard)) {}

bool client_departure::may_say(bool reachable) {
  if (said_ || !reachable)
    return false;
  said_ = true;
  return true;
}

std::optional<msg::goodbye> client_departure::noted() const {
  return leaving_ ? leaving_->noted() : std::nullopt;
}

std::optional<msg::goodbye> client_departure::leaves_instead() const {
  return left_ ? std::nullopt : noted();
}

error client_departure::left(const std::optional<msg::goodbye>& why) {
  left_ = true;
  return {errc::cancelled, "left the run (" +
                               (why ? msg::said_why(*why) : "goodbye") + "): " +
                               (said_ ? "said goodbye to the server"
                                      : "no goodbye said (not connected)")};
}

bool client_departure::done_coming(const error& e) const {
  return !leaves_instead() && e.code == errc::cancelled && done_heard_ &&
         done_heard_->load();
}

std::optional<msg::goodbye> client_departure::giving_up(const error& e) const {
  if (run_over_ || leaves_instead())
    return std::nullopt;
  return msg::goodbye_for(e);
}

std::optional<msg::goodbye> client_departure::exception(const error& e) const {
  if (run_over_)
    return std::nullopt;
  return msg::goodbye{msg::goodbye_reason::user_exception, to_string(e)};
}

} // namespace fedcaf
