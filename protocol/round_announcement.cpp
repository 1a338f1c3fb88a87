#include "protocol/round_announcement.hpp"

namespace fedcaf {

const msg::frame&
round_announcement::open(uint32_t round,
                         const std::vector<std::string>& chosen) {
  round_ = round;
  open_ = true;
  chosen_ = std::set<std::string>(chosen.begin(), chosen.end());
  resend_pending_.clear();
  frame_ = msg::encode(exchange_->announce(round_, previous_, false));
  return frame_;
}

msg::frame round_announcement::task(uint32_t round) {
  open_ = true;
  return msg::encode(exchange_->announce(round, previous_, false));
}

std::optional<msg::frame> round_announcement::resend(uint32_t round) const {
  if (round != round_ || !open_)
    return std::nullopt;
  return msg::encode(exchange_->announce(round_, previous_, true));
}

std::optional<msg::frame> round_announcement::again(const std::string& id,
                                                    bool evaluated,
                                                    const msg::frame* task) {
  if (final_pass_ && !evaluated)
    return frame_; // back during the final evaluation: asked again
  if (task && !task->empty())
    return *task;
  if (!open_ || !chosen_.count(id))
    return std::nullopt;
  if (resend_pending_.erase(id) > 0)
    return msg::encode(exchange_->announce(round_, previous_, true));
  return frame_;
}

const msg::frame& round_announcement::evaluate_only(uint32_t round) {
  open_ = false;
  final_pass_ = true;
  auto rs = exchange_->announce(round, previous_, false);
  rs.evaluate_only = true;
  frame_ = msg::encode(rs);
  return frame_;
}

} // namespace fedcaf
