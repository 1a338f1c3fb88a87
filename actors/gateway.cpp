#include "actors/gateway.hpp"

#include <unistd.h>

#include <algorithm>
#include <deque>
#include <map>
#include <optional>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "fedcaf/log.hpp"
#include "fedcaf/tls.hpp"
#include "messages/frame_reader.hpp"

namespace fedcaf {

namespace {

using beat_atom = caf::atom_constant<caf::atom("gw_beat")>;
/// gateway -> acceptor: this connection was welcomed.
using welcomed_atom = caf::atom_constant<caf::atom("gw_welcome")>;
/// acceptor -> gateway: give way to a newer connection if not welcomed.
using evict_atom = caf::atom_constant<caf::atom("gw_evict")>;
// Time is the actor clock's (CAF's test coordinator runs it virtually).
using clock_type = caf::actor_clock::clock_type;
using caf::io::connection_handle;

/// Bytes asked of the socket per read.
constexpr size_t read_bytes = 128 << 10;

/// Chunks of the global model the server makes ahead for one connection:
/// one being written, one ready behind it.
constexpr size_t materialized_fetches = 2;

/// The socket's write buffer takes small frames while it holds less.
constexpr size_t coalesce_bytes = 256 << 10;

/// A welcomed peer may be refused (without being disconnected: a stale
/// round, a reset stream) or say Hello again at most this often within
/// refusal_period; one more closes its connection (too_many_requests).
/// An honest client is refused a few times per round at most.
constexpr uint32_t max_refusals = 64;
constexpr std::chrono::seconds refusal_period{10};

/// How long a closing connection may take to send what it still holds.
constexpr auto close_grace = std::chrono::seconds{2};

const char* kind_name(msg::frame_kind k) {
  using msg::frame_kind;
  switch (k) {
  case frame_kind::hello:
    return "hello";
  case frame_kind::welcome:
    return "welcome";
  case frame_kind::round_start:
    return "round start";
  case frame_kind::offer:
    return "offer";
  case frame_kind::accept:
    return "accept";
  case frame_kind::chunk:
    return "chunk";
  case frame_kind::credit:
    return "credit";
  case frame_kind::fetch:
    return "fetch";
  case frame_kind::end_of_stream:
    return "end of stream";
  case frame_kind::stream_closed:
    return "stream closed";
  case frame_kind::done:
    return "done";
  case frame_kind::error:
    return "error";
  case frame_kind::heartbeat:
    return "heartbeat";
  case frame_kind::round_over:
    return "round over";
  case frame_kind::evaluation:
    return "evaluation";
  case frame_kind::secagg_keys:
    return "secagg keys";
  case frame_kind::secagg_roster:
    return "secagg roster";
  case frame_kind::secagg_shares:
    return "secagg shares";
  case frame_kind::secagg_unmask:
    return "secagg unmask";
  case frame_kind::secagg_receipt:
    return "secagg receipt";
  }
  return "unknown";
}

/// The tick of a gateway's timers: often enough for the shortest limit.
std::chrono::milliseconds tick_interval(const gateway_limits& l) {
  auto t =
      std::min({l.heartbeat, l.connection_timeout, l.handshake_timeout}) / 4;
  return std::clamp(t, std::chrono::milliseconds{20},
                    std::chrono::milliseconds{1000});
}

// -- the byte side of one connection ----------------------------------------

/// Framing, TLS and the output of one connection, for either side. Frames
/// are read into the frame_reader's buffer (TLS decrypts straight into it)
/// and handed on whole; a frame to send goes into the socket's write buffer
/// without a copy when that is empty (plain TCP). Counts the bytes queued
/// and written, for the limits on what a peer may leave unread.
class wire_link {
public:
  wire_link(caf::io::broker* self, connection_handle hdl,
            std::shared_ptr<tls_context> tls, const std::string& peer_host,
            uint64_t max_frame_bytes)
      : self_(self), hdl_(hdl), reader_(max_frame_bytes) {
    if (tls) {
      tls_ = std::make_unique<tls_session>(std::move(tls), peer_host);
      // The scribe's write buffer stays the same object for its lifetime.
      tls_->set_output(&self_->wr_buf(hdl_));
    }
    last_input_ = last_output_ = self_->clock().now();
  }

  /// Starts reading; a TLS client sends its first handshake message.
  result<void> start() {
    self_->configure_read(hdl_, caf::io::receive_policy::at_most(read_bytes));
    self_->ack_writes(hdl_, true);
    return tls_ ? advance_handshake() : result<void>{};
  }

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
  uint64_t send(frame&& f) {
    if (closed_)
      return frames_sent_;
    if (pending_.empty() && !output_pending())
      last_output_ = self_->clock().now(); // the stall clock starts now
    pending_.push_back(std::move(f));
    pump();
    return ++frames_sent_;
  }

  /// Queues `f` unencrypted, for a peer that speaks no TLS (plain_peer()):
  /// the one frame that tells it why it is refused.
  void send_plain(const frame& f) {
    if (closed_)
      return;
    auto& buf = self_->wr_buf(hdl_);
    buf.insert(buf.end(), f.begin(), f.end());
    note_queued(f.size());
  }

  /// True iff this end speaks TLS and the peer's first bytes were none.
  bool plain_peer() const { return tls_ && tls_->plain_peer(); }

  /// Closes the connection, after close_notify on a TLS one; nothing is
  /// read or sent after this.
  void close() {
    if (closed_)
      return;
    closed_ = true;
    if (tls_ && secure_) { // TLS's clean end; the socket writes it first
      tls_->close_notify();
      account_ciphertext();
    }
    if (tls_)
      tls_->set_output(nullptr);
    self_->close(hdl_);
  }

  /// The socket wrote; `remaining` bytes wait in its buffers.
  void transferred(uint64_t remaining) {
    written_ = queued_ >= remaining ? queued_ - remaining : 0;
    last_output_ = self_->clock().now();
    while (!frame_ends_.empty() && frame_ends_.front() <= written_) {
      frame_ends_.pop_front();
      ++frames_written_;
    }
    pump();
  }

  uint64_t frames_written() const { return frames_written_; }
  bool output_pending() const {
    return written_ < queued_ || !pending_.empty();
  }
  bool secure() const { return !tls_ || secure_; }
  msg::frame_reader& reader() { return reader_; }

  /// Nothing arrived for `t`.
  bool silent_for(clock_type::duration t) const {
    return self_->clock().now() - last_input_ > t;
  }

  /// Output is pending and none of it moved for `t`.
  bool stalled_for(clock_type::duration t) const {
    return output_pending() && self_->clock().now() - last_output_ > t;
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

  result<void> advance_handshake() {
    auto done = tls_->handshake();
    account_ciphertext();
    if (!done)
      return done.err();
    if (*done) {
      secure_ = true;
      pump();
    }
    return {};
  }

  /// Moves frames from pending_ into the socket's write buffer while it
  /// holds less than two of the largest frames: a frame goes in without a
  /// copy when the buffer is empty (plain TCP), and one more is copied
  /// behind it so that the socket goes on writing without waiting for this
  /// broker; the rest wait here, so what stays allocated in the socket's
  /// buffers is bounded by the frames in flight.
  void pump() {
    if (closed_ || (tls_ && !secure_))
      return;
    auto& buf = self_->wr_buf(hdl_);
    while (!pending_.empty()) {
      auto& f = pending_.front();
      largest_frame_ = std::max<uint64_t>(largest_frame_, f.size());
      auto room = std::max<uint64_t>(coalesce_bytes, 2 * largest_frame_);
      if (!buf.empty() && buf.size() + f.size() > room)
        break;
      if (tls_) {
        if (auto ok = tls_->write(f); !ok)
          log_line(log_level::error, "gateway", to_string(ok.err()));
        account_ciphertext();
      } else if (buf.empty()) {
        auto n = f.size();
        buf.swap(f); // no copy: the socket writes the frame's own buffer
        note_queued(n);
      } else {
        buf.insert(buf.end(), f.begin(), f.end());
        note_queued(f.size());
      }
      frame_ends_.push_back(queued_);
      pending_.pop_front();
    }
  }

  /// Counts and flushes the ciphertext TLS wrote since the last call.
  void account_ciphertext() {
    auto out = tls_->bytes_out();
    if (out != tls_accounted_)
      note_queued(out - tls_accounted_);
    tls_accounted_ = out;
  }

  void note_queued(uint64_t n) {
    queued_ += n;
    self_->flush(hdl_);
  }

  caf::io::broker* self_;
  connection_handle hdl_;
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

// -- server side --------------------------------------------------------------

// State machine of a connection:
//   handshaking (TLS) -> awaiting hello -(hello)-> hello pending
//   -(welcome)-> welcomed -(connection closed | limit | server gone)-> quit
//   hello pending -(refusal)-> closing -(output written)-> quit
// Before it is welcomed a peer may send only heartbeats and one Hello of at
// most max_hello_bytes; every other frame, a second Hello, or the
// handshake timeout closes the connection. Welcomed, it may send the seven
// peer frame kinds within their in-flight limits; anything else closes it.
// Every refusal is counted, logged with the peer's address, and answered
// with an error frame where the peer can still read one.
class server_gateway {
public:
  enum class stage { awaiting_hello, hello_pending, welcomed, closing };

  server_gateway(caf::io::broker* self, connection_handle hdl,
                 server_gate server, gateway_limits limits,
                 std::shared_ptr<tls_context> tls, refusal_counter refusals,
                 caf::actor acceptor)
      : self_(self), hdl_(hdl), server_(std::move(server)), limits_(limits),
        link_(self, hdl, std::move(tls), "", limits.max_hello_bytes),
        refusals_("gateway", std::move(refusals)),
        acceptor_(std::move(acceptor)), opened_(self_->clock().now()) {
    address_ =
        self->remote_addr(hdl) + ":" + std::to_string(self->remote_port(hdl));
  }

  void start() {
    self_->monitor(server_);
    self_->set_down_handler(
        [this](caf::down_msg&) { close_now("the server ended"); });
    if (auto ok = link_.start(); !ok)
      return refuse(ok.err());
    schedule_tick();
  }

  void on_data(const caf::io::new_data_msg& m) {
    if (stage_ == stage::closing)
      return;
    auto ok = link_.take(m.buf, [this](frame&& f) { on_frame(std::move(f)); });
    if (ok)
      return;
    if (ok.err().code == errc::disconnected) // close_notify: as a TCP close
      return close_now("");
    refuse(ok.err());
  }

  void on_transferred(const caf::io::data_transferred_msg& m) {
    link_.transferred(m.remaining);
    while (!fetch_replies_.empty() &&
           fetch_replies_.front() <= link_.frames_written())
      fetch_replies_.pop_front();
    pass_fetches();
    if (stage_ == stage::closing && !link_.output_pending())
      close_now("");
  }

  /// A frame the server sends unasked (round start, done, round over).
  void push(frame f) {
    if (stage_ == stage::welcomed)
      link_.send(std::move(f));
  }

  void on_tick() {
    auto now = self_->clock().now();
    if (stage_ == stage::closing) {
      if (now - closing_since_ > close_grace)
        close_now("");
      return schedule_tick();
    }
    if (stage_ != stage::welcomed && now - opened_ > limits_.handshake_timeout)
      return refuse({errc::timeout,
                     std::string{link_.secure() ? "no Hello"
                                                : "no TLS "
                                                  "handshake"} +
                         " within handshake_timeout_s (" +
                         std::to_string(limits_.handshake_timeout.count()) +
                         " ms)"});
    if (link_.silent_for(limits_.connection_timeout))
      return refuse({errc::timeout,
                     "nothing arrived for " +
                         std::to_string(limits_.connection_timeout.count()) +
                         " ms (connection_timeout_s)"});
    if (link_.stalled_for(limits_.connection_timeout))
      return refuse({errc::timeout,
                     "the peer read nothing for " +
                         std::to_string(limits_.connection_timeout.count()) +
                         " ms (connection_timeout_s)"});
    if (stage_ == stage::welcomed && now - last_beat_ >= limits_.heartbeat) {
      last_beat_ = now;
      link_.send(msg::encode_heartbeat());
    }
    schedule_tick();
  }

  void on_closed() { close_now(""); }

  /// The acceptor needs this connection's place for a newer one.
  void on_evict(uint32_t max_unauthenticated) {
    if (stage_ == stage::awaiting_hello || stage_ == stage::hello_pending)
      refuse({errc::too_many_requests,
              "not welcomed yet when more than max_unauthenticated (" +
                  std::to_string(max_unauthenticated) +
                  ") newer connections arrived: the oldest gives way"});
  }

private:
  void schedule_tick() {
    self_->delayed_send(self_, tick_interval(limits_), beat_atom::value);
  }

  void on_frame(frame&& f) {
    if (stage_ == stage::closing)
      return;
    auto kind = msg::kind_of(f);
    if (!kind)
      return refuse(kind.err());
    if (*kind == msg::frame_kind::heartbeat)
      return;
    if (msg::request_id(f) == 0)
      return refuse({errc::malformed_frame, std::string{"a "} +
                                                kind_name(*kind) +
                                                " frame without a request id"});
    if (stage_ != stage::welcomed) {
      if (*kind != msg::frame_kind::hello || stage_ != stage::awaiting_hello)
        return refuse({errc::not_authenticated,
                       std::string{"a "} + kind_name(*kind) +
                           " frame before the peer was welcomed"});
      return forward_hello(std::move(f));
    }
    route(*kind, std::move(f));
  }

  void route(msg::frame_kind kind, frame&& f) {
    using msg::frame_kind;
    switch (kind) {
    case frame_kind::hello:
      if (control_ > 0)
        return too_many("Hello while a request is open");
      return forward_hello(std::move(f));
    case frame_kind::fetch:
      if (fetches_.size() + materialized() >= limits_.window)
        return too_many("more than window (" + std::to_string(limits_.window) +
                        ") fetches in flight");
      fetches_.push_back(std::move(f));
      return pass_fetches();
    case frame_kind::chunk:
    case frame_kind::credit:
      if (uploads_ >= limits_.window)
        return too_many("more than window (" + std::to_string(limits_.window) +
                        ") chunks in flight");
      ++uploads_;
      if (kind == frame_kind::chunk)
        return forward(chunk_atom::value, std::move(f), uploads_, false);
      return forward(credit_atom::value, std::move(f), uploads_, false);
    case frame_kind::offer:
    case frame_kind::end_of_stream:
    case frame_kind::evaluation:
      if (control_ >= 2)
        return too_many("more than 2 offers, ends or evaluations in flight");
      ++control_;
      if (kind == frame_kind::offer)
        return forward(offer_atom::value, std::move(f), control_, false);
      if (kind == frame_kind::evaluation)
        return forward(evaluated_atom::value, std::move(f), control_, false);
      return forward(end_atom::value, std::move(f), control_, false);
    case frame_kind::secagg_keys:
    case frame_kind::secagg_shares:
    case frame_kind::secagg_receipt:
    case frame_kind::secagg_unmask:
      // The server answers keys, shares and receipts when their phase ends: one of
      // each at a time is all an honest client sends.
      if (control_ >= 2)
        return too_many("more than 2 secure aggregation requests, offers, "
                        "ends or evaluations in flight");
      ++control_;
      return forward(secagg_atom::value, std::move(f), control_, false);
    default:
      return refuse(
          {errc::unexpected_message, std::string{"a "} + kind_name(kind) +
                                         " frame is not for the server"});
    }
  }

  /// Model chunks the server has made for this peer and the socket has not
  /// yet taken whole.
  size_t materialized() const {
    return fetches_waiting_ + fetch_replies_.size();
  }

  /// Passes queued fetches to the server while fewer than
  /// materialized_fetches of its chunks are on their way out: a peer's
  /// window of fetches costs the server that many chunks, not window, and
  /// a peer that does not read costs it no more.
  void pass_fetches() {
    while (!fetches_.empty() && materialized() < materialized_fetches &&
           stage_ == stage::welcomed) {
      auto f = std::move(fetches_.front());
      fetches_.pop_front();
      ++fetches_waiting_;
      forward(fetch_atom::value, std::move(f), fetches_waiting_, true);
    }
  }

  void too_many(const std::string& what) {
    refuse({errc::too_many_requests, what});
  }

  void forward_hello(frame&& f) {
    auto id = msg::request_id(f);
    auto h = msg::decode<msg::hello>(f);
    if (!h)
      return refuse(h.err());
    if (stage_ == stage::welcomed && h->client_id != client_id_)
      return refuse(
          {errc::not_authorized,
           "welcomed as " + client_id_ + ", it said Hello as " + h->client_id});
    if (stage_ == stage::welcomed &&
        !refusal_limit_.allow(self_->clock().now()))
      return too_many(refusal_limit_.exceeded(limited_events));
    client_id_ = h->client_id;
    if (stage_ == stage::awaiting_hello)
      stage_ = stage::hello_pending;
    ++control_;
    self_
        ->request(server_, caf::infinite, hello_atom::value, std::move(f),
                  address_, link_.peer_name())
        .then(
            [this, id](frame& reply) {
              --control_;
              on_hello_reply(id, std::move(reply));
            },
            [this](caf::error&) { close_now("the server is gone"); });
  }

  void on_hello_reply(uint32_t id, frame&& reply) {
    if (stage_ == stage::closing)
      return;
    auto kind = msg::kind_of(reply);
    bool welcomed = kind && *kind == msg::frame_kind::welcome;
    msg::set_request_id(reply, id);
    if (!welcomed) { // the server logged and counted its refusal
      link_.send(std::move(reply));
      return start_closing();
    }
    if (stage_ != stage::welcomed) {
      stage_ = stage::welcomed;
      self_->send(acceptor_, welcomed_atom::value);
      link_.reader().set_max_frame_bytes(limits_.max_frame_bytes);
      last_beat_ = self_->clock().now();
    }
    link_.send(std::move(reply));
  }

  /// Passes a welcomed peer's request to the server; its reply goes back
  /// with the request's id. `in_flight` counts it until the reply.
  template <class Atom>
  void forward(Atom atom, frame&& f, uint32_t& in_flight, bool is_fetch) {
    auto id = msg::request_id(f);
    self_->request(server_, caf::infinite, atom, std::move(f))
        .then(
            [this, id, &in_flight, is_fetch](frame& reply) {
              --in_flight;
              if (stage_ == stage::closing)
                return;
              auto refused = msg::error_in(reply);
              msg::set_request_id(reply, id);
              auto queued = link_.send(std::move(reply));
              if (is_fetch) // in flight until the peer has it
                fetch_replies_.push_back(queued);
              if (refused && ends_connection(refused->code))
                disconnect(*refused);
              else if (refused)
                note_refusal(*refused);
            },
            [this](caf::error&) { close_now("the server is gone"); });
  }

  /// Logs a refusal that leaves the connection open, with the peer's
  /// address; past max_refusals within refusal_period (a peer that keeps
  /// asking for what it cannot have), closes the connection.
  void note_refusal(const error& e) {
    if (stage_ == stage::closing)
      return;
    log_line(log_level::warning, "gateway",
             std::string{"refused: "} + to_string(e.code) + ": " + client_id_ +
                 ": " + e.message + " (peer " + address_ + ")");
    if (!refusal_limit_.allow(self_->clock().now()))
      too_many(refusal_limit_.exceeded(limited_events));
  }

  static constexpr const char* limited_events =
      "refused requests or repeated Hellos";

  /// What a client that speaks no TLS to a TLS server is told.
  static constexpr const char* tls_only =
      "it accepts TLS only: set comm_configs.grpc_configs.use_ssl: true, "
      "with client_certificate, client_certificate_key and root_certificate";

  /// Refusals by the server side that mark the peer as broken or hostile:
  /// after its answer, the connection ends. Others (a stale round, a reset
  /// stream, sitting a round out) are part of an honest client's life.
  static bool ends_connection(errc code) {
    switch (code) {
    case errc::malformed_frame:
    case errc::unsupported_version:
    case errc::unexpected_message:
    case errc::bad_checksum:
    case errc::out_of_range:
    case errc::manifest_mismatch:
    case errc::not_authorized:
    case errc::poisoned_update:
      return true;
    default:
      return false;
    }
  }

public:
  /// The server side refused this peer (already counted there): log it with
  /// the peer's address, and close once the answer is written.
  void disconnect(const error& e) {
    if (stage_ == stage::closing)
      return;
    log_line(log_level::warning, "gateway",
             std::string{"refused: "} + to_string(e.code) + ": " + client_id_ +
                 ": " + e.message + " (peer " + address_ +
                 "); closing the connection");
    start_closing();
  }

  /// Its client resumed its session on another connection: this one closes,
  /// told why (the frame pushed), neither counted nor logged as a refusal.
  void replaced() {
    if (stage_ == stage::closing)
      return;
    log_line("gateway", "closing the connection of " + client_id_ + " (peer " +
                            address_ + "): it resumed on another connection");
    start_closing();
  }

private:
  /// Counts and logs `e` with the peer's address, tells the peer if it can
  /// still read, and closes the connection.
  void refuse(const error& e) {
    if (stage_ == stage::closing)
      return;
    auto who = stage_ == stage::welcomed ? client_id_ + ": " : std::string{};
    auto reply = refusals_.refuse(
        {e.code, who + e.message + " (peer " + address_ + ")"});
    if (link_.secure())
      link_.send(std::move(reply));
    else if (link_.plain_peer()) // it reads no TLS: say so in plain bytes
      link_.send_plain(msg::encode(error{errc::not_authorized, tls_only}));
    start_closing();
  }

  void start_closing() {
    stage_ = stage::closing;
    closing_since_ = self_->clock().now();
    if (!link_.output_pending())
      close_now("");
  }

  void close_now(const std::string& why) {
    if (!why.empty())
      log_line("gateway", "closing the connection of " + address_ + ": " + why);
    link_.close();
    self_->quit();
  }

  caf::io::broker* self_;
  connection_handle hdl_;
  server_gate server_;
  gateway_limits limits_;
  wire_link link_;
  refusal_log refusals_;
  caf::actor acceptor_; ///< told when this connection is welcomed
  std::string address_;
  std::string client_id_; ///< of the Hello; meaningful once welcomed
  stage stage_ = stage::awaiting_hello;
  std::deque<frame> fetches_;    ///< fetches not yet passed to the server
  uint32_t fetches_waiting_ = 0; ///< fetches the server has not answered
  /// Answered fetches not yet written to the socket: each reply's number
  /// among the frames sent.
  std::deque<uint64_t> fetch_replies_;
  uint32_t uploads_ = 0; ///< chunks and credits the server has not answered
  uint32_t control_ = 0; ///< hello, offer and end the server has not answered
  clock_type::time_point opened_;
  clock_type::time_point closing_since_;
  clock_type::time_point last_beat_;
  /// Refusals that leave the connection open, and repeated Hellos.
  event_limit refusal_limit_{max_refusals, refusal_period};
};

caf::behavior server_gateway_actor(caf::io::broker* self, connection_handle hdl,
                                   server_gate server, gateway_limits limits,
                                   std::shared_ptr<tls_context> tls,
                                   refusal_counter refusals,
                                   caf::actor acceptor) {
  auto st = std::make_shared<server_gateway>(
      self, hdl, std::move(server), limits, std::move(tls), std::move(refusals),
      std::move(acceptor));
  st->start();
  return {
      [st](const caf::io::new_data_msg& m) { st->on_data(m); },
      [st](const caf::io::data_transferred_msg& m) { st->on_transferred(m); },
      [st](const caf::io::connection_closed_msg&) { st->on_closed(); },
      [st](beat_atom) { st->on_tick(); },
      [st, limits](evict_atom) { st->on_evict(limits.max_unauthenticated); },
      [st](round_atom, const frame& f) { st->push(f); },
      [st](done_atom, const frame& f) { st->push(f); },
      [st](secagg_atom, const frame& f) { st->push(f); }, // unmask asked
      [st](reject_atom, const frame& f) { // its update was rejected
        st->push(f);
        if (auto e = msg::error_in(f))
          st->disconnect(*e);
      },
      [st](replaced_atom, const frame& f) { // resumed on another connection
        st->push(f);
        st->replaced();
      },
      [st](idle_atom, uint32_t round) {
        st->push(msg::encode(msg::round_over{round}));
      },
  };
}

// The acceptor: every accepted connection gets a gateway. Connections not
// yet welcomed are kept oldest first; one past max_unauthenticated makes the
// oldest give way, so a peer that opens idle connections cannot keep a
// client whose handshake takes milliseconds out for longer than it takes to
// open max_unauthenticated more.
caf::behavior acceptor_actor(caf::io::broker* self, int fd, server_gate server,
                             gateway_limits limits,
                             std::shared_ptr<tls_context> tls,
                             refusal_counter refusals) {
  self->add_doorman(fd);
  auto unwelcomed = std::make_shared<std::deque<caf::actor>>();
  auto forget = [unwelcomed](const caf::actor_addr& who) {
    auto it = std::find_if(unwelcomed->begin(), unwelcomed->end(),
                           [&](const caf::actor& a) { return a == who; });
    if (it != unwelcomed->end())
      unwelcomed->erase(it);
  };
  self->set_down_handler(
      [forget](caf::down_msg& m) { forget(caf::actor_addr{m.source}); });
  return {
      [=](const caf::io::new_connection_msg& m) {
        if (unwelcomed->size() >= limits.max_unauthenticated) {
          self->send(unwelcomed->front(), evict_atom::value);
          unwelcomed->pop_front();
        }
        auto me = caf::actor_cast<caf::actor>(self);
        auto g = self->fork(server_gateway_actor, m.handle, server, limits, tls,
                            refusals, me);
        self->monitor(g);
        unwelcomed->push_back(std::move(g));
      },
      [=](welcomed_atom) {
        forget(caf::actor_cast<caf::actor_addr>(self->current_sender()));
      },
      [](const caf::io::acceptor_closed_msg&) {},
  };
}

// -- client side --------------------------------------------------------------

// State machine: connecting (TLS handshake) -> open -(connection closed,
// silence, or exit)-> quit; connecting | open -(refused)-> refused
// -(the reason answered)-> quit. Requests of the client actor leave as
// frames with fresh request ids and are answered by the reply of the same
// id; requests still open when the connection ends fail with a CAF error
// (the client reconnects through a new gateway). A refusal (a TLS
// handshake that fails, the server's alert on this client's certificate,
// or the server's not_authorized error frame) is final: the open requests,
// or else the next one (a TLS 1.3 refusal may come before the client's
// Hello), are answered with a not_authorized error frame that says why, so
// that the client stops at once instead of reconnecting.
class client_gateway {
public:
  client_gateway(caf::io::broker* self, connection_handle hdl,
                 gateway_limits limits, std::shared_ptr<tls_context> tls,
                 const std::string& host, std::string where)
      : self_(self), hdl_(hdl), limits_(limits),
        link_(self, hdl, std::move(tls), host,
              std::max<uint64_t>(limits.max_frame_bytes, 64 << 20)),
        where_(std::move(where)) {}

  void start() {
    if (auto ok = link_.start(); !ok)
      return fail(ok.err(), "the server at " + where_ + ": ");
    last_beat_ = self_->clock().now();
    schedule_tick();
  }

  caf::result<frame> ask(frame&& f) {
    if (refused_) {
      auto rp = self_->make_response_promise<frame>();
      rp.deliver(msg::encode(*refused_));
      self_->quit();
      return rp;
    }
    if (!owner_) {
      owner_ = caf::actor_cast<caf::actor>(self_->current_sender());
      self_->monitor(owner_);
      self_->set_down_handler([this](caf::down_msg&) { close(""); });
    }
    auto id = next_id_++;
    if (next_id_ == 0)
      next_id_ = 1;
    msg::set_request_id(f, id);
    auto rp = self_->make_response_promise<frame>();
    pending_.emplace(id, rp);
    link_.send(std::move(f));
    return rp;
  }

  void on_data(const caf::io::new_data_msg& m) {
    if (refused_)
      return;
    auto ok = link_.take(m.buf, [this](frame&& f) { on_frame(std::move(f)); });
    if (!ok)
      fail(ok.err(), "the server at " + where_ + ": ");
  }

  void on_transferred(const caf::io::data_transferred_msg& m) {
    link_.transferred(m.remaining);
  }

  void on_tick() {
    if (refused_) { // nobody asked for the reason
      if (self_->clock().now() - refused_at_ > close_grace)
        return self_->quit();
      return schedule_tick();
    }
    if (link_.silent_for(limits_.connection_timeout))
      return close("nothing arrived from the server for " +
                   std::to_string(limits_.connection_timeout.count()) + " ms");
    if (link_.stalled_for(limits_.connection_timeout))
      return close("the server read nothing for " +
                   std::to_string(limits_.connection_timeout.count()) + " ms");
    auto now = self_->clock().now();
    if (link_.secure() && now - last_beat_ >= limits_.heartbeat) {
      last_beat_ = now;
      link_.send(msg::encode_heartbeat());
    }
    schedule_tick();
  }

  /// The server closed the connection (after a refusal: already known).
  void on_closed() {
    if (!refused_)
      close("the server closed the connection");
  }

  void close(const std::string& why) {
    if (!why.empty())
      log_line("gateway", "connection to " + where_ + " closed: " + why);
    for (auto& [id, rp] : pending_)
      rp.deliver(caf::make_error(caf::sec::request_receiver_down));
    pending_.clear();
    link_.close();
    self_->quit();
  }

private:
  void schedule_tick() {
    self_->delayed_send(self_, tick_interval(limits_), beat_atom::value);
  }

  void on_frame(frame&& f) {
    auto id = msg::request_id(f);
    if (id != 0) {
      auto it = pending_.find(id);
      if (it == pending_.end())
        return fail({errc::malformed_frame, "a reply to request " +
                                                std::to_string(id) +
                                                ", which is not open"});
      auto rp = it->second;
      pending_.erase(it);
      rp.deliver(std::move(f));
      return;
    }
    auto kind = msg::kind_of(f);
    if (!kind)
      return fail(kind.err());
    switch (*kind) {
    case msg::frame_kind::heartbeat:
      return;
    case msg::frame_kind::round_start:
      return tell(round_atom::value, std::move(f));
    case msg::frame_kind::done:
      return tell(done_atom::value, std::move(f));
    case msg::frame_kind::secagg_unmask: // the shares to reveal
      return tell(secagg_atom::value, std::move(f));
    case msg::frame_kind::round_over:
      if (auto r = msg::decode<msg::round_over>(f); r && owner_)
        self_->send(owner_, idle_atom::value, r->round);
      return;
    case msg::frame_kind::error: { // a refusal of the connection follows
      auto e = msg::error_in(f);
      if (e && e->code == errc::not_authorized)
        return fail(*e,
                    "the server at " + where_ + " refused the connection: ");
      if (e)
        log_line(log_level::warning, "gateway",
                 "the server at " + where_ + " refused: " + to_string(*e));
      return;
    }
    default:
      return fail({errc::unexpected_message,
                   std::string{"the server sent an unasked "} +
                       kind_name(*kind) + " frame"});
    }
  }

  template <class Atom> void tell(Atom atom, frame&& f) {
    if (owner_)
      self_->send(owner_, atom, std::move(f));
  }

  /// The stream from the server is broken. A refusal (not_authorized) is
  /// final: the open requests, or else the next one, are answered with its
  /// reason after `about`, and the client stops (no retry helps).
  void fail(const error& e, const std::string& about = "") {
    if (e.code != errc::not_authorized)
      return close(to_string(e));
    refused_ = error{e.code, about + e.message};
    refused_at_ = self_->clock().now();
    link_.close();
    if (pending_.empty())
      return; // the next request takes it (see on_tick)
    for (auto& [id, rp] : pending_)
      rp.deliver(msg::encode(*refused_));
    pending_.clear();
    self_->quit();
  }

  caf::io::broker* self_;
  connection_handle hdl_;
  gateway_limits limits_;
  wire_link link_;
  std::string where_;
  caf::actor owner_; ///< the client actor, from its first request
  std::map<uint32_t, caf::typed_response_promise<frame>> pending_;
  uint32_t next_id_ = 1;
  clock_type::time_point last_beat_;
  std::optional<error> refused_; ///< why the server refused this client
  clock_type::time_point refused_at_;
};

caf::behavior client_gateway_actor(caf::io::broker* self, int fd,
                                   gateway_limits limits,
                                   std::shared_ptr<tls_context> tls,
                                   std::string host, std::string where) {
  auto hdl = self->add_scribe(fd);
  auto st = std::make_shared<client_gateway>(self, hdl, limits, std::move(tls),
                                             host, std::move(where));
  st->start();
  auto ask = [st](frame& f) { return st->ask(std::move(f)); };
  return {
      [ask](hello_atom, frame& f) { return ask(f); },
      [ask](fetch_atom, frame& f) { return ask(f); },
      [ask](offer_atom, frame& f) { return ask(f); },
      [ask](chunk_atom, frame& f) { return ask(f); },
      [ask](end_atom, frame& f) { return ask(f); },
      [ask](credit_atom, frame& f) { return ask(f); },
      [ask](evaluated_atom, frame& f) { return ask(f); },
      [ask](secagg_atom, frame& f) { return ask(f); },
      [st](const caf::io::new_data_msg& m) { st->on_data(m); },
      [st](const caf::io::data_transferred_msg& m) { st->on_transferred(m); },
      [st](const caf::io::connection_closed_msg&) { st->on_closed(); },
      [st](beat_atom) { st->on_tick(); },
  };
}

caf::behavior dialer_actor(caf::event_based_actor* self, endpoint at,
                           gateway_limits limits,
                           std::shared_ptr<tls_context> tls) {
  return {
      [=](caf::connect_atom) -> caf::result<server_link> {
        auto timeout = std::min(limits.connection_timeout,
                                std::chrono::milliseconds{5000});
        auto g = dial(self->system(), at, limits, tls, timeout);
        if (!g)
          return caf::make_error(caf::sec::cannot_connect_to_node,
                                 to_string(g.err()));
        return *g;
      },
  };
}

} // namespace

result<listening> listen(caf::actor_system& sys, server_gate server,
                         const endpoint& at, gateway_limits limits,
                         std::shared_ptr<tls_context> tls,
                         refusal_counter refusals) {
  auto l = listen_at(at);
  if (!l)
    return l.err();
  auto acceptor =
      sys.middleman().spawn_broker(acceptor_actor, l->fd, std::move(server),
                                   limits, std::move(tls), std::move(refusals));
  return listening{acceptor, l->port};
}

result<server_link> dial(caf::actor_system& sys, const endpoint& at,
                         const gateway_limits& limits,
                         std::shared_ptr<tls_context> tls,
                         std::chrono::milliseconds timeout) {
  auto fd = connect_to(at, timeout);
  if (!fd)
    return fd.err();
  auto gateway = sys.middleman().spawn_broker(
      client_gateway_actor, *fd, limits, std::move(tls), at.host,
      at.host + ":" + std::to_string(at.port));
  // A broker is untyped by CAF's design; this one forwards exactly the
  // frames of server_link (client_gateway_actor's behavior).
  return caf::actor_cast<server_link>(std::move(gateway));
}

caf::actor spawn_dialer(caf::actor_system& sys, endpoint at,
                        gateway_limits limits,
                        std::shared_ptr<tls_context> tls) {
  return sys.spawn<caf::detached>(dialer_actor, std::move(at), limits,
                                  std::move(tls));
}

} // namespace fedcaf
