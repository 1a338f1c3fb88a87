#pragma once
// What a server gateway lets its peer do, and when the connection must end
// (docs/protocol.md, "A connection, server side" and "Limits"). It decides
// and counts; the gateway (actors/server_gateway.cpp) asks the server,
// sends, logs and keeps the timers. Stages:
//   awaiting hello -(hello)-> hello pending -(welcome)-> welcomed
//   any -(refusal, or the Hello refused)-> closing
// Before the welcome only heartbeats and one Hello pass. Welcomed, the
// nine peer frame kinds pass within their in-flight limits: fetches, and
// chunks or credits, within the window; Hellos, offers, ends, evaluations
// and secAgg requests at most 2, and a Hello only while none is open. It
// queues the fetches and passes them on materialized_fetches at a time,
// each counted until its reply has been written; it counts the refusals
// and repeated Hellos of a welcomed peer, and judges the deadlines
// (handshake, silence, output that does not move, closing) and the
// heartbeat. Reads no clock: the gateway passes its time.
// Thread-safety: none; owned by one server gateway.

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>

#include "fedcaf/error.hpp"
#include "messages/codec.hpp"
#include "protocol/gateway_limits.hpp"
#include "protocol/link_activity.hpp"
#include "protocol/refusal_log.hpp"

namespace fedcaf {

/// Chunks of the global model the server makes ahead for one connection:
/// one being written, one ready behind it.
constexpr size_t materialized_fetches = 2;

/// A welcomed peer may be refused (without being disconnected: a stale
/// round, a reset stream) or say Hello again at most this often within
/// refusal_period; one more closes its connection (too_many_requests).
/// An honest client is refused a few times per round at most.
constexpr uint32_t max_refusals = 64;
constexpr std::chrono::seconds refusal_period{10};

/// Returns true iff a refusal with `code` by the server side marks the
/// peer as broken or hostile: after its answer, the connection ends.
/// Others (a stale round, a reset stream, sitting a round out) are part of
/// an honest client's life.
bool ends_connection(errc code);

class connection_admission {
public:
  using time_point = std::chrono::steady_clock::time_point;
  enum class stage { awaiting_hello, hello_pending, welcomed, closing };

  /// What to do with a frame from the peer.
  struct verdict {
    enum class action {
      ignore, ///< a heartbeat, or the connection is closing
      refuse, ///< refuse(refusal): the connection closes
      ask,    ///< ask the server (a fetch: pass what next_fetch() gives)
    };
    action what = action::ignore;
    msg::frame_kind kind{}; ///< of the request to ask
    error refusal{};
  };

  /// What a tick of the gateway's timer asks of it.
  struct tick_verdict {
    enum class action {
      none,
      close,     ///< the closing grace is over: close now
      refuse,    ///< a deadline passed: refuse(refusal)
      heartbeat, ///< send one
    };
    action what = action::none;
    error refusal{};
  };

  /// A connection from the peer at `address` (for the texts), accepted at
  /// `opened`.
  connection_admission(const gateway_limits& limits, std::string address,
                       time_point opened)
      : limits_(limits), address_(std::move(address)), opened_(opened) {}

  /// Judges frame `f` from the peer at `now`, in this order: the frame's
  /// kind (heartbeats are ignored), its request id, the stage, the
  /// in-flight limit of its kind, and for a Hello its decoding, its
  /// client id and the refusal limit. An admitted request is counted in
  /// flight until answered(); an admitted Hello moves the stage on and
  /// names the client; an admitted fetch is moved from `f` into the queue.
  verdict admit(msg::frame& f, time_point now);

  /// Returns the next queued fetch to pass to the server iff the peer is
  /// welcomed and fewer than materialized_fetches of its chunks are on
  /// their way out, and counts it as asked: a peer's window of fetches
  /// costs the server that many chunks, and one that does not read no
  /// more.
  std::optional<msg::frame> next_fetch();

  /// The server answered a request of `kind`: it is no longer in flight.
  void answered(msg::frame_kind kind);

  /// The answer to a request of `kind` went out as the `frame_number`th
  /// frame sent: a fetch's counts until written() reaches it.
  void reply_queued(msg::frame_kind kind, uint64_t frame_number);

  /// The socket has written the first `frames` frames sent.
  void written(uint64_t frames);

  /// The server welcomed the peer at `now`. Returns true iff this is its
  /// first welcome: from now on its frames may be max_frame_bytes, and it
  /// is sent heartbeats.
  bool welcome(time_point now);

  /// What the deadlines ask at `now`, given the link's `activity`: closing,
  /// to close once close_grace passed; else a refusal (timeout) iff the
  /// peer was not welcomed within handshake_timeout, nothing arrived for
  /// connection_timeout, or its output did not move for that long; else a
  /// heartbeat iff welcomed and one is due (counted as sent).
  tick_verdict tick(time_point now, const link_activity& activity);

  /// Returns the refusal (too_many_requests) iff the acceptor needs this
  /// connection's place for a newer one and it is not welcomed yet.
  std::optional<error> evict() const;

  /// Counts a refusal by the server side that leaves the connection open,
  /// at `now`; returns the refusal that closes it (too_many_requests) iff
  /// it is one past the refusal limit.
  std::optional<error> count_refusal(time_point now);

  /// Returns `e`, a refusal by the gateway itself, as logged and sent: the
  /// client id once welcomed, then the peer's address.
  error refusal(const error& e) const;

  /// Returns the gateway's log line of the server side's refusal `e`:
  /// "refused: <code>: <client id>: <message> (peer <address>)".
  std::string refused_line(const error& e) const;

  /// The connection closes at `now`, after what it still holds is written.
  void start_closing(time_point now);

  /// What a peer that speaks no TLS to a TLS server is told, in plain
  /// bytes (not_authorized).
  static error tls_only();

  /// True iff the server has welcomed the peer and it is not closing.
  bool welcomed() const { return stage_ == stage::welcomed; }
  /// True iff the connection closes: nothing more is admitted.
  bool closing() const { return stage_ == stage::closing; }
  /// The stage the connection is in.
  stage current() const { return stage_; }
  /// The client id of the Hello; meaningful once welcomed.
  const std::string& client_id() const { return client_id_; }
  /// The peer's address, "<host>:<port>".
  const std::string& address() const { return address_; }

private:
  verdict route(msg::frame_kind kind, msg::frame& f, time_point now);
  verdict admit_hello(msg::frame& f, time_point now);
  /// "more than window (<window>) <what> in flight" (too_many_requests).
  error past_window(const char* what) const;
  /// "<connection_timeout> ms (connection_timeout_s)".
  std::string connection_timeout() const;

  /// Model chunks the server has made for this peer and the socket has not
  /// yet taken whole.
  size_t materialized() const {
    return fetches_waiting_ + fetch_replies_.size();
  }

  gateway_limits limits_;
  std::string address_;
  std::string client_id_;
  stage stage_ = stage::awaiting_hello;
  std::deque<msg::frame> fetches_; ///< fetches not yet passed to the server
  uint32_t fetches_waiting_ = 0;   ///< fetches the server has not answered
  /// Answered fetches not yet written to the socket: each reply's number
  /// among the frames sent.
  std::deque<uint64_t> fetch_replies_;
  uint32_t uploads_ = 0; ///< chunks and credits the server has not answered
  /// Hellos, offers, ends, evaluations and secAgg requests the server has
  /// not answered.
  uint32_t control_ = 0;
  time_point opened_;
  time_point closing_since_{};
  time_point last_beat_{};
  /// Refusals that leave the connection open, and repeated Hellos.
  event_limit refusal_limit_{max_refusals, refusal_period};
};

} // namespace fedcaf
