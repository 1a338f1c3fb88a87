#include "fedcaf/credit_window.hpp"

#include <algorithm>
#include <cassert>

namespace fedcaf {

uint64_t credit_window::take() {
  assert(can_send());
  auto seq = next_++;
  peak_ = std::max(peak_, in_flight());
  return seq;
}

result<void> credit_window::ack(uint64_t seq) {
  FEDCAF_REQUIRE(seq == acked_ && acked_ < next_, errc::bad_sequence, seq,
                 acked_, next_);
  ++acked_;
  return {};
}

} // namespace fedcaf
