#include "actors/server.hpp"

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <random>

#include <caf/all.hpp>

#include "actors/errors.hpp"
#include "actors/interfaces.hpp"
#include "actors/messages.hpp"
#include "actors/wake_up.hpp"
#include "fedcaf/checkpoint.hpp"
#include "fedcaf/log.hpp"
#include "fedcaf/memory_probe.hpp"
#include "fedcaf/stopwatch.hpp"
#include "protocol/client_registry.hpp"
#include "protocol/evaluation_tally.hpp"
#include "protocol/model_exchange.hpp"
#include "protocol/relay_flow.hpp"
#include "protocol/round_announcement.hpp"
#include "protocol/round_reporter.hpp"
#include "protocol/server_secagg_flow.hpp"

namespace fedcaf {

namespace {

/// The terms every round announces, from the server's options.
exchange_terms exchange_terms_of(const server_options& o) {
  return {o.chunk_bytes, o.window, o.compression, o.secure_aggregation.enabled};
}

/// What the round reporter needs of the server's options.
reporter_options reporter_options_of(const server_options& o) {
  return {o.num_rounds,
          o.federated_evaluation,
          o.report_path,
          o.report_html_path,
          o.metrics,
          o.live,
          o.progress,
          o.compression,
          o.dp_noise_multiplier,
          o.dp_sample_rate,
          o.dp_delta,
          o.robust,
          o.poisoned};
}

/// How long the SecAgg+ phases wait, from the server's options.
secagg_timeouts secagg_timeouts_of(const server_options& o) {
  return {o.secagg_keys_timeout, o.secagg_phase_timeout};
}

/// What the reporter needs of a published round (its model aside).
round_outcome
outcome_of(round_result& done,
           std::vector<std::pair<std::string, std::string>> excluded) {
  return {done.round,
          done.clients,
          done.loss,
          done.dp_sgd_epsilon,
          std::move(done.missing),
          std::move(done.contributors),
          std::move(done.staleness),
          std::move(excluded),
          std::move(done.relay_weights)};
}

// State machine: registering -> (start r: announce, serve, route) ->
// (publish r: evaluate, report) -> ... -> stopping (done sent; waiting for
// clients to leave) -> quit. With federated evaluation a successful run
// first asks the connected clients to evaluate the final model.
// Per client: see protocol/client_registry.hpp. Only frames from a
// registered client's current connection are served or routed; anyone else
// is refused before a byte of model data moves.
// The state keeps the CAF parts (promises, timers, sends, monitors) and
// asks the protocol objects: client_registry (who is in), model_exchange
// (what is served and offered), round_announcement (who is sent which
// RoundStart), server_secagg_flow (SecAgg+'s phases), evaluation_tally
// (federated evaluation) and round_reporter (report, lines, events).
class server_state {
public:
  using time_point = caf::actor_clock::time_point;

  server_state(snapshot_ptr initial, server_peers peers, server_options options,
               run_report* report)
      : peers_(std::move(peers)), options_(std::move(options)),
        refusals_("server", options_.refusals),
        exchange_(std::move(initial), exchange_terms_of(options_)),
        rounds_(exchange_),
        registry_({options_.tokens, options_.require_certificate_name,
                   options_.num_clients}),
        reporter_(reporter_options_of(options_), report),
        tally_(options_.max_sample_size, options_.secagg_by_samples) {
    if (options_.secure_aggregation.enabled)
      secagg_.emplace(options_.secure_aggregation, options_.secagg_by_samples,
                      options_.max_sample_size, std::random_device{}(),
                      secagg_timeouts_of(options_), refusals_,
                      secagg_port_of());
    if (options_.live)
      options_.live->set_model(exchange_.model_bytes(), options_.chunk_bytes,
                               exchange_.chunk_count());
    report_ = report;
    if (!options_.resumed_from.empty())
      reporter_.event("resumed", "",
                      "from the checkpoint of round " +
                          std::to_string(options_.resumed_from.back()));
  }

  /// Connects the scheduler and the aggregator to the server before any
  /// client can reach it (the one late binding of the server side).
  void attach(server_actor::pointer self) {
    self_ = self;
    started_ = now();
    self_->set_down_handler([this](caf::down_msg& m) { on_down(m); });
    if (options_.relay)
      relay_.emplace(options_.fetch_silence, relay_port_of());
    self_->send(peers_.scheduler, connect_atom::value, round_host{self_});
    self_->send(peers_.aggregator, connect_atom::value, aggregator_host{self_});
  }

  /// A Hello from a client in this process (`address` empty) or from a
  /// gateway, with the peer's address and the name in its verified client
  /// certificate.
  frame hello(const frame& f, const std::string& address,
              const std::string& certificate_name) {
    auto h = msg::decode<msg::hello>(f);
    if (!h)
      return refuse(h.err());
    // Where a client's handle enters: an in-process client actor, or the
    // gateway of a remote one (a broker: untyped by CAF's design).
    auto sender = caf::actor_cast<client_inbox>(self_->current_sender());
    auto a = registry_.admit(*h, sender, address, certificate_name, stopping_,
                             now());
    if (!a)
      return refusals_.refuse_logged_if(a.err(), registry_.log_refusal());
    if (a->resumed) {
      resumed(h->client_id, sender, *a);
    } else {
      self_->monitor(sender);
      reporter_.registered(h->client_id, a->from);
      self_->send(peers_.scheduler, join_atom::value, h->client_id, a->from);
    }
    return msg::encode(msg::welcome{a->index, options_.num_clients,
                                    options_.client_configs_yaml,
                                    options_.terms, a->resumed});
  }

  /// The scheduler chose round `round` for `chosen`: it opens now (a
  /// relay's: once its parent's model for the round is in place).
  void start_round(uint32_t round, const std::vector<std::string>& chosen) {
    if (relay_)
      return relay_->start(round, chosen, now());
    open_round(round, chosen);
  }

  /// Opens round `round` for `chosen`: announced to those connected.
  void open_round(uint32_t round, const std::vector<std::string>& chosen) {
    if (options_.deadline_from_open.count() > 0)
      self_->delayed_send(peers_.scheduler, options_.deadline_from_open,
                          deadline_atom::value, round);
    round_started_ = now();
    const auto& announced = rounds_.open(round, chosen);
    tally_.expect(rounds_.chosen().size());
    auto reached = registry_.connected_among(rounds_.chosen());
    reporter_.round_started(round, reached.size() * exchange_.model_bytes());
    for (const auto& id : reached)
      self_->send(registry_.find(id)->handle, round_atom::value, announced);
    if (secagg_)
      secagg_->start(round, rounds_.chosen(), reached);
    note_secagg_phase();
  }

  caf::result<frame> secagg_frame(const frame& f) {
    const auto* id = sender_id();
    if (!id)
      return not_registered();
    if (!secagg_)
      return refuse({errc::unexpected_message,
                     *id + ": a secure aggregation frame in a run without "
                           "secure aggregation"});
    if (auto answer = secagg_->receive(*id, f)) {
      note_secagg_phase();
      return std::move(*answer);
    }
    auto rp = self_->make_response_promise<frame>();
    secagg_->hold(
        *id, [rp](frame answer) mutable { rp.deliver(std::move(answer)); });
    note_secagg_phase();
    return rp;
  }

  /// The deadline of phase `p` of `round`: ends it if it is still open.
  void secagg_deadline(uint32_t round, uint32_t p) {
    if (secagg_)
      secagg_->expire(round, p);
    note_secagg_phase();
  }

  /// The aggregator's request at finalize: the plan that unmasks the sum of
  /// `in_sum`'s updates, once the survivors revealed their shares.
  caf::result<secagg::unmask_plan>
  secagg_unmask(uint32_t round, const std::vector<std::string>& in_sum) {
    if (!secagg_)
      return make_error(errc::wrong_round,
                        "no secure aggregation round " + std::to_string(round));
    auto rp = self_->make_response_promise<secagg::unmask_plan>();
    auto ask = [this](const std::string& id, frame f) {
      auto* c = registry_.connected(id);
      if (c)
        self_->send(c->handle, secagg_atom::value, std::move(f));
      return c != nullptr;
    };
    auto ok = secagg_->open_unmask(
        round, in_sum, ask, [rp](result<secagg::unmask_plan> p) mutable {
          p ? rp.deliver(std::move(*p)) : rp.deliver(to_caf(p.err()));
        });
    if (!ok)
      rp.deliver(to_caf(ok.err()));
    note_secagg_phase();
    return rp;
  }

  /// AsyncScheduler: client `id`'s next task, on the current model.
  void task(const std::string& id, uint32_t round) {
    auto* c = registry_.find(id);
    if (!c || stopping_)
      return;
    if (!rounds_.is_open())
      round_started_ = now();
    c->task = rounds_.task(round);
    c->model = exchange_.model();
    reporter_.expect_task(exchange_.model_bytes());
    reporter_.task_started(id, round);
    if (c->state == presence::connected)
      self_->send(c->handle, round_atom::value, c->task);
  }

  /// The scheduler collects these clients' updates again.
  void resend(uint32_t round, const std::vector<std::string>& ids) {
    auto f = rounds_.resend(round);
    for (const auto& id : f ? ids : std::vector<std::string>{}) {
      reporter_.upload_again(id);
      if (auto* c = registry_.connected(id))
        self_->send(c->handle, round_atom::value, *f);
      else if (registry_.find(id))
        rounds_.resend_later(id);
    }
  }

  /// Returns the id of the registered client that sent the current message,
  /// or null.
  const std::string* sender_id() const {
    return registry_.id_of(
        caf::actor_cast<client_inbox>(self_->current_sender()));
  }

  frame not_registered() const {
    return refuse({errc::not_authorized,
                   "a frame from a peer that is not a registered client"});
  }

  /// Returns an error frame, or an empty frame if the offer may be routed.
  frame check_offer(const frame& f) {
    return from_client<msg::offer>(f, [this](const auto& id, auto& o) {
      if (auto ok = exchange_.check_offer(id, o); !ok)
        return refuse(ok.err());
      if (relay_) // an honest child of a round given up sits it out
        if (auto ok = relay_->may_offer(id, o.round, rounds_.round()); !ok)
          return ok.err().code == errc::not_in_round ? msg::encode(ok.err())
                                                     : refuse(ok.err());
      registry_.find(id)->model.reset(); // its download is complete
      if (o.round == rounds_.round()) // a repeated offer replaces its figures
        reporter_.note_offer(id, tally_.offered(id, o.sample_count),
                             std::move(o.metrics));
      return frame{};
    });
  }

  /// A client's evaluation of the model served now or of the one before:
  /// folded into that round's client_metrics, once per client.
  frame evaluated(const frame& f) {
    return from_client<msg::evaluation>(f, [this](const auto& id, auto& e) {
      auto of = tally_.add(id, e);
      if (!of)
        return refuse(of.err());
      reporter_.evaluated(id, e.round, e.sample_count);
      if (reporter_.note_evaluations(**of, tally_.all_answered(**of),
                                     tally_.complete(**of), stamp()) &&
          tally_.final_pass())
        end_run("");
      return msg::encode(msg::evaluation{e.round, e.sample_count, {}});
    });
  }

  /// The final model's evaluation took too long: end the run with what came.
  void evaluation_overdue() {
    if (!tally_.final_pass() || stopping_)
      return;
    log_line("server", tally_.overdue_line());
    end_run("");
  }

  /// A fetch: answered now, or (a relay's) once the chunk's bytes are in.
  caf::result<frame> serve(const frame& f) {
    const auto* id = sender_id();
    if (!id)
      return not_registered();
    auto req = msg::decode<msg::fetch>(f);
    if (!req)
      return refuse(req.err());
    auto range = exchange_.chunk_range(req->sequence);
    if (range && overwritten(req->model_version, range->first))
      return refuse(error{
          errc::not_in_round,
          "chunk " + std::to_string(req->sequence) + " of model version " +
              std::to_string(req->model_version) +
              " holds the round's sums already (every participant has it): "
              "the round goes on without " +
              *id});
    if (relay_) {
      auto rp = self_->make_response_promise<frame>();
      relay_->fetch(*id, *req, range, now(),
                    [rp](frame out) mutable { rp.deliver(std::move(out)); });
      return rp;
    }
    auto out = serve_chunk(*id, *req, nullptr);
    return out ? std::move(*out) : refuse(out.err());
  }

  /// Window and disk modes: the model of `version` holds the round's sums
  /// (a server's new mean, a relay's running sum) up to byte `bytes`.
  void sums_written(uint64_t version, uint64_t bytes) {
    overwritten_ = {version, bytes};
  }

  /// True iff byte `offset` of model `version` is overwritten by the
  /// round's sums: a participant downloaded it before it delivered its own
  /// chunk there, and anybody else must not read a relay's group's sum (or
  /// a mix of two models). Async rounds serve versions apart: not kept.
  bool overwritten(uint64_t version, uint64_t offset) const {
    return !options_.async && version == overwritten_.first &&
           offset < overwritten_.second;
  }

  /// Serves `req` of client `id` from the model it downloads (pinned for
  /// it, else `fallback` if set, else the model served now); counts it.
  result<frame> serve_chunk(const std::string& id, const msg::fetch& req,
                            const snapshot_ptr& fallback) {
    const auto* c = registry_.find(id);
    auto chunk = exchange_.serve(req, c && c->model ? c->model : fallback);
    if (!chunk)
      return chunk.err();
    reporter_.count_down(id, chunk->wire_bytes, chunk->model_bytes,
                         chunk->last);
    return std::move(chunk->frame);
  }

  void count_upload(const frame& f) {
    reporter_.count_up(*sender_id(), f.size());
  }

  /// The sender ended its upload stream (after its last credit).
  void upload_ended() { reporter_.upload_ended(*sender_id()); }

  // -- a relay's children's side (protocol/relay_flow) -------------------------

  /// Calls `fn(flow, now)` for a message only a relay's server takes.
  /// Returns false iff this server is no relay's.
  template <class F> bool with_relay(F&& fn) {
    if (!relay_)
      return false;
    fn(*relay_, now());
    return true;
  }

  /// A relay's upstream half hands `m`, its parent's model of the next
  /// round, whole or still arriving; answered with the round's sum.
  caf::result<relay_result> take_parent_model(relay_model m) {
    // The sender hears the round's sum settle as it streams up (asked
    // before the promise takes the request over).
    auto courier =
        caf::actor_cast<relay_courier_actor>(self_->current_sender());
    auto rp = self_->make_response_promise<relay_result>();
    parent_request parent{[rp](result<relay_result> r) mutable {
                            r ? rp.deliver(std::move(*r))
                              : rp.deliver(to_caf(r.err()));
                          },
                          [courier](const relay_step& step) {
                            caf::anon_send(courier, settled_atom::value, step);
                          }};
    if (!with_relay([&m, &parent](relay_flow& r, time_point now) {
          r.take(std::move(m), std::move(parent), now);
        }))
      rp.deliver(make_error(errc::unexpected_message, "not a relay"));
    return rp;
  }

  /// A relay's round `round` cannot have min_clients: see
  /// relay_flow::sit_out. 0: the run is ending.
  caf::result<uint32_t> sit_out(uint32_t round) {
    auto rp = self_->make_response_promise<uint32_t>();
    sit_out_reply reply = [rp](result<uint32_t> next) mutable {
      next ? rp.deliver(*next) : rp.deliver(to_caf(next.err()));
    };
    if (!with_relay([round, &reply](relay_flow& r, time_point now) {
          r.sit_out(round, std::move(reply), now);
        }))
      rp.deliver(make_error(errc::unexpected_message, "not a relay"));
    return rp;
  }

  /// What the relay's flow needs done: the aggregator's adoption, rounds
  /// opened and sat out, chunks served and refused, timers.
  relay_port relay_port_of() {
    relay_port p;
    p.adopt = [this](relay_model m) { adopt(std::move(m)); };
    p.open_round = [this](uint32_t round, const auto& chosen) {
      open_round(round, chosen);
    };
    p.sit_out = [this](uint32_t round) {
      self_->send(peers_.scheduler, sit_out_atom::value, round);
    };
    p.sat_out = [this](uint32_t round, bool was_open) {
      if (was_open)
        close_round(round);
      reporter_.sat_out(round);
    };
    p.serve = [this](const auto& id, const auto& req, const auto& pinned) {
      return serve_chunk(id, req, pinned);
    };
    p.refuse = [this](const error& e) { return refuse(e); };
    p.arrived = [this](uint64_t upto) {
      self_->send(peers_.aggregator, arrived_atom::value, upto);
    };
    p.pace_after = [this](std::chrono::milliseconds after) {
      self_->delayed_send(self_, after, pace_atom::value);
    };
    p.resident = wake_up<server_actor, uint64_t>(self_, resident_atom::value);
    return p;
  }

  /// Has the aggregator adopt `m` as the global model, then serves it.
  void adopt(relay_model m) {
    self_
        ->request(peers_.aggregator, caf::infinite, adopt_atom::value,
                  std::move(m))
        .then(
            [this](snapshot_ptr& model) {
              exchange_.install(model);
              relay_->adopted(std::move(model), now());
            },
            [this](caf::error& e) {
              stop("the parent's model could not be taken: " +
                   self_->system().render(e));
            });
  }

  caf::typed_response_promise<bool> publish(round_result done) {
    auto model = done.model;
    if (relay_) // its sum goes up; its children are never served it
      relay_->published(
          relay_result{done.model, done.weight, done.clients, done.loss},
          now());
    else
      exchange_.install(model);
    close_round(done.round);
    auto rp = self_->make_response_promise<bool>();
    auto record = reporter_.open_record(
        outcome_of(done, secagg_ ? secagg_->excluded()
                                 : decltype(secagg_->excluded()){}),
        *model);
    // The previous round's evaluations are as complete as they will be.
    reporter_.print_held(stamp());
    tally_.serve(done.round);
    auto started = round_started_;
    if (options_.async) { // the next version's figures start now
      round_started_ = now();
      reporter_.start_traffic();
    }
    evaluate(std::move(record), started, rp, std::move(model));
    return rp;
  }

  /// Round `round` is over: async tasks go on; a sync round's clients may
  /// give up their models.
  void close_round(uint32_t round) {
    rounds_.close(options_.async);
    if (!options_.async)
      for (const auto& id : registry_.connected_among(rounds_.chosen()))
        self_->send(registry_.find(id)->handle, idle_atom::value, round);
  }

  /// Ends the run; a successful one with federated evaluation first has
  /// the connected clients evaluate the final model.
  void stop(const std::string& reason) {
    if (stopping_ || (tally_.final_pass() && reason.empty()))
      return; // only an interruption ends the final evaluation
    if (reason.empty() && options_.federated_evaluation &&
        !tally_.final_pass() && registry_.connected_count() > 0)
      return begin_final_pass();
    end_run(reason);
  }

  void quit() {
    reporter_.close(stamp(), sample_memory().peak_rss_bytes);
    self_->quit();
  }

  /// The scheduler let `id` leave the round: its update was refused for its
  /// content or its silence. Its connection is told (and a gateway ends it).
  void tell_rejected(const std::string& id, const error& why) {
    reporter_.event("rejected", id, to_string(why));
    if (secagg_ && why.code == errc::poisoned_update) // no masked update
      secagg_->blame(id, why.message, false);
    if (auto* c = registry_.connected(id))
      self_->send(c->handle, reject_atom::value,
                  msg::encode(error{why.code, "its update was rejected: " +
                                                  why.message}));
  }

  /// The grace period of a lost client is over.
  void drop(const std::string& id, uint64_t epoch) {
    if (stopping_ || !registry_.drop(id, epoch))
      return;
    reporter_.dropped(id, options_.reconnect_grace.count());
    self_->send(peers_.scheduler, drop_atom::value, id);
    if (relay_)
      relay_->dropped(id, now());
  }

  /// Sends what is open to a client that came back (round_announcement).
  void announce_to(const std::string& id) {
    auto* c = registry_.connected(id);
    auto f = c ? rounds_.again(id, tally_.current().by.count(id) > 0,
                               options_.async ? &c->task : nullptr)
               : std::nullopt;
    if (f)
      self_->send(c->handle, round_atom::value, std::move(*f));
  }

private:
  /// Returns `fn(id, x)` for the frame `f`, decoded as a T, of the
  /// registered client `id` that sent it; else the refusal.
  template <class T, class F> frame from_client(const frame& f, F&& fn) {
    const auto* id = sender_id();
    if (!id)
      return not_registered();
    auto x = msg::decode<T>(f);
    return x ? fn(*id, *x) : refuse(x.err());
  }

  /// The actor's clock: virtual time under CAF's test coordinator.
  time_point now() const { return self_->clock().now(); }

  /// Returns the seconds from `t` to now, on the actor's clock.
  double seconds_from(time_point t) const {
    return std::chrono::duration<double>(now() - t).count();
  }

  report_stamp stamp() const {
    return {seconds_from(started_), refusals_.count()};
  }

  void resumed(const std::string& id, const client_inbox& sender,
               const admission<client_inbox>& a) {
    if (a.replaced) // the connection taken over is closed by its gateway
      self_->monitor(sender);
    if (a.notice) // one session per client; the old connection is told
      self_->send(*a.replaced, replaced_atom::value, msg::encode(*a.notice));
    reporter_.resumed(id, a.from);
    // After the Welcome, which the Hello's reply carries.
    self_->send(self_, round_atom::value, id);
  }

  /// What the SecAgg+ flow needs done: timers, the scheduler told, the
  /// run ended.
  secagg_port secagg_port_of() {
    auto deadline = [this](auto after, uint32_t round, uint32_t phase) {
      self_->delayed_send(self_, after, phase_end_atom::value, round, phase);
    };
    auto send_away = [this](const auto& id, uint32_t round, const auto& why) {
      self_->send(peers_.scheduler, reject_atom::value, id, round, uint64_t{0},
                  error{errc::not_in_round, why});
    };
    auto culprit = [this](const auto& id, uint32_t, const auto& why,
                          uint32_t times) {
      reporter_.event("excluded", id, why);
      if (times < 2)
        return;
      auto gone = error{errc::not_authorized, "dropped from the run: "
                                              "excluded from two rounds"};
      reporter_.event("dropped", id, gone.message);
      if (auto connection = registry_.ban(id))
        self_->send(*connection, reject_atom::value, msg::encode(gone));
      self_->send(peers_.scheduler, drop_atom::value, id);
    };
    return {deadline, send_away, [this](const auto& why) { stop(why); },
            culprit};
  }

  /// Has the evaluator test the model of `record`'s round, then finishes
  /// the round (started at `started`) and answers `rp`.
  void evaluate(round_record record, time_point started,
                caf::typed_response_promise<bool> rp, snapshot_ptr model) {
    auto done = [this, rp, record,
                 started](const evaluation_result& e) mutable {
      if (e.evaluated) {
        record.test_accuracy = e.accuracy;
        record.test_loss = e.loss;
        rounds_.set_previous({record.round, e.accuracy, e.loss, true});
      }
      auto round = record.round;
      reporter_.finish_round(std::move(record), seconds_from(started),
                             unix_seconds(), stamp());
      if (!e.save_failure.empty()) {
        stop(e.save_failure);
        rp.deliver(false);
      } else {
        checkpoint_then(round, rp);
      }
    };
    self_
        ->request(peers_.evaluator, caf::infinite, eval_atom::value,
                  std::move(model))
        .then(done, [done](caf::error&) mutable { done(evaluation_result{}); });
  }

  /// Writes round `round`'s checkpoint where one is due (the aggregator
  /// writes the model and its optimizer's state), then answers `rp`: go on,
  /// or not where the checkpoint failed and on_error is stop.
  void checkpoint_then(uint32_t round, caf::typed_response_promise<bool> rp) {
    const auto& c = options_.checkpoint;
    if (c.dir.empty() || options_.async ||
        (round % c.every_rounds != 0 && round != options_.num_rounds)) {
      rp.deliver(true);
      return;
    }
    checkpoint_state state;
    state.round = round;
    state.config_yaml = options_.config_yaml;
    state.config_digest = config_digest(options_.config_yaml);
    state.resumed_from = options_.resumed_from;
    state.report_rounds = report_ ? rounds_json(report_->rounds) : "[]";
    self_
        ->request(peers_.aggregator, caf::infinite, checkpoint_atom::value,
                  std::move(state))
        .then(
            [this, rp, round](const std::string& failure) mutable {
              if (failure.empty())
                rp.deliver(true);
              else
                checkpoint_failed(round, failure, rp);
            },
            [this, rp, round](caf::error& e) mutable {
              checkpoint_failed(round, self_->system().render(e), rp);
            });
  }

  void checkpoint_failed(uint32_t round, const std::string& why,
                         caf::typed_response_promise<bool> rp) {
    auto line = "the checkpoint of round " + std::to_string(round) +
                " could not be written: " + why + " (the last good one stays)";
    reporter_.event("checkpoint_failed", "", line);
    if (options_.checkpoint.on_error == checkpoint_failure::go_on) {
      log_line(log_level::error, "server", line + "; the run goes on");
      rp.deliver(true);
      return;
    }
    stop(line);
    rp.deliver(false);
  }

  void begin_final_pass() {
    const auto& f = rounds_.evaluate_only(tally_.current().round + 1);
    tally_.begin_final_pass(registry_.connected_count());
    reporter_.final_evaluation_started();
    registry_.for_each_connected([this, &f](const auto&, const auto& c) {
      self_->send(c.handle, round_atom::value, f);
    });
    log_line("server", "asking " + std::to_string(tally_.expected()) +
                           " clients to evaluate the final model");
    self_->delayed_send(self_, options_.evaluation_timeout,
                        evaluated_atom::value);
  }

  void end_run(const std::string& reason) {
    if (stopping_)
      return;
    reporter_.print_held(stamp());
    stopping_ = true;
    rounds_.end();
    reporter_.end(reason);
    if (relay_)
      relay_->end(reason, now());
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

  void on_down(const caf::down_msg& m) {
    auto lost = registry_.lose(
        [&m](const client_inbox& h) { return h.address() == m.source; });
    if (!lost)
      return;
    const auto& [id, epoch] = *lost;
    if (secagg_) {
      secagg_->lost(id);
      note_secagg_phase();
    }
    if (stopping_) {
      if (registry_.connected_count() == 0)
        quit();
      return;
    }
    reporter_.lost(id, self_->system().render(m.reason),
                   options_.reconnect_grace.count());
    self_->delayed_send(self_, options_.reconnect_grace, drop_atom::value, id,
                        epoch);
  }

  frame refuse(const error& e) const { return refusals_.refuse(e); }

  /// Tells the live view secure aggregation's phase (if it is on).
  void note_secagg_phase() {
    if (secagg_)
      reporter_.secagg_phase(to_string(secagg_->current()));
  }

  server_actor::pointer self_ = nullptr;
  server_peers peers_;
  server_options options_;
  refusal_log refusals_;
  model_exchange exchange_;
  round_announcement rounds_;
  client_registry<client_inbox> registry_;
  run_report* report_ = nullptr; ///< its rounds go into checkpoints
  round_reporter reporter_;
  evaluation_tally tally_;
  std::optional<server_secagg_flow> secagg_;
  time_point started_;
  time_point round_started_;
  bool stopping_ = false;
  /// The model version the aggregator sums into in place, and how far.
  std::pair<uint64_t, uint64_t> overwritten_{0, 0};
  /// A relay's children's side: its parent's models and its rounds.
  std::optional<relay_flow> relay_;
};

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
        if (auto refused = state->check_offer(f); !refused.empty())
          return refused;
        self->delegate(peers.scheduler, offer_atom::value, f);
        return caf::delegated<frame>{};
      },
      [self, state, peers](chunk_atom, frame& f) -> caf::result<frame> {
        if (!state->sender_id())
          return state->not_registered();
        state->count_upload(f);
        self->delegate(peers.aggregator, chunk_atom::value, *state->sender_id(),
                       std::move(f));
        return caf::delegated<frame>{};
      },
      [self, state, peers](end_atom, const frame& f) -> caf::result<frame> {
        if (!state->sender_id())
          return state->not_registered();
        state->upload_ended();
        self->delegate(peers.aggregator, end_atom::value, *state->sender_id(),
                       f);
        return caf::delegated<frame>{};
      },
      [self, state, peers](credit_atom, const frame& f) -> caf::result<frame> {
        if (!state->sender_id())
          return state->not_registered();
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
        state->task(id, round);
      },
      [state](stop_atom, const std::string& reason) { state->stop(reason); },
      [state](reject_atom, const std::string& id, const error& refusal) {
        state->tell_rejected(id, refusal);
      },
      [state](evaluated_atom, const frame& f) { return state->evaluated(f); },
      [state](secagg_atom, const frame& f) { return state->secagg_frame(f); },
      [state](unmask_atom, uint32_t round,
              const std::vector<std::string>& in_sum) {
        return state->secagg_unmask(round, in_sum);
      },
      [state](phase_end_atom, uint32_t round, uint32_t phase) {
        state->secagg_deadline(round, phase);
      },
      [state](evaluated_atom) { state->evaluation_overdue(); },
      [state](tick_atom) { state->quit(); },
      [state](sit_out_atom, uint32_t round) { return state->sit_out(round); },
      [state](relay_atom, relay_model& m) {
        return state->take_parent_model(std::move(m));
      },
      [state](arrived_atom, uint64_t offset, uint64_t bytes) {
        state->with_relay([offset, bytes](relay_flow& r, auto now) {
          r.arrived(offset, bytes, now);
        });
      },
      [state](resident_atom, uint64_t seq) {
        state->with_relay(
            [seq](relay_flow& r, auto now) { r.resident(seq, now); });
      },
      [state](pace_atom) {
        state->with_relay([](relay_flow& r, auto now) { r.paced(now); });
      },
      [state](settled_atom, uint32_t round, const relay_step& step) {
        state->with_relay(
            [round, &step](relay_flow& r, auto) { r.settled(round, step); });
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
