#include "actors/scheduler.hpp"

#include <set>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "actors/messages.hpp"
#include "fedcaf/log.hpp"
#include "protocol/group_round.hpp"
#include "protocol/offer_admission.hpp"
#include "protocol/round_deadline.hpp"
#include "protocol/round_roster.hpp"

namespace fedcaf {

namespace {

// State machine:
//   registering -(num_clients joined)-> collecting(r) -(every contributor's
//   update closed)-> finalizing(r) -(published)-> collecting(r+1) ...
//   -> stopped
// The participants of round r are the clients registered when it starts;
// one that joins later waits for r+1. A participant that is dropped (lost
// and not back within the grace period) or that has not offered by the
// deadline leaves the round; the round then finalizes with the others if at
// least min_clients remain, and fails with a message naming the missing
// clients if not. A dropped client that had already sent chunks cannot be
// taken out of the sum: the aggregator forgets the round's uploads and the
// other offered clients send theirs again (they still hold them).
// A participant whose update the aggregator rejects (NaN or infinity, too
// far from the global model, another chunk than it sent before, or silent
// for the idle timeout) leaves the round the same way, except that its
// chunks never stay: partial_updates: keep applies to drops only.
//
// The round deadline bounds the whole round, uploads included (see
// protocol/round_deadline.hpp): at the deadline, a participant that has not
// offered leaves the round, and the aggregator ends the stream of each one
// still uploading that owes the chunk the accumulator waits for (each comes
// back as a rejection: reject below); a stream that only waits for the
// window is spared, it waits for those. on_deadline: wait and fewer than
// min_clients delivered: nobody is cut until min_clients have. An upload
// too slow or silent is the aggregator's to reject at any time (minimum
// rate, idle timeout). The registration deadline (deadline_atom, 0) starts
// round 1 with the clients registered by then, or ends the run naming
// those that never came.
/// `options` with min_clients in effect: 0, or more than a round's
/// clients, is all of them.
scheduler_options with_min_clients(scheduler_options options) {
  auto per_round = options.clients_per_round ? options.clients_per_round
                                             : options.num_clients;
  if (options.min_clients == 0 || options.min_clients > per_round)
    options.min_clients = per_round;
  return options;
}

/// What round `round` publishes: `model`, made of updates of `weight`.
round_result result_of(uint32_t round, snapshot_ptr model, double weight,
                       round_roster::round_figures f) {
  std::vector<uint32_t> staleness(f.contributors.size(), 0);
  return {round,
          std::move(model),
          f.clients,
          f.loss,
          f.dp_epsilon,
          std::move(f.missing),
          std::move(f.contributors),
          std::move(staleness),
          weight,
          std::move(f.relay_weights)};
}

class scheduler_state {
  using dropped = round_roster::dropped;

public:
  scheduler_state(aggregator_actor aggregator, scheduler_options options)
      : aggregator_(std::move(aggregator)),
        options_(with_min_clients(std::move(options))),
        terms_{options_.weights, options_.rule_cfg.max_sample_size,
               options_.relays},
        roster_({options_.clients_per_round, options_.sampling_seed,
                 options_.stream_sums, options_.keep_partial,
                 options_.members}),
        refusals_("scheduler", options_.refusals) {}

  void attach(sync_scheduler_actor::pointer self) { self_ = self; }

  /// The server, before any client joins; the registration deadline
  /// starts (a population's round 1 starts now: its clients are summoned).
  void connect(round_host server) {
    server_ = std::move(server);
    if (options_.members)
      return start_round(options_.first_round);
    if (options_.registration_deadline.count() > 0)
      self_->delayed_send(self_, options_.registration_deadline,
                          deadline_atom::value, uint32_t{0});
  }

  /// Client `id` registered from `from` (its address, or in-process).
  void join(const std::string& id, const std::string& from) {
    roster_.join(id, from);
    if (roster_.round() == 0 && !options_.members &&
        roster_.registered().size() == options_.num_clients)
      start_round(options_.first_round);
  }

  /// Client `id` is lost for good: it leaves the round as the roster says
  /// (round_roster::drop).
  void drop(const std::string& id) {
    roster_.unregister(id);
    if (stopped_)
      return;
    auto how = roster_.drop(id, finalizing_);
    if (how == dropped::not_in_round)
      return;
    if (how == dropped::before_offer)
      self_->send(aggregator_, expect_atom::value, contributors());
    else if (how == dropped::whole_streamed) // awaited in no position now
      group_.keep_whole();
    else if (how == dropped::collect_again)
      collect_again(id, "it was dropped mid-upload");
    else if (how != dropped::forgotten)
      abandon(id, how);
    check_round();
  }

  /// Returns an error frame, or delegates the offer to the aggregator
  /// (which then answers the client itself). A repeated offer resumes the
  /// client's stream.
  caf::result<frame> offer(const frame& f) {
    auto o = msg::decode<msg::offer>(f);
    if (!o)
      return refusals_.refuse(o.err());
    roster_.heard_from(o->client_id); // late or not, it is there
    auto v = admit_round_offer(
        *o, roster_.view_of(o->client_id, finalizing_, group_.sitting_out()),
        terms_);
    if (v.outcome == offer_verdict::kind::sits_out)
      sits_out(o->client_id);
    if (!v.admitted())
      return answer_frame(v, refusals_);
    roster_.offer(*o, v.weight);
    return self_->delegate(
        aggregator_, open_atom::value, upload_listener{self_},
        upload_request{o->client_id, o->round, v.weight, o->manifest_digest,
                       o->total_bytes, o->chunk_count, o->update_norm,
                       o->partial_sum, o->update_id, o->grid_sums});
  }

  /// A streaming relay: the sum of round `round` is settled up to `bytes`,
  /// position 0 with weight `weight`; the server hears each step once the
  /// round streams (group_round::settle).
  void settled(uint32_t round, uint64_t bytes, double weight) {
    if (round != roster_.round() || stopped_)
      return;
    if (auto step = group_.settle(bytes, weight, roster_, options_.min_clients))
      self_->send(server_, settled_atom::value, round, *step);
  }

  void update_closed(const std::string& id, uint32_t round) {
    if (round != roster_.round() || !roster_.close(id))
      return;
    if (roster_.overdue() && roster_.closed().size() >= options_.min_clients)
      self_->send(self_, deadline_atom::value, round); // enough now
    check_round();
  }

  /// The aggregator refused `id`'s update of `round` (its content or its
  /// silence): the client leaves the round. The `folded` chunks of it in
  /// the sum stay there (each passed every check; keep_rejected), and the
  /// round goes on; under secure aggregation they are taken out by
  /// collecting the others' updates again.
  void reject(const std::string& id, uint32_t round, uint64_t folded,
              const error& refusal) {
    if (stopped_ || round != roster_.round())
      return;
    auto line = roster_.rejected(id, to_string(refusal), refusal.code);
    if (!line)
      return;
    log_line(log_level::warning, "scheduler", *line);
    self_->send(server_, reject_atom::value, id, refusal);
    roster_.forget(id);
    if (options_.stream_sums) // what it folded stays (the aggregator cut it)
      group_.keep_cut(folded);
    if (folded > 0 && !finalizing_ && !options_.stream_sums &&
        !options_.keep_rejected) { // a masked prefix never stays
      collect_again(id, "its rejected update had " + std::to_string(folded) +
                            " chunks in the sum");
    } else {
      if (folded > 0 && !finalizing_)
        log_line(log_level::warning, "scheduler",
                 round_roster::kept_note(round, id, folded));
      self_->send(aggregator_, expect_atom::value, contributors());
    }
    check_round();
  }

  /// A relay: round `round`'s parent's model never comes whole (its
  /// download was given up): nobody could offer, the round is sat out.
  void model_never_whole(uint32_t round) {
    if (round != roster_.round() || finalizing_ || stopped_)
      return;
    fail_round("round " + std::to_string(round) +
               ": the parent's model of the round never came whole");
  }

  void deadline(uint32_t round) {
    if (round == 0)
      return registration_over();
    if (round != roster_.round() || finalizing_ || stopped_)
      return;
    bool overdue = roster_.overdue();
    auto cut = roster_.cut_at_deadline(options_.min_clients,
                                       options_.wait_after_deadline &&
                                           !group_.sitting_out());
    if (cut.wait && !overdue)
      log_line(log_level::warning, "scheduler",
               waiting_for_min_clients(round, roster_.closed().size(),
                                       options_.min_clients));
    if (cut.wait || (cut.uploading.empty() && cut.not_offered.empty()))
      return;
    // First the streams: the window must not move before they are judged.
    if (!cut.uploading.empty())
      expire(cut.uploading);
    for (const auto& id : cut.not_offered) { // they left the round
      refusals_.refuse(
          not_offered_by_deadline(id, roster_.address_of(id), round));
      log_line(log_level::warning, "scheduler",
               passed_over_note(round, id, roster_.misses(id)));
    }
    self_->send(aggregator_, expect_atom::value, contributors());
    check_round();
  }

private:
  uint32_t contributors() const { return group_.contributors(roster_); }

  void start_round(uint32_t r) {
    finalizing_ = false;
    group_.start();
    roster_.start(r, options_.min_clients);
    if (roster_.participants().size() < options_.min_clients)
      return fail_round(roster_.cannot_start(options_.min_clients), false);
    self_->send(aggregator_, expect_atom::value, contributors());
    self_->send(server_, start_atom::value, r,
                std::vector<std::string>(roster_.participants().begin(),
                                         roster_.participants().end()));
    if (options_.round_deadline.count() > 0 && !options_.deadline_from_server)
      self_->delayed_send(self_, options_.round_deadline, deadline_atom::value,
                          r);
  }

  /// Relay `id` offered a partial sum of weight 0: its own round could not
  /// have its min_clients, and its group has nothing for this one. It
  /// leaves the round at once, as a client that missed the deadline (one
  /// vote fewer; the round goes on by min_clients), and takes the next.
  void sits_out(const std::string& id) {
    roster_.leave(id);
    log_line(log_level::warning, "scheduler",
             relay_without_sum(roster_.round(), id));
    self_->send(aggregator_, expect_atom::value, contributors());
    check_round();
  }

  /// The round deadline passed while `ids` were uploading: the aggregator
  /// ends the streams still owed (each comes back as a rejection) and
  /// names the clients without a stream, who leave the round here. The
  /// round waits for the answer.
  void expire(const std::set<std::string>& ids) {
    auto r = roster_.round();
    log_line(log_level::warning, "scheduler", uploads_cut_at_deadline(r, ids));
    ++abandoning_;
    self_
        ->request(aggregator_, caf::infinite, expire_atom::value, r,
                  std::vector<std::string>(ids.begin(), ids.end()),
                  upload_past_deadline(options_.round_deadline))
        .then([this, r](const std::vector<std::string>& without_stream) {
          --abandoning_;
          if (r != roster_.round() || stopped_ || finalizing_)
            return;
          roster_.leave_without_stream(without_stream);
          self_->send(aggregator_, expect_atom::value, contributors());
          check_round();
        });
  }

  /// The registration deadline passed: round 1 starts with the clients
  /// registered, or the run ends naming those that never came.
  void registration_over() {
    if (roster_.round() != 0 || stopped_)
      return;
    auto v = registration_deadline_passed(
        roster_.registered(), options_.expected_clients, options_.num_clients,
        options_.min_clients, options_.registration_deadline);
    if (!v.start && !options_.relay)
      return stop(v.message);
    // A relay short of children sits its parent's rounds out (fail_round)
    // until min_clients have registered.
    log_line(log_level::warning, "scheduler", v.message);
    start_round(options_.first_round);
  }

  /// `id` was dropped mid-upload (`how`): the aggregator closes its
  /// stream and says how many chunks of it are in the sum. The round waits
  /// for the answer, unless partial_updates: keep (what it delivered stays
  /// in the round, whatever it is).
  void abandon(const std::string& id, dropped how) {
    auto r = roster_.round();
    uint32_t awaited = how == dropped::partial_kept ? 0 : 1;
    abandoning_ += awaited;
    self_->request(aggregator_, caf::infinite, abandon_atom::value, id, r)
        .then([this, id, r, how, awaited](uint64_t chunks) {
          abandoning_ -= awaited;
          abandoned(id, r, how, chunks);
        });
  }

  /// `chunks` of `id`'s update of round `r` are in the sum. Kept (keep, or
  /// a streaming relay's child, which counts towards min_clients iff that
  /// is a chunk or more): no position waits for it now. Discarded: none,
  /// the round goes on without it (an offer and a vanishing act must not
  /// make every other client upload again); some: the round's updates are
  /// collected again.
  void abandoned(const std::string& id, uint32_t r, dropped how,
                 uint64_t chunks) {
    bool open = r == roster_.round() && !stopped_;
    auto note = round_roster::dropped_note(r, id, how, chunks);
    if (how == dropped::partial_kept) {
      if (open)
        self_->send(aggregator_, expect_atom::value, contributors());
      return log_line(log_level::warning, "scheduler", note);
    }
    if (!open || (how == dropped::partial_dropped && finalizing_))
      return;
    if (how == dropped::cut_streamed) {
      group_.keep_cut(chunks);
      // Cut where it stopped, or (an offer refused: no stream) awaited
      // nowhere: either way no position waits for it now.
      self_->send(aggregator_, expect_atom::value, contributors());
      log_line(log_level::warning, "scheduler", note);
    } else if (chunks > 0) {
      collect_again(id, "it was dropped mid-upload");
    } else {
      log_line(log_level::warning, "scheduler", note);
      // (its offer may have been refused: no stream, nothing cut)
      self_->send(aggregator_, expect_atom::value, contributors());
    }
    check_round();
  }

  /// `gone` sent chunks that are in the sum: start the collection over.
  void collect_again(const std::string& gone, const std::string& why) {
    if (options_.relay &&
        roster_.participants().size() < options_.min_clients) {
      // The round is sat out (fail_round): nothing of it goes up, so no
      // collection again; the window only stops awaiting `gone`.
      self_->send(aggregator_, expect_atom::value, contributors());
      return;
    }
    log_line(log_level::warning, "scheduler",
             roster_.collecting_again(gone, why));
    self_->send(aggregator_, reset_atom::value, contributors());
    auto again = roster_.collect_again();
    if (!again.empty())
      self_->send(server_, resend_atom::value, roster_.round(),
                  std::move(again));
  }

  void check_round() {
    if (stopped_ || finalizing_ || roster_.round() == 0 || abandoning_ > 0)
      return;
    if (group_.falls_short(roster_.participants().size(), options_.min_clients))
      return fail_round(
          roster_.short_of_clients(options_.num_clients, options_.min_clients));
    if (roster_.all_closed())
      finalize();
  }

  /// Round `round_` cannot have min_clients (`why`): a server's run ends;
  /// a relay's group sits its parent's round out (group_round::sit_out),
  /// once every participant of an `announced` round has closed its update
  /// or left (a new round must not find an upload open, nor an offer come
  /// for a round gone).
  void fail_round(const std::string& why, bool announced = true) {
    if (!options_.relay)
      return stop(why);
    auto step = group_.sit_out(announced, roster_);
    if (step.cut) {
      self_->send(aggregator_, expect_atom::value, contributors());
      if (step.waits)
        log_line(log_level::warning, "scheduler", group_round::waits_note(why));
    }
    if (step.waits)
      return;
    finalizing_ = true;
    auto r = roster_.round();
    // Not announced: the server sits the round out once the parent's model
    // is in, if the children are still too few then.
    log_line(announced ? log_level::warning : log_level::debug, "scheduler",
             group_round::sits_out_note(why, step, r));
    self_->send(aggregator_, reset_atom::value, uint32_t{0});
    self_->request(server_, caf::infinite, sit_out_atom::value, r)
        .then(
            [this](uint32_t next) {
              if (next == 0) // the run is ending
                stopped_ = true;
              else
                start_round(next);
            },
            [this](caf::error& e) {
              stop("sitting a round out failed: " + self_->system().render(e));
            });
  }

  /// Finalizes the round. Its figures are those of the updates finalized,
  /// taken now: a client dropped or sent away while the aggregator
  /// finalizes is in the model, so it stays counted; their weight is what
  /// a relay's sum goes up at (the aggregator scales it to that).
  void finalize() {
    finalizing_ = true;
    auto r = roster_.round();
    double weight = roster_.closed_weight();
    auto figures = roster_.figures(options_.relays);
    self_->request(aggregator_, caf::infinite, finalize_atom::value, r, weight)
        .then(
            [this, r, weight, figures](snapshot_ptr next) mutable {
              publish(r, std::move(next), weight, std::move(figures));
            },
            [this](caf::error& e) {
              stop("aggregation failed: " + self_->system().render(e));
            });
  }

  void publish(uint32_t r, snapshot_ptr next, double weight,
               round_roster::round_figures figures) {
    self_
        ->request(server_, caf::infinite, publish_atom::value,
                  result_of(r, std::move(next), weight, std::move(figures)))
        .then(
            [this, r](bool go_on) {
              if (!go_on) // the server stopped the run and said why
                stopped_ = true;
              else if (r < options_.num_rounds)
                start_round(r + 1);
              else
                stop("");
            },
            [this](caf::error& e) {
              stop("publishing failed: " + self_->system().render(e));
            });
  }

  void stop(const std::string& reason) {
    stopped_ = true;
    if (!reason.empty())
      log_line(log_level::error, "scheduler", reason);
    self_->send(server_, stop_atom::value, reason);
  }

  sync_scheduler_actor::pointer self_ = nullptr;
  aggregator_actor aggregator_;
  round_host server_;
  scheduler_options options_;
  admission_terms terms_;
  round_roster roster_; ///< who is in the open round, and their figures
  group_round group_;   ///< a relay's: sat out, or streaming
  bool finalizing_ = false;
  uint32_t abandoning_ = 0; ///< drops whose folded chunks are being asked
  bool stopped_ = false;
  refusal_log refusals_;
};

sync_scheduler_actor::behavior_type
scheduling(sync_scheduler_actor::pointer self,
           std::shared_ptr<scheduler_state> state) {
  state->attach(self);
  return {
      [state](connect_atom, const round_host& server) {
        state->connect(server);
      },
      [state](join_atom, const std::string& id, const std::string& from) {
        state->join(id, from);
      },
      [state](drop_atom, const std::string& id) { state->drop(id); },
      [state](offer_atom, const frame& f) { return state->offer(f); },
      [state](update_atom, const std::string& id, uint32_t round) {
        state->update_closed(id, round);
      },
      [state](deadline_atom, uint32_t round) { state->deadline(round); },
      [state](sit_out_atom, uint32_t round) {
        state->model_never_whole(round);
      },
      [state](reject_atom, const std::string& id, uint32_t round,
              uint64_t folded, const error& refusal) {
        state->reject(id, round, folded, refusal);
      },
      [state](settled_atom, uint32_t round, uint64_t bytes, double weight) {
        state->settled(round, bytes, weight);
      },
  };
}

} // namespace

scheduler_actor spawn_scheduler(caf::actor_system& sys,
                                aggregator_actor aggregator,
                                scheduler_options options) {
  auto state = std::make_shared<scheduler_state>(std::move(aggregator),
                                                 std::move(options));
  return sys.spawn(scheduling, std::move(state));
}

} // namespace fedcaf
