#pragma once
// When a connection's bytes last moved, as its gateway's wire_link saw
// them: the facts both gateways' silence and stall deadlines are judged on,
// at a time the gateway passes in. Reads no clock.
// Thread-safety: a value, made by one gateway for itself.

#include <chrono>

namespace fedcaf {

struct link_activity {
  using time_point = std::chrono::steady_clock::time_point;
  using duration = std::chrono::steady_clock::duration;

  time_point last_input{};     ///< the last bytes from the peer (or the start)
  time_point last_output{};    ///< the last write, or when output waited first
  bool output_pending = false; ///< queued bytes the socket has not written
  bool secure = false; ///< the TLS handshake is done, or there is no TLS

  /// Returns true iff nothing arrived for longer than `t` before `now`.
  bool silent_for(duration t, time_point now) const {
    return now - last_input > t;
  }

  /// Returns true iff output is pending and none of it moved for longer
  /// than `t` before `now` (the peer stopped reading).
  bool stalled_for(duration t, time_point now) const {
    return output_pending && now - last_output > t;
  }
};

} // namespace fedcaf
