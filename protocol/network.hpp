#pragma once
// Sockets for the gateways: parsing host:port, listening and connecting with
// a time limit. No CAF: the gateways (actors/gateway.hpp) hand the sockets
// to CAF's multiplexer. Thread-safety: free functions; safe anywhere.

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "fedcaf/error.hpp"

namespace fedcaf {

struct endpoint {
  std::string host;
  uint16_t port = 0;
};

/// Parses "host:port" or "[v6-address]:port".
result<endpoint> parse_endpoint(const std::string& uri);

/// A listening TCP socket and the port it is bound to.
struct listener {
  int fd = -1;
  uint16_t port = 0;
};

/// Binds and listens at `at` (port 0: any). Returns an error that says what
/// to do iff the address cannot be bound (port in use, no such address).
result<listener> listen_at(const endpoint& at);

/// Connects to `at`, giving up after `timeout`. Returns a connected,
/// non-blocking socket with TCP_NODELAY, or an error naming the address
/// and the reason (refused, unreachable, timed out).
result<int> connect_to(const endpoint& at, std::chrono::milliseconds timeout);

/// Returns "host:port" of the peer of a connected socket, or "an unknown
/// peer".
std::string peer_address(int fd);

/// What a server's first bytes `first` say where they cannot open a fedcaf
/// stream, quoted for one line ("'HTTP/1.1 400 Bad Request'"); nullopt
/// where they can. A fedcaf frame's bytes 2-11 are zero (a small request
/// id, no flags, one segment); a TLS server's first record is a handshake
/// (22) or an alert (21). Where TLS is expected, an answer that is not
/// text (a plain fedcaf server's frame) is left to the TLS handshake, whose
/// error names the use_ssl mismatch.
std::optional<std::string> foreign_answer(std::span<const char> first,
                                          bool tls);

} // namespace fedcaf
