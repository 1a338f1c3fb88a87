#pragma once
// Processes on many hosts: CAF's middleman (plain TCP or TLS with
// caf_openssl), heartbeats, publishing the server, and connecting to it with
// retries. Used by `fedcaf server | client` and the transfer benchmark.

#include <chrono>
#include <cstdint>
#include <string>

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

#include "fedcaf/config.hpp"
#include "fedcaf/error.hpp"

namespace fedcaf {

struct endpoint {
  std::string host;
  uint16_t port = 0;
};

/// Parses "host:port" (IPv6 hosts in brackets are not supported).
result<endpoint> parse_endpoint(const std::string& uri);

/// Loads the middleman into `sc` with heartbeats and the connection timeout
/// of `comm.stream`, and with use_ssl the TLS manager with certificate, key
/// and CA: both ends then present a certificate and verify the peer's.
/// REQUIRES: with use_ssl, the tls paths are set (load_config checks this).
void configure_network(caf::actor_system_config& sc, const comm_config& comm);

/// Publishes `server` at `at` (port 0: any). Returns the bound port.
result<uint16_t> publish_server(caf::actor_system& sys,
                                const caf::actor& server, const endpoint& at,
                                bool tls);

/// Connects to the actor published at `at`, retrying with exponential
/// backoff (100 ms doubling to 2 s) until `give_up_after` has passed.
/// `retries` counts the failed attempts.
result<caf::actor> connect_with_retry(caf::actor_system& sys,
                                      const endpoint& at, bool tls,
                                      std::chrono::milliseconds give_up_after,
                                      uint64_t& retries);

/// The actor that answers (connect_atom, host, port) with (node_id,
/// strong_actor_ptr, std::set<std::string>) over plain TCP or TLS, and
/// (get_atom, node_id) with (node_id, host, port): for actors that reconnect
/// or ask who a peer is without blocking.
caf::actor connector(caf::actor_system& sys, bool tls);

/// Returns the subject common name of the client certificate that TLS
/// verified on the connection from `host`:`port`, or an empty string (no TLS
/// connection from there, or no name). Thread-safety: safe anywhere.
std::string tls_peer_name(const std::string& host, uint16_t port);

} // namespace fedcaf
