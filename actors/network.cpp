#include "actors/network.hpp"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <sys/socket.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <thread>

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <caf/openssl/all.hpp>

#include "fedcaf/log.hpp"

namespace fedcaf {

namespace {

std::chrono::nanoseconds seconds(double s) {
  return std::chrono::nanoseconds{static_cast<int64_t>(s * 1e9)};
}

// -- the TLS handshake observer --------------------------------------------
//
// caf_openssl 0.17 runs the handshake inside its session class and drops a
// failed connection without telling anyone. To log each refusal with the
// peer's address, and to learn the name in a verified client certificate,
// this file defines SSL_accept and SSL_connect: the dynamic linker binds
// libcaf_openssl's calls to these, which call OpenSSL's own.

std::mutex names_mtx;
std::map<std::string, std::string> verified_names; // "host:port" -> CN

std::string address_key(const std::string& host, uint16_t port) {
  return host + ":" + std::to_string(port);
}

/// Returns "host:port" of the peer of `ssl`'s socket, or "an unknown peer".
std::string peer_address(const SSL* ssl) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  auto fd = SSL_get_fd(ssl);
  if (fd < 0 || ::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len))
    return "an unknown peer";
  char host[INET6_ADDRSTRLEN] = {};
  uint16_t port = 0;
  if (addr.ss_family == AF_INET) {
    auto* in = reinterpret_cast<sockaddr_in*>(&addr);
    ::inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
    port = ntohs(in->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    auto* in = reinterpret_cast<sockaddr_in6*>(&addr);
    ::inet_ntop(AF_INET6, &in->sin6_addr, host, sizeof(host));
    port = ntohs(in->sin6_port);
  }
  return address_key(host, port);
}

std::string common_name(X509* cert) {
  if (!cert)
    return {};
  char cn[256] = {};
  X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, cn,
                            sizeof(cn));
  return cn;
}

std::string handshake_failure(const SSL* ssl) {
  std::string why;
  auto verify = SSL_get_verify_result(ssl);
  if (verify != X509_V_OK)
    why = X509_verify_cert_error_string(verify);
  if (auto e = ERR_peek_last_error(); e != 0) {
    char text[256] = {};
    ERR_error_string_n(e, text, sizeof(text));
    why += (why.empty() ? "" : "; ") + std::string{text};
  }
  return why.empty() ? "the peer closed the connection during the handshake"
                     : why;
}

using handshake_fn = int (*)(SSL*);

handshake_fn openssl_function(const char* name) {
  void* f = ::dlvsym(RTLD_NEXT, name, "OPENSSL_3.0.0");
  if (!f)
    f = ::dlsym(RTLD_NEXT, name);
  return reinterpret_cast<handshake_fn>(f);
}

bool failed_for_good(const SSL* ssl, int rc) {
  if (rc > 0)
    return false;
  auto e = SSL_get_error(ssl, rc);
  return e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE;
}

} // namespace

} // namespace fedcaf

extern "C" int SSL_accept(SSL* ssl) {
  using namespace fedcaf;
  static auto next = openssl_function("SSL_accept");
  auto rc = next(ssl);
  if (rc == 1) {
    X509* cert = SSL_get1_peer_certificate(ssl);
    auto name = common_name(cert);
    X509_free(cert);
    std::lock_guard<std::mutex> guard{names_mtx};
    verified_names[peer_address(ssl)] = name;
  } else if (failed_for_good(ssl, rc)) {
    // caf_openssl may try a failed handshake once more: log it once.
    thread_local const SSL* last_refused = nullptr;
    if (ssl != last_refused)
      log_line("tls", "refused a connection from " + peer_address(ssl) + ": " +
                          handshake_failure(ssl));
    last_refused = ssl;
  }
  return rc;
}

extern "C" int SSL_connect(SSL* ssl) {
  using namespace fedcaf;
  static auto next = openssl_function("SSL_connect");
  auto rc = next(ssl);
  if (failed_for_good(ssl, rc))
    log_line("tls", "handshake with " + peer_address(ssl) +
                        " failed: " + handshake_failure(ssl));
  return rc;
}

namespace fedcaf {

std::string tls_peer_name(const std::string& host, uint16_t port) {
  std::lock_guard<std::mutex> guard{names_mtx};
  auto it = verified_names.find(address_key(host, port));
  return it == verified_names.end() ? std::string{} : it->second;
}

result<endpoint> parse_endpoint(const std::string& uri) {
  auto colon = uri.rfind(':');
  if (colon == std::string::npos || colon == 0)
    return error{errc::bad_config, "server_uri '" + uri +
                                       "': expected "
                                       "host:port"};
  try {
    size_t used = 0;
    auto port = std::stoul(uri.substr(colon + 1), &used);
    if (used != uri.size() - colon - 1 || port > 65535)
      throw std::out_of_range{"port"};
    return endpoint{uri.substr(0, colon), static_cast<uint16_t>(port)};
  } catch (const std::exception&) {
    return error{errc::bad_config, "server_uri '" + uri + "': bad port"};
  }
}

void configure_network(caf::actor_system_config& sc, const comm_config& comm) {
  sc.load<caf::io::middleman>();
  sc.set("middleman.heartbeat-interval",
         caf::timespan{seconds(comm.stream.heartbeat_s)});
  sc.set("middleman.connection-timeout",
         caf::timespan{seconds(comm.stream.connection_timeout_s)});
  if (!comm.use_ssl)
    return;
  sc.load<caf::openssl::manager>();
  sc.openssl_certificate = comm.tls.certificate;
  sc.openssl_key = comm.tls.certificate_key;
  sc.openssl_cafile = comm.tls.root_certificate;
}

result<uint16_t> publish_server(caf::actor_system& sys,
                                const caf::actor& server, const endpoint& at,
                                bool tls) {
  auto port =
      tls ? caf::openssl::publish(server, at.port, at.host.c_str(), true)
          : sys.middleman().publish(server, at.port, at.host.c_str(), true);
  if (!port)
    return error{errc::disconnected, "cannot listen on " + at.host + ":" +
                                         std::to_string(at.port) + ": " +
                                         sys.render(port.error())};
  return *port;
}

result<caf::actor> connect_with_retry(caf::actor_system& sys,
                                      const endpoint& at, bool tls,
                                      std::chrono::milliseconds give_up_after,
                                      uint64_t& retries) {
  auto delay = std::chrono::milliseconds{100};
  auto deadline = std::chrono::steady_clock::now() + give_up_after;
  for (;;) {
    auto server = tls ? caf::openssl::remote_actor(sys, at.host, at.port)
                      : sys.middleman().remote_actor(at.host, at.port);
    if (server)
      return *server;
    if (std::chrono::steady_clock::now() + delay > deadline)
      return error{errc::disconnected, "cannot reach the server at " + at.host +
                                           ":" + std::to_string(at.port) +
                                           ": " + sys.render(server.error())};
    ++retries;
    std::this_thread::sleep_for(delay);
    delay = std::min(delay * 2, std::chrono::milliseconds{2000});
  }
}

caf::actor connector(caf::actor_system& sys, bool tls) {
  if (tls)
    return caf::actor_cast<caf::actor>(sys.openssl_manager().actor_handle());
  return caf::actor_cast<caf::actor>(sys.middleman().actor_handle());
}

} // namespace fedcaf
