#include "actors/scheduler.hpp"

#include <map>
#include <random>
#include <set>
#include <vector>

#include <caf/all.hpp>

#include "actors/messages.hpp"
#include "fedcaf/log.hpp"
#include "protocol/round_deadline.hpp"

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
class scheduler_state {
public:
  scheduler_state(aggregator_actor aggregator, scheduler_options options)
      : aggregator_(std::move(aggregator)), options_(std::move(options)),
        refusals_("scheduler", options_.refusals) {
    auto per_round = options_.clients_per_round ? options_.clients_per_round
                                                : options_.num_clients;
    if (options_.min_clients == 0 || options_.min_clients > per_round)
      options_.min_clients = per_round;
  }

  void attach(sync_scheduler_actor::pointer self) { self_ = self; }

  /// The server, before any client joins; the registration deadline
  /// starts.
  void connect(round_host server) {
    server_ = std::move(server);
    if (options_.registration_deadline.count() > 0)
      self_->delayed_send(self_, options_.registration_deadline,
                          deadline_atom::value, uint32_t{0});
  }

  /// Client `id` registered from `from` (its address, or in-process).
  void join(const std::string& id, const std::string& from) {
    registered_.insert(id);
    addresses_[id] = from;
    known_.insert(id);
    if (round_ == 0 && registered_.size() == options_.num_clients)
      start_round(options_.first_round);
  }

  void drop(const std::string& id) {
    registered_.erase(id);
    if (stopped_ || !participants_.erase(id))
      return;
    missing_.insert(id);
    if (options_.stream_sums && offered_.count(id)) {
      keep_streamed(id, closed_.erase(id) > 0);
    } else if (offered_.count(id) && !closed_.count(id) &&
               options_.keep_partial) {
      offered_.erase(id); // its figures stay: its data is in the model
      keep_partial(id);
    } else if (offered_.count(id) && !closed_.count(id) && !finalizing_) {
      offered_.erase(id);
      figures_.erase(id);
      discard_partial(id);
    } else if (offered_.count(id)) {
      offered_.erase(id);
      closed_.erase(id);
      figures_.erase(id);
      if (!finalizing_)
        collect_again(id, "it was dropped mid-upload");
    } else {
      self_->send(aggregator_, expect_atom::value, contributors());
    }
    check_round();
  }

  /// Returns an error frame, or delegates the offer to the aggregator
  /// (which then answers the client itself). A repeated offer resumes the
  /// client's stream.
  caf::result<frame> offer(const frame& f) {
    auto o = msg::decode<msg::offer>(f);
    if (!o)
      return refuse(o.err());
    // A past round (an honest client that trained past its deadline, or a
    // relay's child of a round given up): it sits it out and takes the next.
    if (o->round < round_)
      return msg::encode(
          error{errc::not_in_round, "round " + std::to_string(o->round) +
                                        " is over; open round is " +
                                        std::to_string(round_)});
    if (o->round == round_ && finalizing_) // its update is in, or too late
      return msg::encode(
          error{errc::not_in_round,
                "round " + std::to_string(round_) + " is being finalized"});
    if (o->round != round_)
      return refuse(
          {errc::wrong_round, "offer for round " + std::to_string(o->round) +
                                  ", open round is " + std::to_string(round_)});
    if (!registered_.count(o->client_id))
      return refuse({errc::unknown_client, o->client_id});
    if (sitting_out_)
      return msg::encode(
          error{errc::not_in_round, "round " + std::to_string(round_) +
                                        " is sat out: the relay's children are "
                                        "fewer than its min_clients"});
    if (!participants_.count(o->client_id))
      return refuse({errc::not_in_round,
                     o->client_id + " is not in round " +
                         std::to_string(round_) +
                         (missing_.count(o->client_id)
                              ? " (it missed the deadline)"
                              : " (it joined after the round started)") +
                         "; it takes part in the next"});
    if (options_.weights == client_weighting::sample_size &&
        o->sample_count == 0)
      return refuse({errc::out_of_range,
                     o->client_id + " offered an update of 0 samples, which "
                                    "sample_size weights cannot average"});
    auto relay = options_.relays.find(o->client_id);
    if (o->partial_sum != (relay != options_.relays.end()))
      return refuse({errc::not_authorized,
                     o->partial_sum
                         ? o->client_id + " offered a partial sum, which "
                                          "only a relay in "
                                          "server_configs.relays may"
                         : o->client_id + " is a relay in "
                                          "server_configs.relays and "
                                          "must offer a partial sum"});
    double weight = 1.0;
    if (relay != options_.relays.end()) {
      // A relay weighs what its children do, at most as many as it has.
      auto cap = options_.rule_cfg.max_sample_size;
      auto most = relay->second;
      if (options_.weights == client_weighting::sample_size)
        most *= cap > 0 ? cap : uint64_t{1} << 20;
      if (o->sample_count == 0 && !offered_.count(o->client_id))
        return sits_out(o->client_id);
      if (o->sample_count == 0) // a restarted relay: its first sum decides
        return msg::encode(error{
            errc::not_in_round,
            o->client_id + " offered a sum of round " + std::to_string(round_) +
                " already, which stands or falls on its own"});
      if (o->sample_count == 0 || o->sample_count > most)
        return refuse({errc::out_of_range,
                       o->client_id + " offered a partial sum of weight " +
                           std::to_string(o->sample_count) +
                           "; a relay of at most " +
                           std::to_string(relay->second) +
                           " clients weighs 1 to " + std::to_string(most)});
      weight = static_cast<double>(o->sample_count);
    } else if (options_.weights == client_weighting::sample_size) {
      // A claimed sample count is capped at max_sample_size (2^20 unless
      // set): one client's weight share stays at most cap / (cap + the
      // others' weights).
      auto cap = options_.rule_cfg.max_sample_size;
      auto samples = cap > 0 ? std::min(o->sample_count, cap) : o->sample_count;
      weight = static_cast<double>(samples);
    }
    offered_.insert(o->client_id);
    // A repeated offer (a resume) keeps the figures of the first: its
    // stream keeps the weight it was opened with. A loss counts within
    // +-max_figure_magnitude, so that the round's weighted sum of losses
    // stays finite (two finite 1e308 losses would make a relay's mean
    // infinite, which its parent refuses).
    figures_.try_emplace(o->client_id,
                         offered_figures{msg::bounded_loss(o->train_loss),
                                         o->dp_epsilon, weight});
    return self_->delegate(
        aggregator_, open_atom::value, upload_listener{self_},
        upload_request{o->client_id, o->round, weight, o->manifest_digest,
                       o->total_bytes, o->chunk_count, o->update_norm,
                       o->partial_sum, o->update_id});
  }

  /// Relay `id` offered a partial sum of weight 0: its own round could not
  /// have its min_clients, and its group has nothing for this one. It
  /// leaves the round at once, as a client that missed the deadline (one
  /// vote fewer; the round goes on by min_clients), and takes the next.
  frame sits_out(const std::string& id) {
    participants_.erase(id);
    missing_.insert(id);
    log_line(log_level::warning, "scheduler",
             "round " + std::to_string(round_) + ": relay " + id +
                 " has no partial sum (its own round fell short of its "
                 "min_clients); it leaves the round");
    self_->send(aggregator_, expect_atom::value, contributors());
    check_round();
    return msg::encode(
        error{errc::not_in_round, id + " sits round " + std::to_string(round_) +
                                      " out: its group has no update"});
  }

  /// A streaming relay: the sum of round `round` is settled up to `bytes`,
  /// position 0 with weight `weight`. Once position 0 holds min_clients
  /// updates the round streams (it is no longer sat out) and the server
  /// hears each step, with the figures its upstream offer carries, as they
  /// were then: the children in position 0 and their mean loss.
  void settled(uint32_t round, uint64_t bytes, double weight) {
    if (round != round_ || stopped_ || sitting_out_ || weight <= 0)
      return;
    if (!streaming_) {
      auto clients = static_cast<uint32_t>(participants_.size()) + kept_;
      if (clients < options_.min_clients)
        return; // the round is sat out (check_round)
      streaming_ = true;
      stream_clients_ = clients;
      stream_loss_ = 0;
      for (const auto& [id, f] : figures_)
        stream_loss_ += f.train_loss;
      stream_loss_ /= static_cast<double>(std::max<size_t>(1, figures_.size()));
    }
    self_->send(server_, settled_atom::value, round,
                relay_step{weight, stream_loss_, stream_clients_, bytes});
  }

  void update_closed(const std::string& id, uint32_t round) {
    if (round != round_ || !offered_.count(id))
      return;
    closed_.insert(id);
    if (overdue_ && closed_.size() >= options_.min_clients)
      self_->send(self_, deadline_atom::value, round_); // enough now
    check_round();
  }

  /// The aggregator refused `id`'s update of `round` (its content or its
  /// silence): the client leaves the round, and a share of it that is in
  /// the sum is taken out by collecting the others' updates again.
  void reject(const std::string& id, uint32_t round, uint64_t folded,
              const error& refusal) {
    auto why = to_string(refusal);
    if (stopped_ || round != round_ || !participants_.erase(id))
      return;
    missing_.insert(id);
    log_line(log_level::warning, "scheduler",
             "round " + std::to_string(round) + ": " + id +
                 " leaves the round: " + why);
    self_->send(server_, reject_atom::value, id, refusal);
    offered_.erase(id);
    closed_.erase(id);
    figures_.erase(id);
    if (options_.stream_sums) // what it folded stays (the aggregator cut it)
      kept_ += folded > 0 ? 1 : 0;
    if (folded > 0 && !finalizing_ && !options_.stream_sums)
      // a rejected update never stays
      collect_again(id, "its rejected update had " + std::to_string(folded) +
                            " chunks in the sum");
    else
      self_->send(aggregator_, expect_atom::value, contributors());
    check_round();
  }

  /// A relay: round `round`'s parent's model never comes whole (its
  /// download was given up): nobody could offer, the round is sat out.
  void model_never_whole(uint32_t round) {
    if (round != round_ || finalizing_ || stopped_)
      return;
    fail_round("round " + std::to_string(round) +
               ": the parent's model of the round never came whole");
  }

  void deadline(uint32_t round) {
    if (round == 0)
      return registration_over();
    if (round != round_ || finalizing_ || stopped_)
      return;
    auto cut =
        cut_at_deadline(participants_, offered_, closed_, options_.min_clients,
                        options_.wait_after_deadline && !sitting_out_);
    if (cut.wait) {
      if (!overdue_)
        log_line(log_level::warning, "scheduler",
                 "round " + std::to_string(round_) +
                     ": the deadline passed with " +
                     std::to_string(closed_.size()) + " updates delivered, " +
                     "min_clients is " + std::to_string(options_.min_clients) +
                     "; waiting for min_clients");
      overdue_ = true;
      return;
    }
    overdue_ = false;
    if (cut.uploading.empty() && cut.not_offered.empty())
      return;
    // First the streams: the window must not move before they are judged.
    if (!cut.uploading.empty())
      expire(cut.uploading);
    for (const auto& id : cut.not_offered) {
      participants_.erase(id);
      missing_.insert(id);
      refusals_.refuse(not_offered_by_deadline(id, addresses_[id], round_));
    }
    if (!cut.not_offered.empty())
      log_line(log_level::warning, "scheduler",
               "round " + std::to_string(round_) +
                   ": the deadline passed without an update from " +
                   join_ids(cut.not_offered));
    self_->send(aggregator_, expect_atom::value, contributors());
    check_round();
  }

private:
  uint32_t contributors() const {
    return static_cast<uint32_t>(participants_.size()) + kept_whole_;
  }

  /// The clients of round `r`: every registered one, or clients_per_round
  /// of them drawn with the seed and the round number (reproducible).
  std::set<std::string> sample(uint32_t r) const {
    auto k = options_.clients_per_round;
    if (k == 0 || k >= registered_.size())
      return registered_;
    std::vector<std::string> ids(registered_.begin(), registered_.end());
    std::mt19937_64 rng{options_.sampling_seed * 1000003ull + r};
    // A partial Fisher-Yates shuffle: the first k are a uniform sample.
    for (uint32_t i = 0; i < k; ++i) {
      std::uniform_int_distribution<size_t> pick{i, ids.size() - 1};
      std::swap(ids[i], ids[pick(rng)]);
    }
    return {ids.begin(), ids.begin() + k};
  }

  void start_round(uint32_t r) {
    round_ = r;
    finalizing_ = false;
    overdue_ = false;
    sitting_out_ = false;
    streaming_ = false;
    kept_ = kept_whole_ = 0;
    offered_.clear();
    closed_.clear();
    missing_.clear();
    figures_.clear();
    participants_ = sample(r);
    if (participants_.size() < options_.min_clients)
      return fail_round("round " + std::to_string(r) + " cannot start: " +
                            std::to_string(participants_.size()) +
                            " clients are registered, min_clients is " +
                            std::to_string(options_.min_clients),
                        false);
    self_->send(aggregator_, expect_atom::value, contributors());
    self_->send(
        server_, start_atom::value, r,
        std::vector<std::string>(participants_.begin(), participants_.end()));
    if (options_.round_deadline.count() > 0 && !options_.deadline_from_server)
      self_->delayed_send(self_, options_.round_deadline, deadline_atom::value,
                          r);
  }

  /// The round deadline passed while `ids` were uploading: the aggregator
  /// ends the streams still owed (each comes back as a rejection) and
  /// names the clients without a stream, who leave the round here. The
  /// round waits for the answer.
  void expire(const std::set<std::string>& ids) {
    auto r = round_;
    log_line(log_level::warning, "scheduler",
             "round " + std::to_string(r) +
                 ": the deadline passed before the uploads of " +
                 join_ids(ids) + " were complete");
    ++abandoning_;
    self_
        ->request(aggregator_, caf::infinite, expire_atom::value, r,
                  std::vector<std::string>(ids.begin(), ids.end()),
                  upload_past_deadline(options_.round_deadline))
        .then([this, r](const std::vector<std::string>& without_stream) {
          --abandoning_;
          if (r != round_ || stopped_ || finalizing_)
            return;
          for (const auto& id : without_stream)
            if (participants_.erase(id)) {
              missing_.insert(id);
              offered_.erase(id);
              figures_.erase(id);
            }
          self_->send(aggregator_, expect_atom::value, contributors());
          check_round();
        });
  }

  /// The registration deadline passed: round 1 starts with the clients
  /// registered, or the run ends naming those that never came.
  void registration_over() {
    if (round_ != 0 || stopped_)
      return;
    auto v = registration_deadline_passed(
        registered_, options_.expected_clients, options_.num_clients,
        options_.min_clients, options_.registration_deadline);
    if (!v.start && !options_.relay)
      return stop(v.message);
    // A relay short of children sits its parent's rounds out (fail_round)
    // until min_clients have registered.
    log_line(log_level::warning, "scheduler", v.message);
    start_round(options_.first_round);
  }

  /// partial_updates: keep. What `dropped` delivered stays in the round.
  void keep_partial(const std::string& dropped) {
    auto r = round_;
    self_->request(aggregator_, caf::infinite, abandon_atom::value, dropped, r)
        .then([this, dropped, r](uint64_t chunks) {
          if (r == round_ && !stopped_) // no position waits for it now
            self_->send(aggregator_, expect_atom::value, contributors());
          log_line(log_level::warning, "scheduler",
                   "round " + std::to_string(r) + ": " + dropped +
                       " was dropped mid-upload; its " +
                       std::to_string(chunks) + " delivered chunks are kept");
        });
  }

  /// A streaming relay: `dropped` offered (and delivered its whole update
  /// iff `whole`). What it delivered stays in the round's sum, and it
  /// counts towards min_clients iff that is a chunk or more. The round
  /// waits for the answer.
  void keep_streamed(const std::string& dropped, bool whole) {
    offered_.erase(dropped); // its figures stay: its data is in the sum
    if (whole) {             // awaited no more, and still in every position
      ++kept_;
      ++kept_whole_;
      return;
    }
    auto r = round_;
    ++abandoning_;
    self_->request(aggregator_, caf::infinite, abandon_atom::value, dropped, r)
        .then([this, dropped, r](uint64_t chunks) {
          --abandoning_;
          if (r != round_ || stopped_)
            return;
          kept_ += chunks > 0 ? 1 : 0;
          // Cut where it stopped, or (an offer refused: no stream) awaited
          // nowhere: either way no position waits for it now.
          self_->send(aggregator_, expect_atom::value, contributors());
          log_line(log_level::warning, "scheduler",
                   "round " + std::to_string(r) + ": " + dropped +
                       " was dropped mid-upload; its " +
                       std::to_string(chunks) +
                       " delivered chunks stay in the relay's sum");
          check_round();
        });
  }

  /// partial_updates: discard, `dropped` offered and had not finished its
  /// upload: the aggregator closes its stream and says how many chunks it
  /// folded. None: the round goes on without it (an offer and a vanishing
  /// act must not make every other client upload again); some: the round's
  /// updates are collected again. The round waits for the answer.
  void discard_partial(const std::string& dropped) {
    auto r = round_;
    ++abandoning_;
    self_->request(aggregator_, caf::infinite, abandon_atom::value, dropped, r)
        .then([this, dropped, r](uint64_t chunks) {
          --abandoning_;
          if (r != round_ || stopped_ || finalizing_)
            return;
          if (chunks > 0) {
            collect_again(dropped, "it was dropped mid-upload");
          } else {
            log_line(log_level::warning, "scheduler",
                     "round " + std::to_string(r) + ": " + dropped +
                         " was dropped before sending a chunk");
            // (its offer may have been refused: no stream, nothing cut)
            self_->send(aggregator_, expect_atom::value, contributors());
          }
          check_round();
        });
  }

  /// `gone` sent chunks that are in the sum: start the collection over.
  void collect_again(const std::string& gone, const std::string& why) {
    if (options_.relay && participants_.size() < options_.min_clients) {
      // The round is sat out (fail_round): nothing of it goes up, so no
      // collection again; the window only stops awaiting `gone`.
      self_->send(aggregator_, expect_atom::value, contributors());
      return;
    }
    log_line(log_level::warning, "scheduler",
             "round " + std::to_string(round_) + ": " + gone + " left: " + why +
                 "; collecting the " + "updates of " + join_ids(offered_) +
                 " again");
    self_->send(aggregator_, reset_atom::value, contributors());
    std::vector<std::string> again(offered_.begin(), offered_.end());
    offered_.clear();
    closed_.clear();
    if (!again.empty())
      self_->send(server_, resend_atom::value, round_, std::move(again));
  }

  void check_round() {
    if (stopped_ || finalizing_ || round_ == 0 || abandoning_ > 0)
      return;
    if (participants_.size() + kept_ < options_.min_clients && !streaming_)
      return fail_round(
          "round " + std::to_string(round_) + " failed: only " +
          std::to_string(participants_.size()) + " of " +
          std::to_string(options_.num_clients) +
          " clients can still deliver (missing: " + join_ids(missing_) +
          "), min_clients is " + std::to_string(options_.min_clients));
    if (closed_.size() == participants_.size())
      finalize();
  }

  /// Round `round_` cannot have min_clients (`why`): a server's run ends;
  /// a relay's group sits its parent's round out, once every participant
  /// of an `announced` round has closed its update or left (a new round
  /// must not find an upload open, nor an offer come for a round gone).
  void fail_round(const std::string& why, bool announced = true) {
    if (!options_.relay)
      return stop(why);
    bool first = !sitting_out_;
    if (announced && first) {
      // Whoever has not offered yet leaves now (and is refused if it does):
      // the round is lost already, only uploads under way are awaited.
      for (auto it = participants_.begin(); it != participants_.end();)
        if (offered_.count(*it)) {
          ++it;
        } else {
          missing_.insert(*it);
          it = participants_.erase(it);
        }
      self_->send(aggregator_, expect_atom::value, contributors());
      sitting_out_ = true;
      if (closed_.size() < participants_.size())
        log_line(log_level::warning, "scheduler",
                 why + "; the relay sits its parent's round out once the "
                       "updates under way have closed");
    }
    if (announced && closed_.size() < participants_.size())
      return;
    finalizing_ = true;
    auto r = round_;
    // Not announced: the server sits the round out once the parent's model
    // is in, if the children are still too few then.
    log_line(announced ? log_level::warning : log_level::debug, "scheduler",
             (first ? why
                    : "round " + std::to_string(r) +
                          ": the updates under way have closed") +
                 "; the relay sits its parent's round out (its group "
                 "offers nothing) and takes the next");
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

  /// Finalizes the round: its updates' weight is what a relay's sum goes
  /// up at (the aggregator scales it to that, and publish reports it).
  void finalize() {
    finalizing_ = true;
    auto r = round_;
    double weight = 0;
    for (const auto& id : closed_)
      weight += figures_[id].weight;
    self_->request(aggregator_, caf::infinite, finalize_atom::value, r, weight)
        .then([this, r, weight](
                  snapshot_ptr next) { publish(r, std::move(next), weight); },
              [this](caf::error& e) {
                stop("aggregation failed: " + self_->system().render(e));
              });
  }

  void publish(uint32_t r, snapshot_ptr next, double weight) {
    auto clients = static_cast<uint32_t>(closed_.size());
    double loss = 0, epsilon = 0;
    for (const auto& id : closed_)
      loss += figures_[id].train_loss;
    // Epsilon also counts a kept partial update's client.
    for (const auto& [id, f] : figures_)
      epsilon = std::max(epsilon, f.dp_epsilon);
    loss /= std::max(1u, clients);
    // Every client the run has known that is not in this round's model.
    std::vector<std::string> missing;
    for (const auto& id : known_)
      if (!closed_.count(id))
        missing.push_back(id);
    std::vector<std::string> in(closed_.begin(), closed_.end());
    std::vector<uint32_t> staleness(in.size(), 0);
    std::vector<std::pair<std::string, double>> relay_weights;
    for (const auto& id : in)
      if (options_.relays.count(id))
        relay_weights.emplace_back(id, figures_[id].weight);
    self_
        ->request(server_, caf::infinite, publish_atom::value,
                  round_result{r, std::move(next), clients, loss, epsilon,
                               std::move(missing), std::move(in),
                               std::move(staleness), weight,
                               std::move(relay_weights)})
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

  frame refuse(const error& e) const { return refusals_.refuse(e); }

  sync_scheduler_actor::pointer self_ = nullptr;
  aggregator_actor aggregator_;
  round_host server_;
  scheduler_options options_;
  std::set<std::string> known_;        ///< every client that ever joined
  std::set<std::string> registered_;   ///< joined and not dropped
  std::set<std::string> participants_; ///< may still deliver to this round
  std::set<std::string> missing_;      ///< left this round
  std::set<std::string> offered_;
  std::set<std::string> closed_;
  /// What each offer of the round reported: its loss and DP-SGD epsilon,
  /// and the weight it was given.
  struct offered_figures {
    double train_loss = 0;
    double dp_epsilon = 0;
    double weight = 1;
  };
  std::map<std::string, offered_figures> figures_;
  std::map<std::string, std::string> addresses_; ///< where each registered
  uint32_t round_ = 0;
  bool finalizing_ = false;
  uint32_t abandoning_ = 0; ///< drops whose folded chunks are being asked
  bool overdue_ = false;    ///< deadline passed, waiting for min_clients offers
  bool sitting_out_ = false; ///< a relay's round short of min_clients
  /// A streaming relay: its round's sum goes up (it is never sat out now),
  /// and the children that left it with chunks in the sum.
  bool streaming_ = false;
  uint32_t kept_ = 0;
  uint32_t kept_whole_ = 0;     ///< of those, the ones that had delivered all
  double stream_loss_ = 0;      ///< the offer's: the children's mean loss
  uint32_t stream_clients_ = 0; ///< and how many were in position 0
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
