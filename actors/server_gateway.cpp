// The server side of the gateways (actors/gateway.hpp): the acceptor, and
// one server gateway per accepted connection. What a peer may do and when
// its connection ends is decided by connection_admission
// (protocol/connection_admission.hpp); the gateway keeps CAF's part: it
// asks the server, answers the peer through its wire_link, logs, and runs
// the timer. Time is the actor clock's (CAF's test coordinator runs it
// virtually), passed to connection_admission.

#include <algorithm>
#include <deque>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "actors/errors.hpp"
#include "actors/gateway.hpp"
#include "actors/wire_link.hpp"
#include "fedcaf/log.hpp"
#include "protocol/connection_admission.hpp"
#include "protocol/hello_throttle.hpp"
#include "protocol/log_pacer.hpp"

namespace fedcaf {

namespace {

/// gateway -> acceptor: this connection was welcomed.
using welcomed_atom = caf::atom_constant<caf::atom("gw_welcome")>;
/// acceptor -> gateway: give way to a newer connection if not welcomed.
using evict_atom = caf::atom_constant<caf::atom("gw_evict")>;
/// acceptor -> itself: log the pacer's summaries of floods that stopped.
using pace_tick_atom = caf::atom_constant<caf::atom("gw_pace")>;
using caf::io::connection_handle;
using action = connection_admission::verdict::action;
using tick_action = connection_admission::tick_verdict::action;

// State machine of a connection (connection_admission's stages):
//   handshaking (TLS) -> awaiting hello -(hello)-> hello pending
//   -(welcome)-> welcomed -(connection closed | limit | server gone)-> quit
//   hello pending -(refusal)-> closing -(output written)-> quit
// Before it is welcomed a peer may send only heartbeats and one Hello of at
// most max_hello_bytes; every other frame, a second Hello, or the
// handshake timeout closes the connection. Welcomed, it may send the nine
// peer frame kinds (a goodbye its last) within their in-flight limits; anything else closes it.
// Every refusal is counted, logged with the peer's address, and answered
// with an error frame where the peer can still read one; past the pacer's
// lines for the peer's host (shared by every gateway: log_pacer), it is
// counted only, and a peer that reads no TLS gets no plain answer.
class server_gateway {
public:
  server_gateway(caf::io::broker* self, connection_handle hdl,
                 server_gate server, gateway_limits limits,
                 std::shared_ptr<tls_context> tls, refusal_counter refusals,
                 std::shared_ptr<log_pacer> pacer, caf::actor acceptor)
      : self_(self), server_(std::move(server)), limits_(limits),
        link_(self, hdl, std::move(tls), "", limits.max_hello_bytes),
        refusals_("gateway", std::move(refusals)), pacer_(std::move(pacer)),
        acceptor_(std::move(acceptor)),
        admission_(limits, address_of(self, hdl), self_->clock().now()) {}

  void start() {
    self_->monitor(server_);
    self_->set_down_handler(
        [this](caf::down_msg&) { close_now("the server ended"); });
    if (auto ok = link_.start(); !ok)
      return refuse(ok.err());
    schedule_tick();
  }

  void on_data(const caf::io::new_data_msg& m) {
    if (admission_.closing())
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
    admission_.written(link_.frames_written());
    pass_fetches();
    if (admission_.closing() && !link_.output_pending())
      close_now("");
  }

  /// A frame the server sends unasked (round start, done, round over).
  void push(frame f) {
    if (admission_.welcomed())
      link_.send(std::move(f));
  }

  void on_tick() {
    auto t = admission_.tick(self_->clock().now(), link_.activity());
    switch (t.what) {
    case tick_action::close: // the closing grace is over: what the peer did
      close_now("", true);   // not read is dropped
      return;
    case tick_action::refuse: // and the closing grace is timed from now
      refuse(t.refusal);
      break;
    case tick_action::heartbeat:
      link_.send(msg::encode_heartbeat());
      break;
    case tick_action::none:
      break;
    }
    schedule_tick();
  }

  void on_closed() { close_now(""); }

  /// The acceptor needs this connection's place for a newer one.
  void on_evict() {
    if (auto e = admission_.evict())
      refuse(*e);
  }

  /// The server side refused this peer (already counted there): log it with
  /// the peer's address, and close once the answer is written.
  void disconnect(const error& e) {
    if (admission_.closing())
      return;
    ended_by_ = to_caf(e);
    if (paced())
      log_line(log_level::warning, "gateway",
               admission_.refused_line(e) + "; closing the connection");
    start_closing();
  }

  /// Its client resumed its session on another connection: this one closes,
  /// told why (the frame pushed), neither counted nor logged as a refusal.
  void replaced() {
    if (admission_.closing())
      return;
    log_line("gateway", "closing the connection of " + admission_.client_id() +
                            " (peer " + admission_.address() +
                            "): it resumed on another connection");
    start_closing();
  }

private:
  static std::string address_of(caf::io::broker* self, connection_handle hdl) {
    return self->remote_addr(hdl) + ":" +
           std::to_string(self->remote_port(hdl));
  }

  void schedule_tick() {
    self_->delayed_send(self_, tick_interval(limits_), beat_atom::value);
  }

  void on_frame(frame&& f) {
    auto v = admission_.admit(f, self_->clock().now());
    switch (v.what) {
    case action::ignore:
      return;
    case action::refuse:
      return refuse(v.refusal);
    case action::ask:
      return ask(v.kind, std::move(f));
    }
  }

  /// Asks the server the request of `kind` that admission_ admitted.
  void ask(msg::frame_kind kind, frame&& f) {
    using msg::frame_kind;
    switch (kind) {
    case frame_kind::hello:
      return ask_hello(std::move(f));
    case frame_kind::fetch: // admission_ holds it until its turn
      return pass_fetches();
    case frame_kind::chunk:
      return forward(chunk_atom::value, std::move(f), kind);
    case frame_kind::credit:
      return forward(credit_atom::value, std::move(f), kind);
    case frame_kind::offer:
      return forward(offer_atom::value, std::move(f), kind);
    case frame_kind::evaluation:
      return forward(evaluated_atom::value, std::move(f), kind);
    case frame_kind::end_of_stream:
      return forward(end_atom::value, std::move(f), kind);
    case frame_kind::goodbye: // the peer leaves: nothing to answer
      self_->send(server_, goodbye_atom::value, std::move(f));
      return start_closing();
    default: // the four secAgg kinds: admission_ admits no other
      return forward(secagg_atom::value, std::move(f), kind);
    }
  }

  /// Passes queued fetches to the server while admission_ lets them go
  /// (materialized_fetches of its chunks on their way out at most).
  void pass_fetches() {
    while (auto f = admission_.next_fetch())
      forward(fetch_atom::value, std::move(*f), msg::frame_kind::fetch);
  }

  void ask_hello(frame&& f) {
    auto id = msg::request_id(f);
    self_
        ->request(server_, caf::infinite, hello_atom::value, std::move(f),
                  admission_.address(), link_.peer_name())
        .then(
            [this, id](frame& reply) {
              admission_.answered(msg::frame_kind::hello);
              on_hello_reply(id, std::move(reply));
            },
            [this](caf::error&) { close_now("the server is gone"); });
  }

  void on_hello_reply(uint32_t id, frame&& reply) {
    if (admission_.closing())
      return;
    auto kind = msg::kind_of(reply);
    bool welcomed = kind && *kind == msg::frame_kind::welcome;
    msg::set_request_id(reply, id);
    if (!welcomed) { // the server logged and counted its refusal
      link_.send(std::move(reply));
      return start_closing();
    }
    if (admission_.welcome(self_->clock().now())) {
      self_->send(acceptor_, welcomed_atom::value);
      link_.reader().set_max_frame_bytes(limits_.max_frame_bytes);
    }
    link_.send(std::move(reply));
  }

  /// Passes a welcomed peer's request of `kind` to the server; its reply
  /// goes back with the request's id. admission_ counts it until the reply.
  template <class Atom>
  void forward(Atom atom, frame&& f, msg::frame_kind kind) {
    auto id = msg::request_id(f);
    self_->request(server_, caf::infinite, atom, std::move(f))
        .then(
            [this, id, kind](frame& reply) {
              admission_.answered(kind);
              if (admission_.closing())
                return;
              auto refused = msg::error_in(reply);
              msg::set_request_id(reply, id);
              admission_.reply_queued(kind, link_.send(std::move(reply)));
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
    if (admission_.closing())
      return;
    if (paced())
      log_line(log_level::warning, "gateway", admission_.refused_line(e));
    if (auto too_many = admission_.count_refusal(self_->clock().now()))
      refuse(*too_many);
  }

  /// True iff a refusal of this peer is logged (and answered in plain
  /// bytes) now: the pacer's lines for its host are not used up. Logs the
  /// pacer's summaries of hosts whose refusals were counted only.
  bool paced() {
    auto v = pacer_->note(host_of(admission_.address()), self_->clock().now());
    for (const auto& s : v.summaries)
      log_line(log_level::warning, "gateway", "refused: " + s);
    return v.log;
  }

  /// Counts and logs `e` with the peer's address, tells the peer if it can
  /// still read, and closes the connection.
  void refuse(const error& e) {
    if (admission_.closing())
      return;
    bool logged = paced();
    auto refusal = admission_.refusal(e);
    ended_by_ = to_caf(refusal); // the server's lost line says why
    auto reply = refusals_.refuse_logged_if(refusal, logged);
    if (link_.secure())
      link_.send(std::move(reply));
    else if (link_.plain_peer() && logged) // say so in plain bytes
      link_.send_plain(msg::encode(connection_admission::tls_only()));
    start_closing();
  }

  void start_closing() {
    admission_.start_closing(self_->clock().now());
    if (!link_.output_pending())
      close_now("");
  }

  /// Closes the connection and ends the gateway; `reset`: at once, the
  /// output the peer did not read dropped (its closing grace is over).
  void close_now(const std::string& why, bool reset = false) {
    if (!why.empty())
      log_line("gateway", "closing the connection of " + admission_.address() +
                              ": " + why);
    if (reset && link_.output_pending())
      link_.abort();
    else
      link_.close();
    self_->quit(ended_by_);
  }

  caf::io::broker* self_;
  server_gate server_;
  gateway_limits limits_;
  wire_link link_;
  /// Why the gateway ends, where it refused the peer (else none): its
  /// exit reason, which the server's down message carries.
  caf::error ended_by_;
  refusal_log refusals_;
  std::shared_ptr<log_pacer> pacer_; ///< shared by the acceptor's gateways
  caf::actor acceptor_;              ///< told when this connection is welcomed
  connection_admission admission_;
};

caf::behavior server_gateway_actor(caf::io::broker* self, connection_handle hdl,
                                   server_gate server, gateway_limits limits,
                                   std::shared_ptr<tls_context> tls,
                                   refusal_counter refusals,
                                   std::shared_ptr<log_pacer> pacer,
                                   caf::actor acceptor) {
  auto st = std::make_shared<server_gateway>(
      self, hdl, std::move(server), limits, std::move(tls), std::move(refusals),
      std::move(pacer), std::move(acceptor));
  st->start();
  return {
      [st](const caf::io::new_data_msg& m) { st->on_data(m); },
      [st](const caf::io::data_transferred_msg& m) { st->on_transferred(m); },
      [st](const caf::io::connection_closed_msg&) { st->on_closed(); },
      [st](beat_atom) { st->on_tick(); },
      [st](evict_atom) { st->on_evict(); },
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
  constexpr auto pace_period = std::chrono::seconds{10};
  auto pacer = std::make_shared<log_pacer>(
      log_pacer::limits{limits.refusal_log_lines, pace_period});
  self->delayed_send(self, pace_period, pace_tick_atom::value);
  return {
      [self, pacer, pace_period](pace_tick_atom) {
        for (const auto& s : pacer->flush(self->clock().now()))
          log_line(log_level::warning, "gateway", "refused: " + s);
        self->delayed_send(self, pace_period, pace_tick_atom::value);
      },
      [self, unwelcomed, server, limits, tls, refusals,
       pacer](const caf::io::new_connection_msg& m) {
        if (unwelcomed->size() >= limits.max_unauthenticated) {
          self->send(unwelcomed->front(), evict_atom::value);
          unwelcomed->pop_front();
        }
        auto me = caf::actor_cast<caf::actor>(self);
        auto g = self->fork(server_gateway_actor, m.handle, server, limits, tls,
                            refusals, pacer, me);
        self->monitor(g);
        unwelcomed->push_back(std::move(g));
      },
      [self, forget](welcomed_atom) {
        forget(caf::actor_cast<caf::actor_addr>(self->current_sender()));
      },
      [](const caf::io::acceptor_closed_msg&) {},
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

} // namespace fedcaf
