#pragma once
// The limits a gateway enforces on its connection, either side, and the
// tick of its timers derived from them. actors/gateway.hpp, the gateways'
// public face, hands them to listen, dial and spawn_dialer; the server
// side's decisions on them are connection_admission's. Plain values: no
// CAF, no clock. Thread-safety: values, copied into each gateway.

#include <algorithm>
#include <chrono>
#include <cstdint>

namespace fedcaf {

/// The limits a gateway enforces, never trusting the peer.
struct gateway_limits {
  /// Largest frame, envelope included (grpc_configs.max_message_size).
  uint64_t max_frame_bytes = 16 << 20;
  /// Largest frame before the peer is welcomed (a Hello).
  uint64_t max_hello_bytes = 64 << 10;
  /// Fetches in flight, and chunks or credits in flight, per connection.
  uint32_t window = 4;
  /// TLS handshake and Hello must be done within this.
  std::chrono::milliseconds handshake_timeout{10000};
  /// Each side sends a heartbeat this often ...
  std::chrono::milliseconds heartbeat{5000};
  /// ... and closes a connection on which nothing arrived, or whose
  /// pending output did not move, for this long.
  std::chrono::milliseconds connection_timeout{30000};
  /// Connections not yet welcomed, at once (server); one more makes the
  /// oldest give way.
  uint32_t max_unauthenticated = 64;
  /// Refusals logged (and plaintext peers answered) per peer host every
  /// 10 s (server; protocol/log_pacer.hpp).
  uint32_t refusal_log_lines = 10;
};

/// How long a closing connection may take to send what it still holds
/// (and a refused client gateway waits for its refusal to be asked for).
constexpr auto close_grace = std::chrono::seconds{2};

/// Returns the tick of a gateway's timers: a quarter of the shortest of
/// `l`'s heartbeat, connection and handshake timeouts, within 20 ms to 1 s
/// (often enough for the shortest limit).
inline std::chrono::milliseconds tick_interval(const gateway_limits& l) {
  auto t =
      std::min({l.heartbeat, l.connection_timeout, l.handshake_timeout}) / 4;
  return std::clamp(t, std::chrono::milliseconds{20},
                    std::chrono::milliseconds{1000});
}

} // namespace fedcaf
