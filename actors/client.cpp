#include "actors/client.hpp"

#include <csignal>

#include <memory>
#include <optional>
#include <utility>

#include <caf/all.hpp>

#include "actors/client_core.hpp"
#include "actors/errors.hpp"
#include "actors/messages.hpp"
#include "actors/wake_up.hpp"
#include "fedcaf/log.hpp"
#include "fedcaf/memory_probe.hpp"
#include "fedcaf/stopwatch.hpp"
#include "protocol/client_round.hpp"

namespace fedcaf {

namespace {

/// Calls `fn` with the atom a round's request of kind `kind` goes with.
template <class F> void with_atom_of(client_round::request_kind kind, F&& fn) {
  using kinds = client_round::request_kind;
  switch (kind) {
  case kinds::fetch:
    return fn(fetch_atom::value);
  case kinds::secagg:
    return fn(secagg_atom::value);
  case kinds::offer:
    return fn(offer_atom::value);
  case kinds::credit:
    return fn(credit_atom::value);
  case kinds::chunk:
    return fn(chunk_atom::value);
  case kinds::end:
    return fn(end_atom::value);
  }
}

// State machine, per round (client_round holds the round's stage):
//   idle -(round)-> downloading -(all chunks)-> training -> offering
//   -(accept)-> uploading -(all credits)-> closing -(closed)-> idle
//   ... -(done)-> quit
// Any phase -(server lost, remote)-> reconnecting -(welcome)-> the phase it
// left: a download fetches again what was in flight; an upload offers
// again, and the server answers with where its stream stands.
// A round announced again with `resend` (the server collects the round's
// updates again) sends the trained update once more.
// Replies carry the generation they were asked in; a reconnect or a resend
// starts a new one, and older replies are ignored.
// The protocol objects (protocol/) do the work: client_model, client_round
// with its download_stream and upload_stream, client_secagg_flow,
// client_reporter, reconnect_backoff, transfer_watchdog, client_departure
// (how it ends); they and the connection are its client_core. This state
// sends what client_round's steps ask, times (on the actor's clock) and
// routes the replies.
class client_state : private client_core {
public:
  client_state(server_link server, client_options options,
               trainer_factory factory, run_report* report)
      : client_core(std::move(server), std::move(options), std::move(factory),
                    report) {}

  void attach(client_actor::pointer self) {
    self_ = self;
    report_.start(now());
    self_->set_exception_handler(
        [this](std::exception_ptr& x) { return on_exception(x); });
    self_->set_down_handler([this](caf::down_msg& m) {
      // A gateway given up already (lost_server) may still report its end:
      // its down message can be queued before the demonitor.
      if (m.source != server_.address() || m.source == given_up_)
        return;
      if (!options_.connector)
        return fail({errc::disconnected,
                     "lost the server: " + self_->system().render(m.reason)});
      lost_server(self_->system().render(m.reason));
    });
    self_->monitor(server_);
    register_with_server();
  }

  void on_round(const frame& f) {
    using answer = client_round::answer;
    auto rs = msg::decode<msg::round_start>(f);
    if (!rs)
      return fail(rs.err());
    if (!model_)
      return fail({errc::unexpected_message, "round before welcome"});
    auto a = client_round::answer_announcement(round_, *rs, reconnecting_);
    if (a == answer::wait)
      next_task_ = f; // starts once the upload has closed
    if (a != answer::start && a != answer::send_again)
      return;
    // A round that goes on while reconnecting ends the reconnection: its
    // requests go to the server this client has.
    reconnecting_ = false;
    if (a == answer::send_again)
      return run(round_->send_again());
    if (auto late = model_->first_round(rs->round); !late.empty())
      log_line(log_level::warning, options_.client_id, late);
    auto started = client_round::start(*rs, *model_, report_, secagg_, now());
    if (!started)
      return depart(started.err());
    round_.emplace(std::move(*started));
    run(round_->begin());
  }

  void on_done(const frame& f) {
    auto d = msg::decode<msg::done>(f);
    if (!d)
      return fail(d.err());
    report_.note_metrics(d->final);
    departure_.run_over();
    if (!d->reason.empty())
      return fail(
          {errc::disconnected, "the server ended the run: " + d->reason});
    finish();
  }

  /// The server rejected this client's update (its content or its silence).
  void on_rejected(const frame& f) {
    if (auto e = msg::error_in(f))
      fail(*e);
  }

  /// The server published round `round`: a client that does not hold its
  /// model between rounds gives it up now.
  void on_round_over(uint32_t round) {
    auto idle = model_ && !reconnecting_ &&
                (!round_ || round_->current_stage() == stage::over);
    if (!options_.hold_model && idle && round == round_number())
      model_->drop();
  }

  /// A window-mode relay's trainer asks for model bytes [offset, + bytes)
  /// of the round's model again (asked again after a reconnection).
  void on_refetch(uint64_t offset, uint64_t bytes) {
    if (!round_ || !model_)
      return model_ ? model_->refetched(offset, {}) : void();
    refetch_.ask(round_number(), offset, bytes,
                 round_->refetch_requests(offset, bytes));
  }

  /// More of the update may go up (a streaming relay's sum settled).
  void on_ready() {
    if (round_)
      run(round_->more_ready());
  }

  void on_tick() {
    if (!watchdog_.active())
      return;
    if (round_ && round_->waits_on_update()) // not on the link
      watchdog_.moved(now());
    auto why = watchdog_.stuck(now());
    if (!why)
      return arm_timer();
    if (!options_.connector)
      return fail({errc::timeout, *why});
    // Remote: the link may be dead without either end knowing yet. Register
    // again (over a new connection once the old one is gone) and resume.
    lost_server(*why);
  }

  void try_reconnect(uint64_t gen) {
    if (!reconnecting_ || gen != generation_)
      return;
    self_
        ->request(options_.connector, std::chrono::seconds{30},
                  caf::connect_atom::value)
        .then(
            [this, gen](server_link& gateway) {
              if (gen != generation_) // a later attempt: this one's unused
                return self_->send_exit(gateway,
                                        caf::exit_reason::user_shutdown);
              server_ = std::move(gateway);
              self_->monitor(server_);
              register_with_server();
            },
            [this, gen](caf::error& e) {
              if (gen == generation_)
                retry_later(self_->system().render(e));
            });
  }

  /// The server asks for the shares that unmask the round's sum.
  void on_unmask_asked(const frame& f) {
    auto reveal = secagg_.answer_unmask(f);
    if (!reveal) // never both secrets of one client
      return log_line(log_level::warning, options_.client_id,
                      reveal.err().message);
    ask(secagg_atom::value, std::move(*reveal), "secure aggregation unmask",
        [this](const frame& r) { log_refusal("its shares", r); });
  }

  /// The client leaves the run (its program was stopped, or its own code
  /// failed): its Goodbye `f` goes to the server, which drops it at once,
  /// and the client ends as cancelled, its report saying why.
  void leave(const frame& f) {
    auto g = msg::decode<msg::goodbye>(f);
    say_goodbye(f);
    fail(departure_.left(g ? std::optional{*g} : std::nullopt));
  }

  /// Sends goodbye `f` once, where the server can take it (connected, not
  /// registering again).
  void say_goodbye(const frame& f) {
    if (departure_.may_say(server_ && !reconnecting_))
      self_->send(server_, goodbye_atom::value, f);
  }

  /// An evaluation made outside the trainer (the Python client's), of the
  /// model of the round it names.
  void on_evaluated(const frame& f) {
    auto e = msg::decode<msg::evaluation>(f);
    if (!e)
      return log_line(log_level::error, options_.client_id, to_string(e.err()));
    if (client_round::fit_to_send(*e, options_.client_id))
      send_evaluation(*e);
  }

private:
  using stage = client_round::stage;

  /// Asks the server `atom` with `f`; `next` takes the reply unless a newer
  /// generation began. A failed request is a lost server (`what` failed).
  template <class Atom, class F>
  void ask(Atom atom, frame f, const char* what, F next) {
    auto gen = generation_;
    self_->request(server_, caf::infinite, atom, std::move(f))
        .then(
            [this, gen, next](const frame& reply) mutable {
              if (gen == generation_)
                next(reply);
            },
            [this, gen, what](caf::error& e) {
              if (gen == generation_)
                fail_transport(what, e);
            });
  }

  /// Sends the round's request `r` with its atom; the reply goes back to
  /// the round.
  void send(client_round::request r) {
    with_atom_of(r.to, [this, &r](auto atom) {
      ask(atom, std::move(r.frame), r.what,
          [this, to = r.to, seq = r.seq](const frame& f) {
            run(round_->on_reply(to, seq, f, now(), unix_seconds()));
          });
    });
  }

  /// Does what the round's step `s` asks, in its order.
  void run(result<client_round::step> s) {
    if (!s)
      return depart(s.err());
    if (s->stale)
      ++generation_;
    if (s->watch == client_round::transfer::started)
      begin_transfer();
    else if (s->watch == client_round::transfer::moved)
      watchdog_.moved(now());
    else if (s->watch == client_round::transfer::ended)
      watchdog_.stop();
    if (s->evaluation)
      send_evaluation(*s->evaluation);
    for (auto& r : s->requests)
      send(std::move(r));
    if (s->train)
      return run(round_->train_and_offer(now()));
    if (s->upload_over)
      run_next_task();
    refetch_.send(); // the download may be over
  }

  // -- registration and reconnection -----------------------------------------

  void register_with_server() {
    msg::hello h{options_.client_id, options_.token, options_.shard};
    ask(hello_atom::value, msg::encode(h), "hello",
        [this](const frame& r) { on_welcome(r); });
  }

  void on_welcome(const frame& f) {
    auto w = msg::decode<msg::welcome>(f);
    // Throttled, or our old connection (a process that restarted under
    // this id) not yet seen lost: back off and come back, for as long as
    // the client waits for a lost server.
    if (!w && options_.connector && retries_hello(w.err()))
      return lost_server(w.err().message);
    if (!w)
      return fail(w.err());
    if (model_) {
      model_->welcomed_again(*w); // its terms for the rounds to come
      if (reconnecting_)
        resume(w->resumed);
      return; // a second Welcome of one reconnection changes nothing else
    }
    auto made = client_model::welcome(options_.client_id, std::move(factory_),
                                      *w, options_.hold_model, options_.shard,
                                      options_.storage_dir);
    if (!made)
      return depart(made.err());
    model_ = std::move(made->model);
    // A streaming relay's sum settles on another thread: told, the upload
    // sends what it may (a weak handle: the trainer outlives no actor).
    model_->on_ready(wake_up<client_actor>(self_, ready_atom::value));
    model_->on_refetch(
        wake_up<client_actor, uint64_t, uint64_t>(self_, refetch_atom::value));
    reconnecting_ = false;
    // In one process with many others (simulate), the first ten say so;
    // the rest at debug level (the server sums them up).
    bool crowd =
        options_.quiet || (!options_.connector && w->client_index >= 10);
    log_line(crowd ? log_level::debug : log_level::info, options_.client_id,
             made->line);
    if (crowd)
      model_->quiet_rounds();
  }

  void lost_server(const std::string& why) {
    refetch_.lost(); // asked again on the next connection
    // The old connection's gateway, if it still lives, goes with it.
    given_up_ = server_.address();
    self_->demonitor(server_.address());
    if (reconnecting_) { // lost again while registering
      ++generation_;
      return retry_later(why);
    }
    reconnecting_ = true;
    self_->send_exit(server_, caf::exit_reason::user_shutdown);
    watchdog_.stop();
    ++generation_;
    log_line(log_level::warning, options_.client_id, backoff_.lost(now(), why));
    try_reconnect(generation_);
  }

  void retry_later(const std::string& why) {
    report_.retried();
    auto delay = backoff_.next_delay(now(), why);
    if (!delay)
      return fail(delay.err());
    // Tagged with the generation: a later loss schedules its own attempt,
    // and only the newest one runs.
    self_->delayed_send(self_, *delay, caf::connect_atom::value, generation_);
  }

  /// Back on the server after a lost connection: go on where we stopped,
  /// or, where the server no longer knew this client (it restarted), wait
  /// for its round: the one in progress is void.
  void resume(bool session_known) {
    report_.resumed();
    reconnecting_ = false;
    if (!session_known) {
      log_line(options_.client_id,
               "reconnected to a restarted server; registered anew");
      round_.reset();
      next_task_.reset();
      watchdog_.stop();
      return;
    }
    log_line(options_.client_id, "reconnected; resuming");
    if (round_)
      run(round_->resume());
    refetch_.send(); // fetches made again that the old connection lost
  }

  // -- evaluations, refusals, the next task ----------------------------------

  /// A task that arrived while this client's upload was under way starts
  /// now that the upload is over (closed, or the server let it sit out).
  void run_next_task() {
    if (auto f = std::exchange(next_task_, std::nullopt))
      on_round(*f);
  }

  // -- time, failure, the end ------------------------------------------------

  /// A request failed: the server is gone. Remote clients learn that from
  /// the down message too and reconnect; the others give up.
  void fail_transport(const char* what, const caf::error& e) {
    if (options_.connector)
      return;
    fail({errc::disconnected,
          std::string{what} + " failed: " + self_->system().render(e)});
  }

  /// The client ends as failed by `e`; a client stopped by a signal (its
  /// trainer may have seen the stop first and failed as cancelled) leaves
  /// instead, its line naming the goodbye.
  void fail(const error& e) {
    if (auto why = departure_.leaves_instead())
      return leave(msg::encode(*why));
    report_.failed(e);
    finish();
  }

  /// The client gives up on `e` (its trainer or model failed, or the
  /// round cannot go on): it says goodbye first, so that the server drops
  /// it at once rather than waiting for it to come back.
  void depart(const error& e) {
    if (departure_.done_coming(e))
      return; // the server's Done, next in the mailbox, ends the client
    if (auto why = departure_.giving_up(e))
      say_goodbye(msg::encode(*why));
    fail(e); // or leaves with the program's reason
  }

  /// An exception escaped a handler (std::bad_alloc from sizes the server
  /// gave, a trainer's own): the client ends as failed, its report says
  /// why, and the command exits non-zero.
  caf::error on_exception(const std::exception_ptr& x) {
    auto e = error_of(x);
    if (auto why = departure_.exception(e))
      say_goodbye(msg::encode(*why));
    report_.failed(e);
    report_.finish(now(), sample_memory().peak_rss_bytes);
    return caf::exit_reason::unhandled_exception;
  }

  void finish() {
    // The program left (its trainer may have seen the stop first).
    if (auto why = departure_.noted())
      say_goodbye(msg::encode(*why));
    report_.finish(now(), sample_memory().peak_rss_bytes);
    self_->quit();
  }
};

client_actor::behavior_type running(client_actor::pointer self,
                                    std::shared_ptr<client_state> state) {
  state->attach(self);
  return {
      [state](round_atom, const frame& f) { state->on_round(f); },
      [state](done_atom, const frame& f) { state->on_done(f); },
      [state](idle_atom, uint32_t round) { state->on_round_over(round); },
      [state](reject_atom, const frame& f) { state->on_rejected(f); },
      // Only a remote client's gateway is taken over; one in this process
      // would end as refused.
      [state](replaced_atom, const frame& f) { state->on_rejected(f); },
      [state](tick_atom) { state->on_tick(); },
      [state](ready_atom) { state->on_ready(); },
      [state](refetch_atom, uint64_t offset, uint64_t bytes) {
        state->on_refetch(offset, bytes);
      },
      [state](evaluated_atom, const frame& f) { state->on_evaluated(f); },
      [state](secagg_atom, const frame& f) { state->on_unmask_asked(f); },
      [state](caf::connect_atom, uint64_t gen) { state->try_reconnect(gen); },
      [state](goodbye_atom, const frame& f) { state->leave(f); },
  };
}

} // namespace

client_actor spawn_client(caf::actor_system& sys, server_link server,
                          client_options options, trainer_factory factory,
                          run_report* report) {
  bool own_thread = options.own_thread;
  auto state = std::make_shared<client_state>(
      std::move(server), std::move(options), std::move(factory), report);
  if (own_thread)
    return sys.spawn<caf::detached>(running, std::move(state));
  return sys.spawn(running, std::move(state));
}

} // namespace fedcaf
