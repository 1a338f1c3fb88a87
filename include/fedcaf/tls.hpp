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

#include "fedcaf/config/comm_sections.hpp"
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
  void set_input(std::span<const char> bytes);

  /// Where ciphertext for the peer goes during the following calls (null:
  /// nowhere yet; OpenSSL then waits).
  void set_output(std::vector<char>* out) { output_ = out; }

  /// Drives the handshake. Returns true once it is complete, false while it
  /// needs more ciphertext, and an error (not_authorized) iff it failed: the
  /// reason says, for this end to act on, whether the peer speaks no TLS,
  /// which certificate failed verification, or what the peer's alert said,
  /// then OpenSSL's words.
  result<bool> handshake();

  /// Decrypts into `dst`. Returns the bytes written (0: more ciphertext
  /// needed), or an error iff the stream is corrupt or the peer closed it:
  /// not_authorized iff the peer ended it with an alert before its first
  /// record (a TLS 1.3 server refusing this client's certificate).
  result<size_t> read(std::span<char> dst);

  /// True iff the peer's first bytes were no TLS record (a plain TCP peer):
  /// it can read only plain bytes.
  bool plain_peer() const { return plain_peer_; }

  /// Encrypts `plaintext` into the output.
  result<void> write(std::span<const char> plaintext);

  /// Writes close_notify into the output, once the handshake is complete:
  /// this end sends nothing more (a clean end, not a refusal).
  void close_notify();

  /// Returns the common name of the peer's verified certificate, or "".
  std::string peer_common_name() const;

  /// Ciphertext bytes written to the output so far.
  uint64_t bytes_out() const { return bytes_out_; }

  // For the BIO callbacks.
  int bio_read(char* dst, int n);
  int bio_write(const char* src, int n);

private:
  /// Why the session failed (see handshake()); clears OpenSSL's queue.
  std::string failure();

  std::shared_ptr<tls_context> ctx_;
  std::string peer_host_;
  ssl_st* ssl_ = nullptr;
  bool input_seen_ = false;
  bool plain_peer_ = false;     ///< its first byte was no TLS record's
  bool plaintext_seen_ = false; ///< read() has returned data
  std::span<const char> input_;
  std::vector<char>* output_ = nullptr;
  uint64_t bytes_out_ = 0;
};

} // namespace fedcaf
