#include "protocol/relay_gate.hpp"

#include <utility>

namespace fedcaf {

bool relay_gate::start(uint32_t round, std::vector<std::string> chosen) {
  if (!ready_) {
    held_ = held_start{round, std::move(chosen)};
    return false;
  }
  ready_ = false;
  open_ = true;
  return true;
}

relay_gate::released relay_gate::model_in() {
  ready_ = true;
  released out;
  if (auto held = std::exchange(held_, std::nullopt))
    out.start = std::move(held); // start() opens it now
  else
    out.choose_again = take_waiting_sit_out();
  return out;
}

relay_gate::sitting relay_gate::sit_out(uint32_t round) {
  if (!open_ && !ready_) {
    held_.reset();
    waiting_sit_out_ = round;
    return sitting::waits;
  }
  auto was_open = std::exchange(open_, false);
  ready_ = false;
  return was_open ? sitting::now_open_round : sitting::now;
}

std::optional<uint32_t> relay_gate::take_waiting_sit_out() {
  return std::exchange(waiting_sit_out_, std::nullopt);
}

} // namespace fedcaf
