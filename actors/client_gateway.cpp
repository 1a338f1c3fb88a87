// The client side of the gateways (actors/gateway.hpp): a client gateway
// per connection to the server, which stands in for the server towards the
// client actor, and the dialer that makes them off the client's thread.

#include <algorithm>
#include <map>
#include <optional>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "actors/gateway.hpp"
#include "actors/wire_link.hpp"
#include "fedcaf/log.hpp"
#include "protocol/network.hpp"

namespace fedcaf {

namespace {

// Time is the actor clock's (CAF's test coordinator runs it virtually).
using clock_type = caf::actor_clock::clock_type;
using caf::io::connection_handle;

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
                 const std::string& host, std::string where, done_flag done)
      : self_(self), hdl_(hdl), limits_(limits), tls_(tls != nullptr),
        link_(self, hdl, std::move(tls), host,
              std::max<uint64_t>(limits.max_frame_bytes, 64 << 20)),
        where_(std::move(where)), done_(std::move(done)) {}

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
      self_->set_down_handler([this](caf::down_msg&) { owner_gone(); });
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

  /// The client leaves: its Goodbye goes out as the last frame (frames
  /// still queued behind the socket's buffer are dropped: the server reads
  /// nothing after a goodbye), nobody waits for an answer, and the
  /// connection closes once it is written (at most close_grace after the
  /// client is gone).
  void goodbye(frame&& f) {
    if (refused_)
      return;
    msg::set_request_id(f, next_id_++);
    if (next_id_ == 0)
      next_id_ = 1;
    leaving_ = true;
    link_.send_last(std::move(f));
  }

  /// The client actor is gone: the connection closes, once its goodbye is
  /// written if it said one.
  void owner_gone() {
    if (!leaving_ || !link_.output_pending())
      return close("");
    owner_gone_at_ = self_->clock().now();
  }

  void on_data(const caf::io::new_data_msg& m) {
    if (refused_)
      return;
    // A peer whose first answer is no fedcaf (an HTTP server, the live
    // view's port, ssh): refused for good, its words quoted. No retry helps.
    if (!heard_ && !m.buf.empty()) {
      heard_ = true;
      if (auto said = foreign_answer(m.buf, tls_))
        return fail({errc::unsupported_version,
                     "does not speak fedcaf: it answered " + *said +
                         " (is server_uri a fedcaf server's port, not its "
                         "--http one?)"},
                    "the peer at " + where_ + " ");
    }
    auto ok = link_.take(m.buf, [this](frame&& f) { on_frame(std::move(f)); });
    if (!ok)
      fail(ok.err(), "the server at " + where_ + ": ");
  }

  void on_transferred(const caf::io::data_transferred_msg& m) {
    link_.transferred(m.remaining);
    if (owner_gone_at_ && !link_.output_pending())
      close(""); // the goodbye is written
  }

  void on_tick() {
    if (owner_gone_at_ && self_->clock().now() - *owner_gone_at_ > close_grace)
      return close("");
    if (refused_) { // nobody asked for the reason
      if (self_->clock().now() - refused_at_ > close_grace)
        return self_->quit();
      return schedule_tick();
    }
    auto now = self_->clock().now();
    auto link = link_.activity();
    if (link.silent_for(limits_.connection_timeout, now))
      return close("nothing arrived from the server for " +
                   std::to_string(limits_.connection_timeout.count()) + " ms");
    if (link.stalled_for(limits_.connection_timeout, now))
      return close("the server read nothing for " +
                   std::to_string(limits_.connection_timeout.count()) + " ms");
    if (link.secure && now - last_beat_ >= limits_.heartbeat) {
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
      // Said here, on the multiplexer's thread: a trainer that blocks the
      // client actor's thread stops at its next step (a Done that decodes,
      // to a client that registered through this gateway).
      if (done_ && owner_ && msg::decode<msg::done>(f))
        done_->store(true);
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
                       msg::frame_kind_name(*kind) + " frame"});
    }
  }

  template <class Atom> void tell(Atom atom, frame&& f) {
    if (owner_)
      self_->send(owner_, atom, std::move(f));
  }

  /// The stream from the server is broken. A refusal (not_authorized, or
  /// a peer that speaks no fedcaf: unsupported_version) is final: the open
  /// requests, or else the next one, are answered with its reason after
  /// `about`, and the client stops (no retry helps).
  void fail(const error& e, const std::string& about = "") {
    if (e.code != errc::not_authorized && e.code != errc::unsupported_version)
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
  bool tls_;           ///< this end speaks TLS
  bool heard_ = false; ///< the peer's first bytes arrived
  wire_link link_;
  std::string where_;
  done_flag done_;   ///< set when the server's Done arrives (may be null)
  caf::actor owner_; ///< the client actor, from its first request
  std::map<uint32_t, caf::typed_response_promise<frame>> pending_;
  uint32_t next_id_ = 1;
  clock_type::time_point last_beat_;
  std::optional<error> refused_; ///< why the server refused this client
  bool leaving_ = false;         ///< its goodbye is queued
  std::optional<clock_type::time_point> owner_gone_at_;
  clock_type::time_point refused_at_;
};

caf::behavior client_gateway_actor(caf::io::broker* self, int fd,
                                   gateway_limits limits,
                                   std::shared_ptr<tls_context> tls,
                                   std::string host, std::string where,
                                   done_flag done) {
  auto hdl = self->add_scribe(fd);
  auto st =
      std::make_shared<client_gateway>(self, hdl, limits, std::move(tls), host,
                                       std::move(where), std::move(done));
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
      [st](goodbye_atom, frame& f) { st->goodbye(std::move(f)); },
      [st](const caf::io::new_data_msg& m) { st->on_data(m); },
      [st](const caf::io::data_transferred_msg& m) { st->on_transferred(m); },
      [st](const caf::io::connection_closed_msg&) { st->on_closed(); },
      [st](beat_atom) { st->on_tick(); },
  };
}

caf::behavior dialer_actor(caf::event_based_actor* self, endpoint at,
                           gateway_limits limits,
                           std::shared_ptr<tls_context> tls, done_flag done) {
  return {
      [self, at, limits, tls,
       done](caf::connect_atom) -> caf::result<server_link> {
        auto timeout = std::min(limits.connection_timeout,
                                std::chrono::milliseconds{5000});
        auto g = dial(self->system(), at, limits, tls, timeout, done);
        if (!g)
          return caf::make_error(caf::sec::cannot_connect_to_node,
                                 to_string(g.err()));
        return *g;
      },
  };
}

} // namespace

result<server_link> dial(caf::actor_system& sys, const endpoint& at,
                         const gateway_limits& limits,
                         std::shared_ptr<tls_context> tls,
                         std::chrono::milliseconds timeout, done_flag done) {
  auto fd = connect_to(at, timeout);
  if (!fd)
    return fd.err();
  auto gateway = sys.middleman().spawn_broker(
      client_gateway_actor, *fd, limits, std::move(tls), at.host,
      at.host + ":" + std::to_string(at.port), std::move(done));
  // A broker is untyped by CAF's design; this one forwards exactly the
  // frames of server_link (client_gateway_actor's behavior).
  return caf::actor_cast<server_link>(std::move(gateway));
}

caf::actor spawn_dialer(caf::actor_system& sys, endpoint at,
                        gateway_limits limits, std::shared_ptr<tls_context> tls,
                        done_flag done) {
  return sys.spawn<caf::detached>(dialer_actor, std::move(at), limits,
                                  std::move(tls), std::move(done));
}

} // namespace fedcaf
