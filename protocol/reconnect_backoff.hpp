#pragma once
// When a client that lost its server tries again: the first attempt at
// once, then after 100 ms, doubling up to 2 s between attempts
// (retry_delays, which a client's first connection waits by too), and
// never once the server has been gone longer than the client waits for
// it. It reads no clock: the client actor passes the time in.
// Thread-safety: none; owned by the client actor.

#include <algorithm>
#include <chrono>
#include <string>
#include <string_view>

#include "fedcaf/error.hpp"

namespace fedcaf {

/// How a server refuses a Hello naming a client whose connection it still
/// sees alive (client_registry). The process that says Hello may be that
/// client restarted before its old connection was seen lost: it tries again
/// (`retries_hello`) rather than giving up.
inline constexpr std::string_view already_registered = "already registered";

/// Returns true iff a refused Hello is worth trying again, with the back-off
/// below: the server throttled it (too_many_requests), or it still sees the
/// client's old connection (unknown_client, `already_registered`).
bool retries_hello(const error& refusal);

/// The waits between attempts to reach a server: 100 ms, doubling up to
/// 2 s (a client's first connection and its reconnections alike).
class retry_delays {
public:
  using milliseconds = std::chrono::milliseconds;
  static constexpr milliseconds first_delay{100};
  static constexpr milliseconds max_delay{2000};

  /// The next wait (each twice the one before, up to max_delay).
  milliseconds next() {
    auto wait = delay_;
    delay_ = std::min(delay_ * 2, max_delay);
    return wait;
  }
  /// The waits start again from the first.
  void restart() { delay_ = first_delay; }
  /// The wait next() gives next.
  milliseconds peek() const { return delay_; }

private:
  milliseconds delay_ = first_delay;
};

class reconnect_backoff {
public:
  using time_point = std::chrono::steady_clock::time_point;
  using milliseconds = std::chrono::milliseconds;

  /// Gives up on the server at `server` ("host:port") once it has been gone
  /// longer than `give_up_after`.
  reconnect_backoff(milliseconds give_up_after, std::string server)
      : give_up_after_(give_up_after), server_(std::move(server)) {}

  /// The server was lost at `now` for `why`: the delays start again from
  /// the first. Returns the line to log.
  std::string lost(time_point now, const std::string& why);

  /// An attempt failed at `now` for `why`. Returns how long to wait before
  /// the next, or an error (disconnected) iff the server has been gone
  /// longer than `give_up_after`.
  result<milliseconds> next_delay(time_point now, const std::string& why);

private:
  milliseconds give_up_after_;
  std::string server_;
  time_point lost_at_{};
  retry_delays delays_;
};

} // namespace fedcaf
