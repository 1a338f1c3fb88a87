#pragma once
// comm_configs: where a peer connects, TLS and tokens (grpc_configs, in
// APPFL's meaning) and this project's transfer keys (stream_configs). The
// server's and every client's own file hold one. Value types only.

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "fedcaf/error.hpp"

namespace fedcaf {

/// comm_configs.stream_configs: this project's transfer keys.
struct stream_config {
  uint64_t chunk_bytes = 1 << 20; ///< payload bytes per chunk
  uint32_t window = 4;            ///< chunks unacknowledged per stream
  double idle_timeout_s = 60;     ///< fail a stream idle this long
  /// Server: an upload stream that moved fewer bytes per second than this
  /// over the last rate_window_s of the time it could send (the server's
  /// withheld credits left out) is ended and its client leaves the round;
  /// 0: no minimum. The default is a 512 kbit/s link, the slowest one a
  /// deployment is expected to have.
  double min_rate_bytes_per_s = 65536;
  /// Server: the window the minimum rate is measured over (at least two
  /// chunks at the minimum rate: a longer one is used where chunk_bytes /
  /// min_rate_bytes_per_s asks for it).
  double rate_window_s = 120;

  /// The window the minimum rate is measured over, in seconds, for chunks
  /// of `chunk_bytes` (bytes count as whole chunks arrive): rate_window_s,
  /// or the time two chunks take at min_rate_bytes_per_s if longer.
  double rate_window_for(uint64_t chunk_bytes) const {
    if (min_rate_bytes_per_s <= 0)
      return rate_window_s;
    return std::max(rate_window_s, 2.0 * static_cast<double>(chunk_bytes) /
                                       min_rate_bytes_per_s);
  }
  /// Between processes: each side sends a heartbeat this often, and drops a
  /// connection on which nothing arrived for connection_timeout_s.
  double heartbeat_s = 5;
  double connection_timeout_s = 30;
  /// Server: how long a lost client may take to reconnect and resume before
  /// it is dropped from the run (the scheduler's rule then applies); 30 s.
  /// Client: how long it keeps trying to get back to a lost server; by
  /// default client_reconnect_grace_s, long enough for a server's restart
  /// from its checkpoint.
  double reconnect_grace_s = 30;
  /// Client: how long its first connection keeps trying where nothing
  /// answers at server_uri (refused, unreachable, timed out) before it
  /// gives up. A host name that does not resolve, or a peer that does not
  /// speak fedcaf, ends it at once.
  double connect_timeout_s = 30;
  /// Server: a connection must finish its TLS handshake and its Hello within
  /// this time, or it is closed.
  double handshake_timeout_s = 10;
  /// Server: connections that have not yet been welcomed, at once; one more
  /// makes the oldest of them give way (it is closed).
  uint32_t max_unauthenticated = 64;
  /// Server: refusals at the gateways logged per peer host every 10 s
  /// (protocol/log_pacer.hpp); the rest are counted and summed up.
  uint32_t refusal_log_lines = 10;
};

/// grpc_configs TLS keys. With use_ssl both sides present a certificate and
/// verify the peer's against root_certificate (mutual TLS).
struct tls_config {
  std::string certificate;      ///< server_certificate | client_certificate
  std::string certificate_key;  ///< server_certificate_key | client_...
  std::string root_certificate; ///< the CA that signed the peer
};

/// grpc_configs authenticator keys (APPFL's NaiveAuthenticator): a client
/// sends its token in Hello; the server holds one token per client id.
struct auth_config {
  bool enabled = false; ///< use_authenticator
  std::string token;    ///< client: authenticator_args.auth_token(_file)
  /// server: authenticator_args.tokens (client id -> token), or tokens_file
  /// (a YAML mapping of the same).
  std::vector<std::pair<std::string, std::string>> tokens;
};

/// comm_configs (grpc_configs keep APPFL's meaning).
struct comm_config {
  std::string server_uri = "127.0.0.1:50051";
  uint64_t max_message_size = 16 << 20;
  bool use_model_chunking = true;
  bool use_ssl = false;
  tls_config tls;
  auth_config auth;
  stream_config stream;

  /// Returns the chunk size for a model of `model_bytes`: the configured
  /// chunk size, or the whole model when chunking is off. Returns an error
  /// iff the chunk does not fit in max_message_size.
  result<uint64_t> chunk_bytes_for(uint64_t model_bytes) const;
};

/// A client's default reconnect_grace_s: 10 minutes.
constexpr double client_reconnect_grace_s = 600;

} // namespace fedcaf
