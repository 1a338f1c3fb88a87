#include <algorithm>
#include <deque>
#include <map>
#include <optional>
#include <set>

#include <caf/all.hpp>

#include "actors/messages.hpp"
#include "actors/scheduler.hpp"
#include "fedcaf/log.hpp"
#include "protocol/offer_admission.hpp"
#include "protocol/round_deadline.hpp"

namespace fedcaf {

namespace {

/// An update admitted into the coming step.
struct admitted_update {
  task_info task;
  uint32_t staleness = 0; ///< versions between its model and the step's
  double weight = 0;      ///< alpha s(staleness) or s(staleness)
  double train_loss = 0;
  double dp_epsilon = 0;
};

/// An offer waiting for a place in the server's next step.
struct queued_offer {
  caf::typed_response_promise<frame> reply;
  msg::offer offer;
};

// AsyncScheduler (no rounds): every client gets a task as soon as it has
// registered (once num_clients have) and a new one as soon as its update has
// closed, always on the newest model. Updates are admitted `slots` at a time
// into the server's next step (FedAsync: 1, applied alone, so updates apply
// one after another in the order they were admitted; FedBuff: K, summed);
// further offers wait in order. When every admitted update has closed, the
// aggregator finalizes the step and the server publishes version v + 1.
// The run ends after num_rounds steps (num_global_epochs, as APPFL counts
// them).
// At the registration deadline (deadline_atom, 0) the run starts with the
// clients registered, if at least min_clients (default num_clients), or
// ends naming those that never came.
//   waiting -(num_clients joined)-> running -(step complete)-> stepping
//   -(published)-> running ... -> stopped
// A client dropped mid-upload leaves what it delivered in the step (its
// chunks cannot be taken out of a sum other clients' updates share); one
// dropped before offering is forgotten.
// An update the aggregator rejects (NaN or infinity, too far from the
// global model, or silent) is not applied: with nothing of it folded, or
// when it is the step's only update (FedAsync: always), it leaves the step
// (the aggregator forgets the step's sum in the second case) and its slot
// goes to the next offer. FedBuff, when other updates of the step share the
// sum with chunks of it: those chunks stay, as for a drop (taking them out
// would need the others to send again, which tasks cannot ask for yet). The
// rejected client gets its next task with the next model, or at once when
// nobody else holds a task that could make one.
class async_scheduler_state {
public:
  async_scheduler_state(aggregator_actor aggregator, scheduler_options options)
      : aggregator_(std::move(aggregator)), options_(std::move(options)),
        slots_(options_.rule == server_rule::fedbuff
                   ? options_.rule_cfg.buffer_k
                   : 1),
        refusals_("scheduler", options_.refusals) {}

  void attach(scheduler_actor::pointer self) { self_ = self; }

  /// The server, before any client joins; the registration deadline
  /// starts.
  void connect(round_host server) {
    server_ = std::move(server);
    if (options_.registration_deadline.count() > 0)
      self_->delayed_send(self_, options_.registration_deadline,
                          deadline_atom::value, uint32_t{0});
  }

  void join(const std::string& id) {
    registered_.insert(id);
    if (running_)
      return assign(id);
    if (registered_.size() < options_.num_clients)
      return;
    start();
  }

  /// The registration deadline passed: the run starts with the clients
  /// registered, or ends naming those that never came.
  void registration_over() {
    if (running_ || stopped_)
      return;
    auto fewest =
        options_.min_clients ? options_.min_clients : options_.num_clients;
    auto v = registration_deadline_passed(
        registered_, options_.expected_clients, options_.num_clients,
        std::min(fewest, options_.num_clients), options_.registration_deadline);
    if (!v.start)
      return stop(v.message);
    log_line(log_level::warning, "scheduler", v.message);
    start();
  }

  void drop(const std::string& id) {
    registered_.erase(id);
    tasks_.erase(id);
    for (auto it = queue_.begin(); it != queue_.end(); ++it)
      if (it->offer.client_id == id) {
        it->reply.deliver(refuse({errc::not_in_round, id + " was dropped"}));
        queue_.erase(it);
        break;
      }
    if (!admitted_.count(id) || closed_.count(id))
      return;
    // Mid-upload: what arrived stays in the step.
    auto r = admitted_[id].task.round;
    closed_.insert(id);
    self_->request(aggregator_, caf::infinite, abandon_atom::value, id, r)
        .then([this, id](uint64_t chunks) {
          log_line(log_level::warning, "scheduler",
                   id + " was dropped mid-upload; its " +
                       std::to_string(chunks) +
                       " delivered chunks stay in the step");
          check_step();
        });
  }

  caf::result<frame> offer(const frame& f) {
    auto o = msg::decode<msg::offer>(f);
    if (!o)
      return refuse(o.err());
    if (auto v = check_task_offer(*o, task_of(o->client_id), stopped_))
      return answer_frame(*v, refusals_);
    auto a = admitted_.find(o->client_id);
    if (a != admitted_.end() && a->second.task.round == o->round) {
      // Repeated after a reconnect: the aggregator resumes the stream.
      return self_->delegate(
          aggregator_, open_atom::value, upload_listener{self_},
          upload_request{o->client_id, o->round, a->second.weight,
                         o->manifest_digest, o->total_bytes, o->chunk_count,
                         0.0});
    }
    auto rp = self_->make_response_promise<frame>();
    queue_.push_back({rp, *o});
    admit();
    return rp;
  }

  void update_closed(const std::string& id, uint32_t round) {
    auto it = admitted_.find(id);
    if (it == admitted_.end() || it->second.task.round != round)
      return;
    closed_.insert(id);
    tasks_.erase(id);
    waiting_.push_back(id); // its next task comes with the next model
    check_step();
  }

  /// The aggregator refused `id`'s update (its content or its silence):
  /// it is not applied where it can be taken out (see above).
  void reject(const std::string& id, uint32_t round, uint64_t folded,
              const error& refusal) {
    auto why = to_string(refusal);
    auto it = admitted_.find(id);
    if (it == admitted_.end() || it->second.task.round != round ||
        closed_.count(id))
      return;
    self_->send(server_, reject_atom::value, id, refusal);
    tasks_.erase(id);
    waiting_.push_back(id);
    if (folded > 0 && admitted_.size() > 1) {
      log_line(log_level::warning, "scheduler",
               id + "'s update was rejected (" + why + "); " +
                   std::to_string(folded) +
                   " delivered chunks stay in the step, which "
                   "other updates share");
      closed_.insert(id);
      return check_step();
    }
    log_line(log_level::warning, "scheduler",
             id + "'s update was rejected (" + why + "); it leaves the step");
    if (folded > 0) // the sum holds nothing else
      self_->send(aggregator_, reset_atom::value, uint32_t{1});
    admitted_.erase(it);
    if (admitted_.empty() && tasks_.empty())
      assign_waiting(); // nobody else could make the next model
    admit();
    check_step();
  }

private:
  /// The run starts: every registered client gets a task.
  void start() {
    running_ = true;
    for (const auto& c : registered_)
      assign(c);
  }

  void assign(const std::string& id) {
    if (stopped_)
      return;
    auto round = ++next_round_;
    tasks_[id] = {round, version_};
    self_->send(server_, task_atom::value, id, round);
  }

  /// Admits waiting offers while the step has room.
  void admit() {
    while (!stepping_ && !stopped_ && admitted_.size() < slots_ &&
           !queue_.empty()) {
      auto q = std::move(queue_.front());
      queue_.pop_front();
      const auto& id = q.offer.client_id;
      auto task = task_of(id);
      auto v = admit_task_offer(q.offer, task, version_, options_.rule,
                                options_.rule_cfg);
      if (!v.admitted()) {
        q.reply.deliver(answer_frame(v, refusals_));
        continue;
      }
      auto staleness = static_cast<uint32_t>(version_ - task->base_version);
      admitted_[id] = {*task, staleness, v.weight,
                       msg::bounded_loss(q.offer.train_loss),
                       q.offer.dp_epsilon};
      q.reply.delegate(
          aggregator_, open_atom::value, upload_listener{self_},
          upload_request{id, q.offer.round, v.weight, q.offer.manifest_digest,
                         q.offer.total_bytes, q.offer.chunk_count, 0.0});
    }
  }

  /// The task `id` holds, if any.
  std::optional<task_info> task_of(const std::string& id) const {
    auto it = tasks_.find(id);
    if (it == tasks_.end())
      return std::nullopt;
    return it->second;
  }

  /// Returns true iff a client outside the step holds a task, so that its
  /// update could still join the step.
  bool others_could_offer() const {
    return std::any_of(tasks_.begin(), tasks_.end(), [this](const auto& kv) {
      return !admitted_.count(kv.first);
    });
  }

  /// Gives the clients waiting for the next model a task on the current one.
  void assign_waiting() {
    auto waiting = std::move(waiting_);
    waiting_.clear();
    for (const auto& id : waiting)
      if (registered_.count(id))
        assign(id);
  }

  void check_step() {
    if (stepping_ || stopped_ || admitted_.empty() ||
        closed_.size() < admitted_.size())
      return;
    // FedBuff steps with K updates, or with fewer once no other client
    // holds a task (nobody else could fill the buffer: the others wait for
    // the next model, or were rejected).
    if (admitted_.size() < slots_ && others_could_offer())
      return;
    stepping_ = true;
    auto v = static_cast<uint32_t>(version_ + 1);
    self_->request(aggregator_, caf::infinite, finalize_atom::value, v, 0.0)
        .then([this, v](snapshot_ptr next) { publish(v, std::move(next)); },
              [this](caf::error& e) {
                stop("aggregation failed: " + self_->system().render(e));
              });
  }

  void publish(uint32_t v, snapshot_ptr next) {
    std::vector<std::string> in;
    std::vector<uint32_t> staleness;
    double loss = 0, epsilon = 0;
    for (const auto& [id, a] : admitted_) {
      in.push_back(id);
      staleness.push_back(a.staleness);
      loss += a.train_loss;
      epsilon = std::max(epsilon, a.dp_epsilon);
    }
    loss /= std::max<size_t>(1, in.size());
    auto clients = static_cast<uint32_t>(in.size());
    self_
        ->request(server_, caf::infinite, publish_atom::value,
                  round_result{v,
                               std::move(next),
                               clients,
                               loss,
                               epsilon,
                               std::vector<std::string>{},
                               std::move(in),
                               std::move(staleness),
                               0,
                               {}})
        .then(
            [this, v](bool go_on) {
              version_ = v;
              admitted_.clear();
              closed_.clear();
              stepping_ = false;
              if (!go_on)
                stopped_ = true;
              else if (version_ >= options_.num_rounds)
                stop("");
              if (stopped_)
                return;
              assign_waiting();
              admit();
            },
            [this](caf::error& e) {
              stop("publishing failed: " + self_->system().render(e));
            });
  }

  void stop(const std::string& reason) {
    stopped_ = true;
    if (!reason.empty())
      log_line(log_level::error, "scheduler", reason);
    for (auto& q : queue_)
      q.reply.deliver(answer_frame(run_ended_answer(), refusals_));
    queue_.clear();
    self_->send(server_, stop_atom::value, reason);
  }

  frame refuse(const error& e) const { return refusals_.refuse(e); }

  scheduler_actor::pointer self_ = nullptr;
  aggregator_actor aggregator_;
  round_host server_;
  scheduler_options options_;
  size_t slots_;
  std::set<std::string> registered_;
  std::map<std::string, task_info> tasks_;          ///< current task per client
  std::map<std::string, admitted_update> admitted_; ///< in the coming step
  std::set<std::string> closed_;                    ///< admitted and closed
  std::deque<queued_offer> queue_;
  std::vector<std::string> waiting_; ///< get a task after the next publish
  uint64_t version_ = 0;
  uint32_t next_round_ = 0;
  bool running_ = false;
  bool stepping_ = false;
  bool stopped_ = false;
  refusal_log refusals_;
};

scheduler_actor::behavior_type
async_scheduling(scheduler_actor::pointer self,
                 std::shared_ptr<async_scheduler_state> state) {
  state->attach(self);
  return {
      [state](connect_atom, const round_host& server) {
        state->connect(server);
      },
      [state](join_atom, const std::string& id, const std::string&) {
        state->join(id);
      },
      [state](drop_atom, const std::string& id) { state->drop(id); },
      [state](reject_atom, const std::string& id, uint32_t round,
              uint64_t folded, const error& refusal) {
        state->reject(id, round, folded, refusal);
      },
      [](settled_atom, uint32_t, uint64_t, double) {}, // relays are sync
      [state](offer_atom, const frame& f) { return state->offer(f); },
      [state](update_atom, const std::string& id, uint32_t round) {
        state->update_closed(id, round);
      },
      [state](deadline_atom, uint32_t) { state->registration_over(); },
      [](sit_out_atom, uint32_t) {}, // relays run sync rounds only
  };
}

} // namespace

scheduler_actor spawn_async_scheduler(caf::actor_system& sys,
                                      aggregator_actor aggregator,
                                      scheduler_options options) {
  auto state = std::make_shared<async_scheduler_state>(std::move(aggregator),
                                                       std::move(options));
  return sys.spawn(async_scheduling, std::move(state));
}

} // namespace fedcaf
