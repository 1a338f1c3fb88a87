#include "fedcaf/tls.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

namespace fedcaf {

namespace {

/// Returns OpenSSL's queued errors as one line, and clears the queue.
std::string openssl_errors() {
  std::string out;
  while (auto e = ERR_get_error()) {
    char text[256] = {};
    ERR_error_string_n(e, text, sizeof(text));
    out += (out.empty() ? "" : "; ") + std::string{text};
  }
  return out.empty() ? "no detail from OpenSSL" : out;
}

error load_failure(const std::string& what, const std::string& path) {
  return {errc::bad_config,
          "TLS: cannot load " + what + " '" + path + "': " + openssl_errors()};
}

bool is_ip_literal(const std::string& host) {
  unsigned char buf[16];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 ||
         inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

/// The reason code of OpenSSL's first queued error, if it is the TLS
/// library's; 0 otherwise.
int first_ssl_reason() {
  auto e = ERR_peek_error();
  return ERR_GET_LIB(e) == ERR_LIB_SSL ? ERR_GET_REASON(e) : 0;
}

/// The alert the peer sent, if the first queued error is one (OpenSSL
/// reports a received alert as reason SSL_AD_REASON_OFFSET + alert); -1
/// otherwise.
int received_alert() {
  auto reason = first_ssl_reason();
  return reason > SSL_AD_REASON_OFFSET && reason < SSL_AD_REASON_OFFSET + 256
             ? reason - SSL_AD_REASON_OFFSET
             : -1;
}

/// True iff `alert` is a verdict on the certificate its receiver sent.
bool is_certificate_alert(int alert) {
  switch (alert) {
  case SSL_AD_BAD_CERTIFICATE:
  case SSL_AD_UNSUPPORTED_CERTIFICATE:
  case SSL_AD_CERTIFICATE_REVOKED:
  case SSL_AD_CERTIFICATE_EXPIRED:
  case SSL_AD_CERTIFICATE_UNKNOWN:
  case SSL_AD_UNKNOWN_CA:
  case SSL_AD_ACCESS_DENIED:
  case SSL_AD_CERTIFICATE_REQUIRED:
    return true;
  default:
    return false;
  }
}

/// Why the peer ended the session with `alert`, for this end (`server`) to
/// act on.
std::string alert_reason(int alert, bool server) {
  std::string said =
      std::string{"(TLS alert '"} + SSL_alert_desc_string_long(alert) + "')";
  const char* peer = server ? "the client" : "the server";
  if (is_certificate_alert(alert))
    return std::string{peer} + " refused " +
           (server ? "this server's" : "this client's") + " certificate " +
           said +
           (alert == SSL_AD_UNKNOWN_CA
                ? std::string{": "} +
                      (server ? "server_certificate" : "client_certificate") +
                      " must be signed by the CA in " + peer +
                      "'s root_certificate"
                : std::string{});
  if (alert == SSL_AD_PROTOCOL_VERSION || alert == SSL_AD_HANDSHAKE_FAILURE ||
      alert == SSL_AD_INSUFFICIENT_SECURITY)
    return std::string{"no TLS version or cipher suite in common with "} +
           peer + " " + said + "; fedcaf speaks TLS 1.2 and 1.3";
  return std::string{peer} + " ended the session " + said;
}

} // namespace

result<std::shared_ptr<tls_context>> tls_context::make(const tls_config& tls,
                                                       bool server) {
  auto* ctx = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
  if (!ctx)
    return error{errc::internal, "TLS: " + openssl_errors()};
  std::shared_ptr<tls_context> out{new tls_context(ctx, server)};
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  if (SSL_CTX_use_certificate_chain_file(ctx, tls.certificate.c_str()) != 1)
    return load_failure("certificate", tls.certificate);
  if (SSL_CTX_use_PrivateKey_file(ctx, tls.certificate_key.c_str(),
                                  SSL_FILETYPE_PEM) != 1)
    return load_failure("key", tls.certificate_key);
  if (SSL_CTX_check_private_key(ctx) != 1)
    return load_failure("key (it does not match the certificate)",
                        tls.certificate_key);
  if (SSL_CTX_load_verify_locations(ctx, tls.root_certificate.c_str(),
                                    nullptr) != 1)
    return load_failure("root certificate", tls.root_certificate);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT,
                     nullptr);
  SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
  // AES-128-GCM first: as strong as needed here, and the fastest on CPUs
  // with AES instructions; every suite of TLS 1.3 stays allowed.
  SSL_CTX_set_ciphersuites(ctx, "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:"
                                "TLS_CHACHA20_POLY1305_SHA256");
  return out;
}

tls_context::~tls_context() {
  SSL_CTX_free(ctx_);
}

namespace {

// A BIO whose reads take from the session's input span and whose writes
// append to its output buffer.
int session_bio_read(BIO* b, char* dst, int n) {
  BIO_clear_retry_flags(b);
  auto got = static_cast<tls_session*>(BIO_get_data(b))->bio_read(dst, n);
  if (got <= 0)
    BIO_set_retry_read(b);
  return got <= 0 ? -1 : got;
}

int session_bio_write(BIO* b, const char* src, int n) {
  BIO_clear_retry_flags(b);
  auto put = static_cast<tls_session*>(BIO_get_data(b))->bio_write(src, n);
  if (put <= 0)
    BIO_set_retry_write(b);
  return put <= 0 ? -1 : put;
}

long session_bio_ctrl(BIO*, int cmd, long, void*) {
  return cmd == BIO_CTRL_FLUSH ? 1 : 0;
}

int session_bio_create(BIO* b) {
  BIO_set_init(b, 1);
  return 1;
}

const BIO_METHOD* session_bio_method() {
  static BIO_METHOD* method = [] {
    auto* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK,
                           "fedcaf gateway");
    BIO_meth_set_read(m, session_bio_read);
    BIO_meth_set_write(m, session_bio_write);
    BIO_meth_set_ctrl(m, session_bio_ctrl);
    BIO_meth_set_create(m, session_bio_create);
    return m;
  }();
  return method;
}

} // namespace

tls_session::tls_session(std::shared_ptr<tls_context> ctx,
                         const std::string& peer_host)
    : ctx_(std::move(ctx)), peer_host_(peer_host) {
  ssl_ = SSL_new(ctx_->native());
  auto* bio = BIO_new(session_bio_method());
  BIO_set_data(bio, this);
  SSL_set_bio(ssl_, bio, bio); // the session owns it now
  if (ctx_->server()) {
    SSL_set_accept_state(ssl_);
    return;
  }
  SSL_set_connect_state(ssl_);
  if (peer_host.empty())
    return;
  auto* param = SSL_get0_param(ssl_);
  if (is_ip_literal(peer_host)) {
    X509_VERIFY_PARAM_set1_ip_asc(param, peer_host.c_str());
  } else {
    SSL_set_tlsext_host_name(ssl_, peer_host.c_str());
    X509_VERIFY_PARAM_set1_host(param, peer_host.c_str(), 0);
  }
}

tls_session::~tls_session() {
  SSL_free(ssl_);
}

int tls_session::bio_read(char* dst, int n) {
  auto k = std::min(input_.size(), static_cast<size_t>(n));
  std::copy_n(input_.data(), k, dst);
  input_ = input_.subspan(k);
  return static_cast<int>(k);
}

int tls_session::bio_write(const char* src, int n) {
  if (!output_)
    return 0;
  output_->insert(output_->end(), src, src + n);
  bytes_out_ += static_cast<uint64_t>(n);
  return n;
}

void tls_session::set_input(std::span<const char> bytes) {
  if (!input_seen_ && !bytes.empty()) {
    input_seen_ = true;
    // Every TLS connection opens with a handshake record: content type 22.
    plain_peer_ = static_cast<unsigned char>(bytes[0]) != 22;
  }
  input_ = bytes;
}

result<bool> tls_session::handshake() {
  auto rc = SSL_do_handshake(ssl_);
  if (rc == 1)
    return true;
  auto e = SSL_get_error(ssl_, rc);
  if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
    return false;
  return error{errc::not_authorized, "TLS handshake failed: " + failure()};
}

std::string tls_session::failure() {
  bool server = ctx_->server();
  std::string why;
  if (plain_peer_)
    why = server ? "the peer does not speak TLS (a client without use_ssl?)"
                 : "the server does not speak TLS (its answer is no TLS "
                   "record): use_ssl must be on at both ends or off at both, "
                   "and server_uri must name the fedcaf port";
  else if (auto v = SSL_get_verify_result(ssl_); v != X509_V_OK)
    why = std::string{server ? "the client's" : "the server's"} +
          " certificate is not trusted: " + X509_verify_cert_error_string(v) +
          (server ? ""
                  : " (root_certificate must be the CA that signed it, and "
                    "it must name " +
                        peer_host_ + ")");
  else if (auto alert = received_alert(); alert >= 0)
    why = alert_reason(alert, server);
  // OpenSSL's own words too: the operator's search terms.
  return why.empty() ? openssl_errors() : why + "; " + openssl_errors();
}

result<size_t> tls_session::read(std::span<char> dst) {
  auto n = SSL_read(ssl_, dst.data(),
                    static_cast<int>(std::min<size_t>(dst.size(), 1 << 30)));
  if (n > 0) {
    plaintext_seen_ = true;
    return static_cast<size_t>(n);
  }
  auto e = SSL_get_error(ssl_, n);
  if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
    return size_t{0};
  if (e == SSL_ERROR_ZERO_RETURN)
    return error{errc::disconnected, "the peer closed the TLS session"};
  // TLS 1.3: a client's handshake is done before the server has checked
  // its certificate, and the server's verdict arrives as an alert in place
  // of its first record.
  if (!plaintext_seen_ && received_alert() >= 0)
    return error{errc::not_authorized, "TLS handshake failed: " + failure()};
  return error{errc::malformed_frame, "TLS: " + openssl_errors()};
}

void tls_session::close_notify() {
  if (SSL_is_init_finished(ssl_) == 1 && SSL_shutdown(ssl_) < 0)
    ERR_clear_error(); // a session already broken: nothing to say
}

result<void> tls_session::write(std::span<const char> plaintext) {
  while (!plaintext.empty()) {
    auto n = SSL_write(
        ssl_, plaintext.data(),
        static_cast<int>(std::min<size_t>(plaintext.size(), 1 << 30)));
    if (n <= 0)
      return error{errc::disconnected, "TLS: " + openssl_errors()};
    plaintext = plaintext.subspan(static_cast<size_t>(n));
  }
  return {};
}

std::string tls_session::peer_common_name() const {
  if (SSL_get_verify_result(ssl_) != X509_V_OK)
    return {};
  X509* cert = SSL_get1_peer_certificate(ssl_);
  if (!cert)
    return {};
  // Exactly one common name, without NUL bytes: a name that a C string
  // would cut short (Client1\0x) is no name.
  auto* subject = X509_get_subject_name(cert);
  std::string cn;
  auto at = X509_NAME_get_index_by_NID(subject, NID_commonName, -1);
  if (at >= 0 && X509_NAME_get_index_by_NID(subject, NID_commonName, at) < 0) {
    auto* data = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, at));
    cn.assign(reinterpret_cast<const char*>(ASN1_STRING_get0_data(data)),
              static_cast<size_t>(ASN1_STRING_length(data)));
    if (cn.find('\0') != std::string::npos)
      cn.clear();
  }
  X509_free(cert);
  return cn;
}

} // namespace fedcaf
