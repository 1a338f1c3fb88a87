#include "actors/server.hpp"

#include <algorithm>
#include <chrono>
#include <optional>

#include <caf/all.hpp>

#include "actors/errors.hpp"
#include "actors/interfaces.hpp"
#include "actors/messages.hpp"
#include "actors/server_core.hpp"
#include "actors/server_publication.hpp"
#include "actors/server_registration.hpp"
#include "actors/server_relay.hpp"
#include "actors/server_secagg.hpp"
#include "actors/server_shards.hpp"
#include "actors/wake_up.hpp"
#include "fedcaf/log.hpp"
#include "fedcaf/memory_probe.hpp"
#include "protocol/relay_flow.hpp"

namespace fedcaf {

namespace {

// State machine: registering -> (start r: announce, serve, route) ->
// (publish r: evaluate, report) -> ... -> stopping (done sent; waiting for
// clients to leave) -> quit. With federated evaluation a successful run
// first asks the connected clients to evaluate the final model.
// Per client: see protocol/client_registry.hpp. Only frames from a
// registered client's current connection are served or routed; anyone else
// is refused before a byte of model data moves.
// The state keeps the CAF parts (promises, timers, sends, monitors) and
// asks the protocol objects it shares with its parts (server_core.hpp):
// client_registry (who is in), model_exchange (what is served and
// offered), round_announcement (who is sent which RoundStart),
// evaluation_tally (federated evaluation) and round_reporter (report,
// lines, events); a relay's server its relay_flow (its parent's models and
// its rounds). Its parts: server_secagg (SecAgg+'s phases) and
// server_publication (a published round's evaluation, report and
// checkpoint; the final evaluation).
class server_state : private server_core {
public:
  server_state(snapshot_ptr initial, server_peers peers, server_options options,
               run_report* report)
      : server_core(std::move(initial), std::move(peers), std::move(options),
                    report),
        publication_(
            core(), [this](const std::string& why) { stop(why); },
            [this](const std::string& why) { end_run(why); }),
        shards_(core()),
        registration_(core(), shards_, [this](const std::string& key) {
          if (relay_) // it paces a window-mode relay's download no more
            relay_->flow().dropped(key, now());
        }) {
    if (options_.secure_aggregation.enabled)
      secagg_.emplace(core(), [this](const std::string& why) { stop(why); });
  }

  /// Connects the scheduler and the aggregator to the server before any
  /// client can reach it (the one late binding of the server side).
  void attach(server_actor::pointer self) {
    self_ = self;
    started_ = now();
    self_->set_down_handler([this](caf::down_msg& m) { on_down(m); });
    if (options_.relay)
      relay_.emplace(core(), relay_calls());
    self_->send(peers_.scheduler, connect_atom::value, round_host{self_});
    self_->send(peers_.aggregator, connect_atom::value, aggregator_host{self_});
  }

  // -- registration -----------------------------------------------------------

  /// A Hello (server_registration).
  frame hello(const frame& f, const std::string& address,
              const std::string& certificate_name) {
    return registration_.hello(f, address, certificate_name);
  }

  /// The grace period of a lost connection is over (server_registration).
  void drop(const std::string& key, uint64_t epoch) {
    registration_.drop(key, epoch);
  }

  /// The sender says goodbye (`f`): it leaves now (server_registration).
  void goodbye(const frame& f) {
    if (secagg_) // as a loss is: out of its phase before it is dropped
      if (const auto* id = sender_id())
        secagg_->lost(*id);
    registration_.goodbye(self_->current_sender(), f);
    if (stopping_ && registry_.connected_count() == 0)
      quit();
  }

  // -- rounds -----------------------------------------------------------------

  /// The scheduler chose round `round` for `chosen`: it opens now (a
  /// relay's: once its parent's model for the round is in place).
  void start_round(uint32_t round, const std::vector<std::string>& chosen) {
    if (relay_)
      return relay_->flow().start(round, chosen, now());
    open_round(round, chosen);
  }

  using server_core::announce_to; // to a client that came back
  using server_core::give_task;   // AsyncScheduler's tasks

  /// The scheduler collects these clients' updates again.
  void resend(uint32_t round, const std::vector<std::string>& ids) {
    auto f = rounds_.resend(round);
    shards_.collect_again(ids);
    for (const auto& id : f ? ids : std::vector<std::string>{}) {
      reporter_.upload_again(id);
      if (!tell(id, round_atom::value, *f) && registry_.find(id))
        rounds_.resend_later(id);
    }
  }

  /// The scheduler let `id` leave the round: its update was refused for its
  /// content or its silence. Its connection is told (and a gateway ends it).
  void tell_rejected(const std::string& id, const error& why) {
    reporter_.event("rejected", id, to_string(why));
    if (!registry_.connections(id).empty()) // not a lost one sent away
      reporter_.note(run_event::rejected, to_string(why.code), id, why.message);
    if (secagg_ && why.code == errc::poisoned_update)
      secagg_->poisoned(id, why.message);
    shards_.rejected(id, why);
    tell(id, reject_atom::value,
         msg::encode(
             error{why.code, "its update was rejected: " + why.message}));
  }

  /// The scheduler published round `done`: its model is served from now
  /// on (a relay's sum answers its parent's model instead, and is served to
  /// nobody), and the round is finished (server_publication).
  caf::typed_response_promise<bool> publish(round_result done) {
    if (relay_)
      relay_->flow().published(
          relay_result{done.model, done.weight, done.clients, done.loss},
          now());
    else
      exchange_.install(done.model);
    close_round(done.round);
    return publication_.finish(
        std::move(done),
        secagg_ ? secagg_->excluded()
                : std::vector<std::pair<std::string, std::string>>{});
  }

  // -- peer frames ------------------------------------------------------------

  /// Returns the id of the registered client that sent the current message,
  /// or null.
  const std::string* sender_id() const {
    return registry_.id_of(
        caf::actor_cast<client_inbox>(self_->current_sender()));
  }

  /// The client and rank of the sender iff it is a sharded client's rank.
  std::optional<std::pair<std::string, uint32_t>> sender_rank() {
    const auto* key = sender_id();
    return key ? shards_.rank_of(*key) : std::nullopt;
  }

  /// A rank's offer: checked as any client's, then joined with its other
  /// ranks' (server_shards).
  caf::result<frame> rank_offer(const std::pair<std::string, uint32_t>& r,
                                const frame& f) {
    return shards_.offer(r.first, r.second, f, [this, &r](const auto& o) {
      return offer_refusal(r.first, o);
    });
  }

  /// The part that joins the ranks of sharded clients.
  server_shards& shards() { return shards_; }

  frame not_registered() const {
    return refuse({errc::not_authorized,
                   "a frame from a peer that is not a registered client"});
  }

  /// Returns an error frame, or an empty frame if the offer may be routed.
  frame check_offer(const frame& f) {
    return from_client<msg::offer>(f, [this](const auto& id, auto& o) {
      if (auto no = offer_refusal(id, o))
        return std::move(*no);
      registry_.find(id)->model.reset(); // its download is complete
      // A repeated offer replaces its figures. A partial sum weighs (its
      // figures, its evaluations) what it claims, within the clients under
      // its relay; only a configured relay's (the scheduler refuses any
      // other's, after this).
      auto relay = options_.relays.find(id);
      bool partial = o.partial_sum && relay != options_.relays.end();
      auto claimed =
          partial ? std::min(o.sample_count, relay->second) : o.sample_count;
      if (o.round == rounds_.round())
        reporter_.note_offer(id, tally_.offered(id, claimed, partial),
                             std::move(o.metrics));
      return frame{};
    });
  }

  /// A fetch: answered now, or (a relay's) once the chunk's bytes are in.
  caf::result<frame> serve(const frame& f) {
    const auto* id = sender_id();
    if (!id)
      return not_registered();
    auto req = msg::decode<msg::fetch>(f);
    if (!req)
      return refuse(req.err());
    if (auto gone = exchange_.overwritten_refusal(*id, *req,
                                                  shards_.plan_for(*id).get()))
      return refuse(*gone);
    if (relay_) { // answered once the chunk (a rank's: it lies in) is in
      auto shard = shards_.plan_for(*id);
      return relay_->fetch(*id, *req,
                           !shard ? req->sequence
                           : req->sequence < shard->chunk_count()
                               ? shard->position(req->sequence)
                               : exchange_.chunk_count()); // refused there
    }
    auto out = serve_chunk(*id, *req, nullptr);
    return out ? std::move(*out) : refuse(out.err());
  }

  /// Window and disk modes: the model of `version` holds the round's sums
  /// up to byte `bytes` (the aggregator's word, before the credits go out).
  void sums_written(uint64_t version, uint64_t bytes) {
    exchange_.overwritten(version, bytes);
  }

  void count_upload(const frame& f) {
    reporter_.count_up(registry_.find(*sender_id())->logical, f.size());
  }

  /// The sender ended its upload stream (after its last credit).
  void upload_ended() {
    reporter_.upload_ended(registry_.find(*sender_id())->logical);
  }

  /// A client's SecAgg+ frame: see server_secagg.
  caf::result<frame> secagg_frame(const frame& f) {
    const auto* id = sender_id();
    if (!id)
      return not_registered();
    if (!secagg_)
      return refuse({errc::unexpected_message,
                     *id + ": a secure aggregation frame in a run without "
                           "secure aggregation"});
    return secagg_->receive(*id, f);
  }

  /// A client's evaluation of the model served now or of the one before.
  /// (A sharded client's: one of its ranks, once, as the client.)
  frame evaluated(const frame& f) {
    return from_client<msg::evaluation>(f, [this](const auto& key, auto& e) {
      return publication_.evaluated(registry_.find(key)->logical, e);
    });
  }

  /// `fn(relay, now)` for a message only a relay's server takes; on any
  /// other server nothing, or (a request) the result made of `otherwise`.
  template <class F, class... Otherwise>
  auto on_relay(F&& fn, Otherwise&&... otherwise) {
    using answer = decltype(fn(*relay_, now()));
    if (relay_)
      return fn(*relay_, now());
    if constexpr (!std::is_void_v<answer>)
      return answer{std::forward<Otherwise>(otherwise)...};
  }

  // -- timers and the run's end -------------------------------------------------

  /// The aggregator's request at finalize: see server_secagg::unmask.
  caf::result<secagg::unmask_plan>
  secagg_unmask(uint32_t round, const std::vector<std::string>& in_sum) {
    if (!secagg_)
      return make_error(errc::wrong_round,
                        "no secure aggregation round " + std::to_string(round));
    return secagg_->unmask(round, in_sum);
  }

  /// The SecAgg+ part (timers, the aggregator's word on a sum), iff on.
  server_secagg* secagg() { return secagg_ ? &*secagg_ : nullptr; }

  /// The final model's evaluation took too long.
  void evaluation_overdue() { publication_.overdue(); }

  /// Ends the run; a successful one with federated evaluation first has
  /// the connected clients evaluate the final model.
  void stop(const std::string& reason) {
    if (stopping_ || (tally_.final_pass() && reason.empty()))
      return; // only an interruption ends the final evaluation
    if (reason.empty() && options_.federated_evaluation &&
        !tally_.final_pass() && registry_.connected_count() > 0)
      return publication_.begin_final_pass();
    end_run(reason);
  }

  void quit() {
    reporter_.close(stamp(), sample_memory().peak_rss_bytes);
    self_->quit();
  }

private:
  /// What the server's parts share (this state's own).
  server_core& core() { return *this; }

  /// Returns `fn(id, x)` for the frame `f`, decoded as a T, of the
  /// registered client `id` that sent it; else the refusal.
  template <class T, class F> frame from_client(const frame& f, F&& fn) {
    const auto* id = sender_id();
    if (!id)
      return not_registered();
    auto x = msg::decode<T>(f);
    return x ? fn(*id, *x) : refuse(x.err());
  }

  /// Opens round `round` for `chosen`: announced to those connected (a
  /// population's: to each as it registers).
  void open_round(uint32_t round, const std::vector<std::string>& chosen) {
    if (options_.deadline_from_open.count() > 0)
      self_->delayed_send(peers_.scheduler, options_.deadline_from_open,
                          deadline_atom::value, round);
    round_started_ = now();
    const auto& announced = rounds_.open(round, chosen);
    tally_.expect(rounds_.chosen().size());
    if (options_.drawn.members) // its drawn members come, the others go
      registration_.call_up(round, rounds_.chosen());
    auto reached = registry_.connected_among(rounds_.chosen());
    reporter_.registrations_settled(now());
    auto downloads =
        options_.drawn.members ? rounds_.chosen().size() : reached.size();
    reporter_.round_started(round, downloads * exchange_.model_bytes());
    for (const auto& id : reached)
      self_->send(registry_.find(id)->handle, round_atom::value, announced);
    if (secagg_)
      secagg_->start(round, rounds_.chosen(), reached);
  }

  /// Round `round` is over: async tasks go on; a sync round's clients may
  /// give up their models.
  void close_round(uint32_t round) {
    rounds_.close(options_.async);
    shards_.round_over(round);
    if (!options_.async)
      for (const auto& id : registry_.connected_among(rounds_.chosen()))
        self_->send(registry_.find(id)->handle, idle_atom::value, round);
  }

  /// Serves `req` of client `id` from the model it downloads (pinned for
  /// it, else `fallback` if set, else the model served now); counts it.
  result<frame> serve_chunk(const std::string& id, const msg::fetch& req,
                            const snapshot_ptr& fallback) {
    const auto* c = registry_.find(id);
    auto chunk = exchange_.serve(req, c && c->model ? c->model : fallback,
                                 shards_.plan_for(id).get());
    if (!chunk)
      return chunk.err();
    reporter_.count_down(c ? c->logical : id, chunk->wire_bytes,
                         chunk->model_bytes, chunk->last);
    return std::move(chunk->frame);
  }

  /// The answer to client `id`'s offer `o` iff it may not be routed: it
  /// offers as another or in another encoding (refused), or (a relay's
  /// child) of a round given up (not_in_round: an honest one sits it out)
  /// or before the model is whole (refused); nullopt: it may.
  std::optional<frame> offer_refusal(const std::string& id,
                                     const msg::offer& o) {
    auto ok = exchange_.check_offer(id, o);
    if (ok && relay_)
      ok = relay_->flow().may_offer(id, o.round, rounds_.round());
    if (ok)
      return std::nullopt;
    return ok.err().code == errc::not_in_round ? msg::encode(ok.err())
                                               : refuse(ok.err());
  }

  /// What a relay's part asks of the rest of the server.
  server_relay::server_calls relay_calls() {
    return {[this](uint32_t round, const auto& chosen) {
              open_round(round, chosen);
            },
            [this](uint32_t round) { close_round(round); },
            [this](const auto& id, const auto& req, const auto& pinned) {
              return serve_chunk(id, req, pinned);
            },
            [this](const std::string& why) { stop(why); },
            [this] { publication_.begin_final_pass(); }};
  }

  void end_run(const std::string& reason) {
    if (stopping_)
      return;
    reporter_.print_held(stamp());
    stopping_ = true;
    rounds_.end();
    reporter_.end(reason);
    if (relay_) {
      relay_->final_evaluated();
      relay_->flow().end(reason, now());
    }
    auto f =
        msg::encode(msg::done{rounds_.round(), rounds_.previous(), reason});
    registry_.for_each_connected([this, &f](const auto&, const auto& c) {
      self_->send(c.handle, done_atom::value, f);
    });
    if (registry_.connected_count() == 0)
      return quit();
    self_->delayed_send(
        self_,
        reason.empty() ? options_.linger
                       : std::min(options_.linger, options_.early_end_linger),
        tick_atom::value);
  }

  /// A connection ended: its client is lost (server_registration).
  void on_down(const caf::down_msg& m) {
    // SecAgg+ first: its phase closing on the loss may ban it, or end all.
    auto id = registration_.lost(m, [this](const std::string& key) {
      if (secagg_)
        secagg_->lost(key);
    });
    if (id && stopping_ && registry_.connected_count() == 0)
      quit();
  }

  server_publication publication_;
  /// Sharded clients: their ranks' uploads joined into one.
  server_shards shards_;
  server_registration registration_;
  std::optional<server_secagg> secagg_;
  /// A relay's children's side: its parent's models and its rounds.
  std::optional<server_relay> relay_;
};

/// The answer to a relay's request (`what`) on a server that is none.
caf::error not_a_relay(const char* what = "not a relay") {
  return make_error(errc::unexpected_message, what);
}

server_actor::behavior_type serving(server_actor::pointer self,
                                    std::shared_ptr<server_state> state,
                                    server_peers peers) {
  state->attach(self);
  return {
      [state](hello_atom, const frame& f) { return state->hello(f, "", ""); },
      [state](hello_atom, const frame& f, const std::string& address,
              const std::string& certificate_name) {
        return state->hello(f, address, certificate_name);
      },
      [state](fetch_atom, const frame& f) { return state->serve(f); },
      [self, state, peers](offer_atom, const frame& f) -> caf::result<frame> {
        if (auto r = state->sender_rank())
          return state->rank_offer(*r, f);
        if (auto refused = state->check_offer(f); !refused.empty())
          return refused;
        self->delegate(peers.scheduler, offer_atom::value, f);
        return caf::delegated<frame>{};
      },
      [self, state, peers](chunk_atom, frame& f) -> caf::result<frame> {
        if (!state->sender_id())
          return state->not_registered();
        state->count_upload(f);
        if (auto r = state->sender_rank())
          return state->shards().chunk(r->first, r->second, f);
        self->delegate(peers.aggregator, chunk_atom::value, *state->sender_id(),
                       std::move(f));
        return caf::delegated<frame>{};
      },
      [self, state, peers](end_atom, const frame& f) -> caf::result<frame> {
        if (!state->sender_id())
          return state->not_registered();
        state->upload_ended();
        if (auto r = state->sender_rank())
          return state->shards().end(r->first, r->second, f);
        self->delegate(peers.aggregator, end_atom::value, *state->sender_id(),
                       f);
        return caf::delegated<frame>{};
      },
      [self, state, peers](credit_atom, const frame& f) -> caf::result<frame> {
        if (!state->sender_id())
          return state->not_registered();
        if (auto r = state->sender_rank())
          return state->shards().credit(r->first, r->second, f);
        self->delegate(peers.aggregator, credit_atom::value,
                       *state->sender_id(), f);
        return caf::delegated<frame>{};
      },
      [state](start_atom, uint32_t round,
              const std::vector<std::string>& chosen) {
        state->start_round(round, chosen);
      },
      [state](resend_atom, uint32_t round,
              const std::vector<std::string>& ids) {
        state->resend(round, ids);
      },
      [state](round_atom, const std::string& id) { state->announce_to(id); },
      [state](drop_atom, const std::string& id, uint64_t epoch) {
        state->drop(id, epoch);
      },
      [state](publish_atom, round_result& done) {
        return state->publish(std::move(done));
      },
      [state](task_atom, const std::string& id, uint32_t round) {
        state->give_task(id, round);
      },
      [state](stop_atom, const std::string& reason) { state->stop(reason); },
      [state](reject_atom, const std::string& id, const error& refusal) {
        state->tell_rejected(id, refusal);
      },
      [state](evaluated_atom, const frame& f) { return state->evaluated(f); },
      [state](secagg_atom, const frame& f) { return state->secagg_frame(f); },
      [state](goodbye_atom, const frame& f) { state->goodbye(f); },
      [state](unmask_atom, uint32_t round,
              const std::vector<std::string>& in_sum) {
        return state->secagg_unmask(round, in_sum);
      },
      [state](unmasked_atom, uint32_t round, bool in_range) {
        if (auto* s = state->secagg())
          s->unmasked(round, in_range);
      },
      [state](phase_end_atom, uint32_t round, uint32_t phase) {
        if (auto* s = state->secagg()) // the deadline of a phase
          s->expire(round, phase);
      },
      [state](evaluated_atom) { state->evaluation_overdue(); },
      [state](tick_atom) { state->quit(); },
      [state](sit_out_atom, uint32_t round) {
        return state->on_relay(
            [round](server_relay& r, auto) { return r.sit_out(round); },
            not_a_relay("not a relay, or a round already sitting out"));
      },
      [state](relay_atom, relay_model& m) {
        return state->on_relay(
            [&m](server_relay& r, auto) { return r.take(std::move(m)); },
            not_a_relay());
      },
      [state](eval_atom, relay_model& m) {
        return state->on_relay(
            [&m](server_relay& r, auto) {
              return r.evaluate_final(std::move(m));
            },
            not_a_relay());
      },
      [state](arrived_atom, uint64_t offset, uint64_t bytes) {
        state->on_relay([offset, bytes](server_relay& r, auto now) {
          r.flow().arrived(offset, bytes, now);
        });
      },
      [state](resident_atom, uint64_t seq) {
        state->on_relay(
            [seq](server_relay& r, auto now) { r.flow().resident(seq, now); });
      },
      [state](pace_atom) {
        state->on_relay([](server_relay& r, auto now) { r.flow().paced(now); });
      },
      [state](settled_atom, uint32_t round, const relay_step& step) {
        state->on_relay([round, &step](server_relay& r, auto) {
          r.flow().settled(round, step);
        });
      },
      [state](overwrite_atom, uint64_t version, uint64_t bytes) {
        state->sums_written(version, bytes);
      },
  };
}

} // namespace

server_actor spawn_server(caf::actor_system& sys, snapshot_ptr initial,
                          server_peers peers, server_options options,
                          run_report* report) {
  auto state = std::make_shared<server_state>(std::move(initial), peers,
                                              std::move(options), report);
  return sys.spawn(serving, std::move(state), peers);
}

} // namespace fedcaf
