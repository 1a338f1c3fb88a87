#pragma once
// The byte side of one connection, for the gateways of either side
// (actors/server_gateway.cpp, actors/client_gateway.cpp; not for other
// actors): framing, TLS and the output of a caf::io broker's connection.
// Frames are read into the frame_reader's buffer (TLS decrypts straight
// into it) and handed on whole; a frame to send goes into the socket's
// write buffer without a copy when that is empty (plain TCP). Counts the
// bytes queued and written, for the limits on what a peer may leave
// unread. Thread-safety: its broker's; runs on the middleman's thread.

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include <caf/actor_clock.hpp>
#include <caf/atom.hpp>
#include <caf/io/broker.hpp>

#include "fedcaf/error.hpp"
#include "fedcaf/tls.hpp"
#include "messages/frame_reader.hpp"
#include "protocol/link_activity.hpp"

namespace fedcaf {

/// A gateway's timer: check the link's deadlines, send a heartbeat if due.
using beat_atom = caf::atom_constant<caf::atom("gw_beat")>;

class wire_link {
public:
  using frame = msg::frame;

  /// A link over `hdl` of broker `self`; `tls` null: plain TCP, else a TLS
  /// session that checks `peer_host` (the host dialed; "" on the server).
  /// Frames over `max_frame_bytes` break the stream.
  wire_link(caf::io::broker* self, caf::io::connection_handle hdl,
            std::shared_ptr<tls_context> tls, const std::string& peer_host,
            uint64_t max_frame_bytes);

  /// Starts reading; a TLS client sends its first handshake message.
  result<void> start();

  /// Takes bytes from the socket and calls `on_frame(frame&&)` for every
  /// complete frame. Returns an error iff the stream is broken: a bad
  /// header, a frame past the limit, a failed TLS handshake or record.
  template <class OnFrame>
  result<void> take(const std::vector<char>& bytes, OnFrame&& on_frame) {
    last_input_ = self_->clock().now();
    auto live = [this, &on_frame](frame&& f) {
      if (!closed_) // a frame may close the connection; ignore the rest
        on_frame(std::move(f));
    };
    bool first = !input_seen_ && !bytes.empty();
    input_seen_ = input_seen_ || first;
    if (!tls_ && first && opens_tls(bytes))
      return error{errc::malformed_frame,
                   "the peer speaks TLS, and this end does not (use_ssl is "
                   "off here)"};
    if (!tls_)
      return reader_.feed(bytes, live);
    tls_->set_input(bytes);
    auto ok = take_tls(live);
    tls_->set_input({});
    account_ciphertext(); // TLS 1.3 answers some records (tickets, updates)
    return ok;
  }

  /// Queues `f` for the peer. Returns its number among the frames sent on
  /// this connection (1 for the first); frames_written() reaches it once
  /// the socket has taken all of it.
  uint64_t send(frame&& f);

  /// Queues `f` as the last frame: frames queued but not yet in the
  /// socket's write buffer are dropped (whole frames: the peer sees none
  /// of them), so `f` goes out after what the socket holds already.
  uint64_t send_last(frame&& f);

  /// Queues `f` unencrypted, for a peer that speaks no TLS (plain_peer()):
  /// the one frame that tells it why it is refused.
  void send_plain(const frame& f);

  /// True iff this end speaks TLS and the peer's first bytes were none.
  bool plain_peer() const { return tls_ && tls_->plain_peer(); }

  /// Closes the connection, after close_notify on a TLS one; nothing is
  /// read or sent after this (what is queued still goes out: CAF's close
  /// waits for its buffer to be written).
  void close();
  /// Closes the connection at once, dropping what the peer never read: the
  /// socket is reset (SO_LINGER 0), so that a peer that stops reading
  /// cannot hold it, its buffers and its file descriptor open.
  void abort();

  /// The socket wrote; `remaining` bytes wait in its buffers.
  void transferred(uint64_t remaining);

  /// The number of frames sent that the socket has written whole.
  uint64_t frames_written() const { return frames_written_; }
  /// True iff frames or bytes queued for the peer are not written yet.
  bool output_pending() const {
    return written_ < queued_ || !pending_.empty();
  }
  /// True iff frames may pass: no TLS, or its handshake is done.
  bool secure() const { return !tls_ || secure_; }
  /// The frame reader, whose frame limit the gateway raises on welcome.
  msg::frame_reader& reader() { return reader_; }

  /// When bytes last moved each way, for the silence and stall deadlines.
  link_activity activity() const {
    return {last_input_, last_output_, output_pending(), secure()};
  }

  /// The common name of the peer's verified certificate; "" without TLS.
  std::string peer_name() const {
    return tls_ ? tls_->peer_common_name() : std::string{};
  }

private:
  /// True iff `bytes`, the first from the peer, open a TLS handshake record
  /// (content type 22, version 3.x); a frame never starts so (its first
  /// byte is 0: one segment).
  static bool opens_tls(const std::vector<char>& bytes) {
    return static_cast<unsigned char>(bytes[0]) == 22 &&
           (bytes.size() < 2 || bytes[1] == 3);
  }

  template <class OnFrame> result<void> take_tls(OnFrame& on_frame) {
    if (!secure_) {
      if (auto ok = advance_handshake(); !ok || !secure_)
        return ok;
    }
    while (!closed_) { // decrypt straight into the frame under way
      auto n = tls_->read(reader_.next());
      if (!n)
        return n.err();
      if (*n == 0)
        return {};
      auto got = reader_.commit(*n);
      if (!got)
        return got.err();
      if (*got)
        on_frame(std::move(**got));
    }
    return {};
  }

  result<void> advance_handshake();

  /// Moves frames into the socket's write buffer (CAF's second buffer,
  /// filled while the first is being written) while it holds less than the
  /// largest frame: a frame goes in without a copy when the buffer is empty
  /// (plain TCP), and small frames are copied behind one another up to
  /// 256 KiB. A large frame therefore is never copied, and the socket goes
  /// on writing without waiting for this broker (its second buffer is
  /// refilled on the first write from the one it took). The rest wait
  /// here, so what stays allocated in the socket's buffers is bounded by
  /// the frames in flight.
  void pump();

  /// Counts and flushes the ciphertext TLS wrote since the last call.
  void account_ciphertext();

  void note_queued(uint64_t n);

  using clock_type = caf::actor_clock::clock_type;

  caf::io::broker* self_;
  caf::io::connection_handle hdl_;
  msg::frame_reader reader_;
  std::unique_ptr<tls_session> tls_;
  bool secure_ = false;
  bool closed_ = false;
  bool input_seen_ = false;
  std::deque<frame> pending_;       ///< not yet in the socket's write buffer
  std::deque<uint64_t> frame_ends_; ///< where each handed frame ends, in
                                    ///< bytes queued
  uint64_t frames_sent_ = 0;
  uint64_t frames_written_ = 0;
  uint64_t largest_frame_ = 0;
  uint64_t tls_accounted_ = 0;
  uint64_t queued_ = 0; ///< bytes put in the socket's write buffer
  uint64_t written_ = 0;
  clock_type::time_point last_input_;
  clock_type::time_point last_output_;
};

} // namespace fedcaf
