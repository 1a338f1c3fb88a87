#pragma once
// TLS with OpenSSL inside the gateway: ciphertext moves between the socket's
// buffers and a tls_session, which hands the gateway plaintext frames. Mutual TLS
// only: both ends present a certificate signed by the configured CA, and
// there is no anonymous fallback. Thread-safety: a tls_context is immutable
// once made and may be shared; a tls_session has one owner.

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "fedcaf/config.hpp"
#include "fedcaf/error.hpp"

struct ssl_ctx_st;
struct ssl_st;

namespace fedcaf {

/// One end's certificate, key and CA, loaded once.
class tls_context {
public:
  /// Loads `tls` for the server end (which asks every client for a
  /// certificate) or the client end. Returns an error naming the file iff a
  /// certificate, key or CA cannot be loaded or the key does not match.
  static result<std::shared_ptr<tls_context>> make(const tls_config& tls,
                                                   bool server);
  ~tls_context();
  tls_context(const tls_context&) = delete;
  tls_context& operator=(const tls_context&) = delete;

  ssl_ctx_st* native() const { return ctx_; }
  bool server() const { return server_; }

private:
  tls_context(ssl_ctx_st* ctx, bool server) : ctx_(ctx), server_(server) {}
  ssl_ctx_st* ctx_;
  bool server_;
};

/// One TLS connection over the gateway's own buffers: through a BIO of this
/// class OpenSSL takes ciphertext from the bytes the socket delivered
/// (set_input) and puts ciphertext into the socket's write buffer
/// (set_output), with no memory BIO in between.
class tls_session {
public:
  /// A session of `ctx`'s end. A client verifies that the server's
  /// certificate names `peer_host` (an IP address or DNS name).
  tls_session(std::shared_ptr<tls_context> ctx, const std::string& peer_host);
  ~tls_session();
  tls_session(const tls_session&) = delete;
  tls_session& operator=(const tls_session&) = delete;

  /// Ciphertext from the peer for the following calls. REQUIRES: it
  /// outlives them; read() returns 0 only once all of it was taken.
  void set_input(std::span<const char> bytes) { input_ = bytes; }

  /// Where ciphertext for the peer goes during the following calls (null:
  /// nowhere yet; OpenSSL then waits).
  void set_output(std::vector<char>* out) { output_ = out; }

  /// Drives the handshake. Returns true once it is complete, false while it
  /// needs more ciphertext, and an error iff it failed (the reason names the
  /// verification failure).
  result<bool> handshake();

  /// Decrypts into `dst`. Returns the bytes written (0: more ciphertext
  /// needed), or an error iff the stream is corrupt or the peer closed it.
  result<size_t> read(std::span<char> dst);

  /// Encrypts `plaintext` into the output.
  result<void> write(std::span<const char> plaintext);

  /// Returns the common name of the peer's verified certificate, or "".
  std::string peer_common_name() const;

  /// Ciphertext bytes written to the output so far.
  uint64_t bytes_out() const { return bytes_out_; }

  // For the BIO callbacks.
  int bio_read(char* dst, int n);
  int bio_write(const char* src, int n);

private:
  std::shared_ptr<tls_context> ctx_;
  ssl_st* ssl_ = nullptr;
  std::span<const char> input_;
  std::vector<char>* output_ = nullptr;
  uint64_t bytes_out_ = 0;
};

} // namespace fedcaf
