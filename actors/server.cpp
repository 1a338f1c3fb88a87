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
#include "fedcaf/checkpoint.hpp"
#include "fedcaf/log.hpp"
#include "fedcaf/memory_probe.hpp"
#include "fedcaf/relay_residency.hpp"
#include "fedcaf/stopwatch.hpp"
#include "protocol/client_registry.hpp"
#include "protocol/evaluation_tally.hpp"
#include "protocol/fetch_pacing.hpp"
#include "protocol/model_exchange.hpp"
#include "protocol/relay_download.hpp"
#include "protocol/relay_gate.hpp"
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
  return {o.relay ? 0 : o.num_rounds, // a relay runs its parent's rounds
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
    started_ = self_->clock().now();
    self_->set_down_handler([this](caf::down_msg& m) { on_down(m); });
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
                             self_->clock().now());
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

  /// Opens round `round` for the clients the scheduler chose (a relay: once
  /// its parent's model for the round is in place).
  void start_round(uint32_t round, const std::vector<std::string>& chosen) {
    if (options_.relay && !relay_.gate.start(round, chosen))
      return; // held until the parent's model is in
    if (options_.relay_round_deadline.count() > 0)
      self_->delayed_send(peers_.scheduler, options_.relay_round_deadline,
                          deadline_atom::value, round);
    round_started_ = self_->clock().now();
    const auto& announced = rounds_.open(round, chosen);
    if (auto* r = residency()) { // the children's fetches pace the download
      relay_.pacing.start(r->plan().chunk_count(), rounds_.chosen(),
                          round_started_);
      arm_pacing();
    }
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
      round_started_ = self_->clock().now();
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
      if (options_.relay && !relay_.download.complete()) {
        // Only an offer of the round opened on the model still arriving
        // is no honest one's; one of the round before (given up, or just
        // over as the next model comes) sits it out.
        bool on_it = relay_.gate.is_open() && !relay_.adopting &&
                     o.round == rounds_.round();
        if (relay_.download.abandoned() || !on_it)
          // An honest child of a round given up or over: it sits it out.
          return msg::encode(error{
              errc::not_in_round,
              "round " + std::to_string(o.round) +
                  " is sat out: the relay's parent's model of it never came "
                  "whole"});
        // Nobody has the whole model yet: an offer now is no honest one's.
        return refuse({errc::unexpected_message,
                       id + " offered an update before the relay's model of "
                            "the round had arrived whole"});
      }
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

  /// A fetch: answered now, or (a relay whose download of its parent's
  /// model goes on) once the chunk's bytes are in.
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
    auto* r = residency();
    if (r && range && !relay_.adopting &&
        req->model_version == exchange_.model()->version &&
        req->sequence < r->served()) {
      // Gone from a window-mode relay's cache: fetched again from the
      // parent for this child (late, or silent for a while).
      if (r->want(req->sequence, relay_residency::serve)) {
        auto out = serve_now(*id, *req);
        r->release(req->sequence, relay_residency::serve);
        return out;
      }
      auto rp = self_->make_response_promise<frame>();
      relay_.missed[req->sequence].push_back(waiting_fetch{rp, *id, *req});
      return rp;
    }
    auto& d = relay_.download;
    // While the aggregator adopts a model, the one served is the last.
    if (options_.relay && !relay_.adopting && !d.complete() && range &&
        req->model_version == exchange_.model()->version &&
        !d.has(range->first, range->second)) {
      auto rp = self_->make_response_promise<frame>();
      relay_.fetches.emplace(d.wait(range->first, range->second),
                             waiting_fetch{rp, *id, *req});
      return rp;
    }
    return serve_now(*id, *req);
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

  frame serve_now(const std::string& id, const msg::fetch& req) {
    const auto* c = registry_.find(id);
    auto pinned = c ? c->model : nullptr;
    if (!pinned && relay_.given_up &&
        req.model_version == relay_.given_up->version)
      pinned = relay_.given_up; // its children still download it
    auto chunk = exchange_.serve(req, pinned);
    if (!chunk)
      return refuse(chunk.err());
    if (relay_.pacing.active() && !relay_.adopting &&
        req.model_version == exchange_.model()->version) {
      relay_.pacing.fetched(id, req.sequence, self_->clock().now());
      pace();
    }
    reporter_.count_down(id, chunk->wire_bytes, chunk->model_bytes,
                         chunk->last);
    return std::move(chunk->frame);
  }

  /// A relay: bytes [offset, + bytes) of its parent's model are in; the
  /// fetches that waited for them are answered, and once the whole model
  /// is, the aggregator measures it and takes offers.
  void arrived(uint64_t offset, uint64_t bytes) {
    if (relay_.next) { // the next model's (its bytes follow its relay_atom)
      relay_.next->arrived.emplace_back(offset, bytes);
      return;
    }
    auto& d = relay_.download;
    if (!options_.relay || d.complete() || d.abandoned())
      return;
    auto before = d.prefix();
    for (auto ticket : d.arrived(offset, bytes))
      if (auto w = relay_.fetches.extract(ticket))
        w.mapped().rp.deliver(serve_now(w.mapped().id, w.mapped().req));
    // A window-mode relay's aggregator measures g as it comes (after its
    // adoption, which it was asked for before).
    if (d.prefix() > before)
      self_->send(peers_.aggregator, arrived_atom::value, d.prefix());
    if (d.complete())
      self_->send(peers_.aggregator, arrived_atom::value);
  }

  bool pacing() const { return relay_.pacing.active(); }

  /// A window-mode relay's model of the round (relay_residency), or null.
  relay_residency* residency() const {
    const auto& m = exchange_.model();
    return options_.relay && m ? m->residency.get() : nullptr;
  }

  /// The positions every child still pacing has fetched leave the cache;
  /// a child silent for fetch_silence paces no more.
  void pace() {
    auto* r = residency();
    if (!r || !relay_.pacing.active())
      return;
    std::vector<std::string> silent;
    auto low = relay_.pacing.low(self_->clock().now(), options_.fetch_silence,
                                 &silent);
    for (const auto& id : silent)
      log_line(log_level::warning, "server",
               id + " fetched nothing of round " +
                   std::to_string(rounds_.round()) + " for " +
                   std::to_string(options_.fetch_silence.count() / 1000) +
                   " s: the relay's download goes on without waiting for it "
                   "(what it fetches later is fetched again from the parent)");
    // A child that reconnects fetches its window in flight again: the
    // cache keeps a window below the slowest.
    auto count = r->plan().chunk_count();
    r->served_below(low >= count ? count
                                 : low - std::min<uint64_t>(low, r->cache()));
    if (low >= r->plan().chunk_count())
      relay_.pacing.stop();
  }

  /// The next look at the children pacing the download, a quarter of
  /// fetch_silence from now.
  void arm_pacing() {
    if (options_.fetch_silence.count() > 0)
      self_->delayed_send(
          self_,
          std::max(options_.fetch_silence / 4, std::chrono::milliseconds{50}),
          pace_atom::value);
  }

  /// Position `seq` of a window-mode relay's model is resident again: the
  /// fetches that missed it are served.
  void refetched(uint64_t seq) {
    auto waiting = relay_.missed.extract(seq);
    if (waiting.empty())
      return;
    auto* r = residency();
    for (auto& w : waiting.mapped())
      w.rp.deliver(r && !r->abandoned() &&
                           w.req.model_version == exchange_.model()->version
                       ? serve_now(w.id, w.req)
                       : refuse({errc::not_in_round,
                                 "the relay's model of that round is gone"}));
    if (r)
      r->release(seq, relay_residency::serve);
  }

  /// A new model: fetches that missed the last one's cache sit its round
  /// out.
  void forget_missed() {
    for (auto& [seq, waiting] : std::exchange(relay_.missed, {}))
      for (auto& w : waiting)
        w.rp.deliver(refuse(
            {errc::not_in_round, "the relay's model of that round is gone"}));
    relay_.pacing.stop();
  }

  /// Answers every fetch that waits on the parent's model now, with what
  /// is there: the download was given up (the round is sat out, so what a
  /// child trains on it is refused, as in any round sat out), or the run
  /// ends.
  void serve_waiting() {
    for (auto ticket : relay_.download.abandon())
      if (auto w = relay_.fetches.extract(ticket))
        w.mapped().rp.deliver(serve_now(w.mapped().id, w.mapped().req));
  }

  void count_upload(const frame& f) {
    reporter_.count_up(*sender_id(), f.size());
  }

  /// The sender ended its upload stream (after its last credit).
  void upload_ended() { reporter_.upload_ended(*sender_id()); }

  /// A relay: `upstream` is its parent's model for the next round, whole
  /// or, with `arriving`, still coming (arrived() says which bytes are
  /// in). Answers with the round's partial sum once its children's updates
  /// are in. A model that comes while the open round's is still arriving
  /// ends that round (its download was given up upstream: it never comes
  /// whole): the round is sat out, then this one taken.
  caf::result<relay_result> relay(snapshot_ptr upstream, bool arriving) {
    if (!options_.relay || stopping_)
      return make_error(errc::unexpected_message,
                        stopping_ ? "the relay's run has ended"
                                  : "not a relay");
    relay_.upstream = self_->current_sender(); // hears the sum settle
    auto rp = self_->make_response_promise<relay_result>();
    if (relay_.next) { // displaced by a newer one: it never comes whole
      relay_.next->rp.deliver(relay_result{});
      relay_.next = next_model{rp, std::move(upstream), arriving};
      return rp;
    }
    if (relay_.promise) {
      relay_.next = next_model{rp, std::move(upstream), arriving};
      if (!relay_.download.complete())
        give_up_download(); // else the round under way ends first
      return rp;
    }
    relay_.promise = rp;
    take_model(std::move(upstream), arriving);
    return rp;
  }

  /// Has the aggregator adopt `upstream`, whose bytes `in` are in
  /// already. A model before it still arriving (its round sat out at its
  /// deadline) is given up: its waiting fetches are answered with what is
  /// there, and it stays served to the children downloading it until the
  /// next round is answered.
  void take_model(snapshot_ptr upstream, bool arriving,
                  const std::vector<std::pair<uint64_t, uint64_t>>& in = {}) {
    if (!relay_.download.complete() && !relay_.download.abandoned()) {
      serve_waiting();
      relay_.given_up = exchange_.model();
      relay_.given_up_answered = true;
    }
    relay_.download.start(exchange_.model_bytes(), arriving);
    relay_.adopting = true;
    forget_missed();
    if (upstream->residency) // positions fetched again for missed fetches
      upstream->residency->add_waker(
          [weak = caf::actor_cast<caf::weak_actor_ptr>(self_)](uint64_t seq) {
            if (auto self = caf::actor_cast<server_actor>(weak))
              caf::anon_send(self, refetch_atom::value, seq);
          });
    self_
        ->request(peers_.aggregator, caf::infinite, adopt_atom::value,
                  std::move(upstream), arriving)
        .then(
            [this](snapshot_ptr& model) {
              relay_.adopting = false;
              exchange_.install(std::move(model));
              if (stopping_)
                return; // no round opens once the run has ended
              if (relay_.next && !relay_.download.complete())
                return give_up_download(); // before it was in place
              auto released = relay_.gate.model_in();
              if (released.start)
                start_round(released.start->round, released.start->chosen);
              else if (released.choose_again && relay_.sat_out)
                std::exchange(relay_.sat_out, {})
                    ->deliver(stopping_ ? 0u : *released.choose_again);
            },
            [this](caf::error& e) {
              relay_.adopting = false;
              stop("the parent's model could not be taken: " +
                   self_->system().render(e));
            });
    for (const auto& [offset, bytes] : in) // after the adoption's request
      arrived(offset, bytes);
  }

  /// The open round's model never comes whole: the fetches waiting for it
  /// are answered with what came, and the round (if one opened on it) is
  /// sat out by its scheduler; else its answer is no sum at once and the
  /// next model is taken.
  void give_up_download() {
    if (relay_.adopting)
      return; // on with it once the adoption is answered
    serve_waiting();
    relay_.given_up = exchange_.model();
    relay_.given_up_answered = false;
    relay_.gate.withdraw();
    if (relay_.gate.is_open()) {
      log_line(log_level::warning, "server",
               "round " + std::to_string(rounds_.round()) +
                   ": the parent's model of the round never comes whole "
                   "(the relay's download was given up for a newer round)");
      self_->send(peers_.scheduler, sit_out_atom::value, rounds_.round());
      return;
    }
    answer_relay(relay_result{});
  }

  /// A streaming relay: the open round's sum is settled up to `bytes`, its
  /// weight, its children's mean loss and their number as its scheduler
  /// says; its upstream half hears it, and sends that much up.
  void settled(uint32_t round, uint64_t bytes, double weight, double loss,
               uint32_t clients) {
    if (!options_.relay || !relay_.promise || !relay_.upstream ||
        round != rounds_.round())
      return;
    caf::anon_send(caf::actor_cast<caf::actor>(relay_.upstream),
                   settled_atom::value, bytes, weight, loss, clients);
  }

  /// Answers the open round's parent's model with `r`, then takes a model
  /// that waited for it.
  void answer_relay(relay_result r) {
    // A given-up model is served until the round after it is answered:
    // children that were downloading it finish (their round is sat out).
    if (relay_.given_up && std::exchange(relay_.given_up_answered, true))
      relay_.given_up.reset();
    // Answered (a round sat out, perhaps before any child fetched): the
    // download is paced by nobody now.
    if (auto* model = residency())
      model->served_below(model->plan().chunk_count());
    relay_.pacing.stop();
    if (relay_.promise) {
      relay_.promise->deliver(std::move(r));
      relay_.promise.reset();
    }
    if (auto n = std::exchange(relay_.next, std::nullopt)) {
      relay_.promise = n->rp;
      take_model(std::move(n->model), n->arriving, n->arrived);
    }
  }

  caf::typed_response_promise<bool> publish(round_result done) {
    relay_.gate.published();
    auto model = done.model;
    if (options_.relay && model && done.weight > 0)
      // Published now, read by nobody yet: scaled in place, no copy.
      exchange_.scale_sum(*std::const_pointer_cast<model_snapshot>(model),
                          done.weight);
    if (options_.relay) // its sum goes up; its children are never served it
      answer_relay(
          relay_result{done.model, done.weight, done.clients, done.loss});
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
      round_started_ = self_->clock().now();
      reporter_.start_traffic();
    }
    evaluate(std::move(record), started, rp, std::move(model));
    return rp;
  }

  /// A relay's round `round` cannot have min_clients. Once the parent's
  /// model of the round is in (or the round is open already), the round
  /// is sat out: the parent's model is answered with no sum (weight 0: the
  /// upstream client offers its parent nothing this round) and the answer
  /// is the next round. Before, the answer is `round` again, as the model
  /// comes: children may have registered while it did not. 0: the run is
  /// ending.
  caf::result<uint32_t> sit_out(uint32_t round) {
    if (!options_.relay || relay_.sat_out)
      return make_error(errc::unexpected_message,
                        "not a relay, or a round already sitting out");
    auto now = relay_.gate.sit_out(round);
    if (now == relay_gate::sitting::waits) {
      relay_.sat_out = self_->make_response_promise<uint32_t>();
      return *relay_.sat_out;
    }
    if (now == relay_gate::sitting::now_open_round)
      close_round(round);
    answer_relay(relay_result{});
    reporter_.sat_out(round);
    log_line(log_level::warning, "server",
             "round " + std::to_string(round) +
                 ": too few children; the relay sits its parent's round out");
    return stopping_ ? 0u : round + 1;
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
    relay_.pacing.forget(id); // it paces a window-mode relay's download no
    pace();                   // more
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

  /// Returns the seconds from `t` to now, on the actor's clock.
  double seconds_from(time_point t) const {
    return std::chrono::duration<double>(self_->clock().now() - t).count();
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
    for (auto* rp : {relay_.promise ? &*relay_.promise : nullptr,
                     relay_.next ? &relay_.next->rp : nullptr})
      if (rp)
        rp->deliver(
            make_error(errc::internal, "the relay's run ended: " +
                                           (reason.empty() ? "done" : reason)));
    relay_.promise.reset();
    relay_.next.reset();
    serve_waiting();
    relay_.gate.take_waiting_sit_out();
    if (auto rp = std::exchange(relay_.sat_out, {}))
      rp->deliver(0u);
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
  /// A fetch waiting for bytes of a relay's parent's model still on their
  /// way.
  struct waiting_fetch {
    caf::typed_response_promise<frame> rp;
    std::string id;
    msg::fetch req;
  };
  /// A parent's model that came while the open round's was still arriving.
  struct next_model {
    caf::typed_response_promise<relay_result> rp;
    snapshot_ptr model;
    bool arriving = false;
    std::vector<std::pair<uint64_t, uint64_t>> arrived{}; ///< bytes in
  };
  /// A relay's rounds: the open request of its upstream side (the parent's
  /// model, answered with the round's sum), the gate (whether the next
  /// round's model is in place, never the one it was spawned with; a round
  /// start waiting for it), a sit-out waiting for it, the model's download
  /// and the fetches waiting on it.
  struct {
    std::optional<caf::typed_response_promise<relay_result>> promise;
    caf::strong_actor_ptr upstream; ///< who hands the models (the courier)
    relay_gate gate; ///< whether the parent's model is in, a held start
    /// The scheduler's sit_out_atom, held until the parent's model is in.
    std::optional<caf::typed_response_promise<uint32_t>> sat_out;
    relay_download download; ///< which bytes of the model served are in
    std::map<uint64_t, waiting_fetch> fetches; ///< by relay_download ticket
    fetch_pacing pacing; ///< window mode: how far each child fetched
    /// Window mode: fetches of positions gone from the cache, by position,
    /// until they are fetched again from the parent.
    std::map<uint64_t, std::vector<waiting_fetch>> missed;
    std::optional<next_model> next;
    bool adopting = false; ///< the aggregator has not answered adopt_atom
    /// A model given up, still served to the children that download it,
    /// until the round after it is answered (given_up_answered: its own).
    snapshot_ptr given_up;
    bool given_up_answered = false;
  } relay_;
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
      [state](relay_atom, snapshot_ptr& upstream) {
        return state->relay(std::move(upstream), false);
      },
      [state](relay_atom, snapshot_ptr& upstream, bool arriving) {
        return state->relay(std::move(upstream), arriving);
      },
      [state](refetch_atom, uint64_t seq) { state->refetched(seq); },
      [state](pace_atom) {
        state->pace();
        if (state->pacing())
          state->arm_pacing();
      },
      [state](arrived_atom, uint64_t offset, uint64_t bytes) {
        state->arrived(offset, bytes);
      },
      [state](settled_atom, uint32_t round, uint64_t bytes, double weight,
              double loss, uint32_t clients) {
        state->settled(round, bytes, weight, loss, clients);
      },
      [state](settled_atom, uint64_t version, uint64_t bytes) {
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
