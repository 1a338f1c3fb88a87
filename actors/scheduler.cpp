#include "actors/scheduler.hpp"

#include <set>

#include <caf/all.hpp>

#include "actors/protocol.hpp"
#include "fedcaf/log.hpp"

namespace fedcaf {

namespace {

// State machine:
//   registering -(all joined)-> collecting(r) -(all updates closed)->
//   finalizing(r) -(published)-> collecting(r+1) ... -> stopped
// A client that leaves fails the run: a sync round cannot complete without it.
class scheduler_state {
public:
  scheduler_state(caf::actor aggregator, scheduler_options options)
      : aggregator_(std::move(aggregator)), options_(std::move(options)),
        refusals_("scheduler", options_.refusals) {}

  void attach(caf::event_based_actor* self) { self_ = self; }

  void join(const std::string& id) {
    if (!server_)
      server_ = caf::actor_cast<caf::actor>(self_->current_sender());
    registered_.insert(id);
    if (round_ == 0 && registered_.size() == options_.num_clients)
      start_round(1);
  }

  void leave(const std::string& id, const std::string& reason) {
    if (stopped_)
      return;
    stop("client " + id + " left in round " + std::to_string(round_) + " (" +
         reason + "); a sync round needs every client");
  }

  /// Returns an error frame, or an empty frame after delegating the offer to
  /// the aggregator (which then answers the client itself).
  frame offer(const frame& f) {
    auto o = msg::decode<msg::offer>(f);
    if (!o)
      return refuse(o.err());
    if (o->round != round_ || finalizing_)
      return refuse(
          {errc::wrong_round, "offer for round " + std::to_string(o->round) +
                                  ", open round is " + std::to_string(round_)});
    if (!registered_.count(o->client_id))
      return refuse({errc::unknown_client, o->client_id});
    if (!offered_.insert(o->client_id).second)
      return refuse(
          {errc::unknown_client, o->client_id + " offered twice in one round"});
    train_loss_sum_ += o->train_loss;
    double weight = options_.client_weights_mode == "sample_size"
                        ? static_cast<double>(o->sample_count)
                        : 1.0;
    self_->delegate(aggregator_, open_atom::value,
                    caf::actor_cast<caf::actor>(self_), o->client_id, o->round,
                    weight, o->manifest_digest, o->total_bytes, o->chunk_count);
    return {};
  }

  void update_closed(const std::string& id, uint32_t round) {
    if (round != round_ || !offered_.count(id))
      return;
    closed_.insert(id);
    if (closed_.size() == options_.num_clients)
      finalize();
  }

private:
  void start_round(uint32_t r) {
    round_ = r;
    finalizing_ = false;
    offered_.clear();
    closed_.clear();
    train_loss_sum_ = 0;
    self_->send(server_, start_atom::value, r);
  }

  void finalize() {
    finalizing_ = true;
    auto r = round_;
    self_->request(aggregator_, caf::infinite, finalize_atom::value, r)
        .then([this, r](snapshot_ptr next) { publish(r, std::move(next)); },
              [this](caf::error& e) {
                stop("aggregation failed: " + self_->system().render(e));
              });
  }

  void publish(uint32_t r, snapshot_ptr next) {
    auto clients = static_cast<uint32_t>(closed_.size());
    auto loss = train_loss_sum_ / std::max(1u, clients);
    self_
        ->request(server_, caf::infinite, publish_atom::value, r,
                  std::move(next), clients, loss)
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
      log_line("scheduler", reason);
    self_->send(server_, stop_atom::value, reason);
  }

  frame refuse(const error& e) const { return refusals_.refuse(e); }

  caf::event_based_actor* self_ = nullptr;
  caf::actor aggregator_;
  caf::actor server_;
  scheduler_options options_;
  std::set<std::string> registered_;
  std::set<std::string> offered_;
  std::set<std::string> closed_;
  uint32_t round_ = 0;
  bool finalizing_ = false;
  bool stopped_ = false;
  double train_loss_sum_ = 0;
  refusal_log refusals_;
};

caf::behavior scheduler_actor(caf::event_based_actor* self,
                              std::shared_ptr<scheduler_state> state) {
  state->attach(self);
  return {
      [state](join_atom, const std::string& id) { state->join(id); },
      [state](leave_atom, const std::string& id, const std::string& reason) {
        state->leave(id, reason);
      },
      [state](offer_atom, const frame& f) -> caf::result<frame> {
        auto reply = state->offer(f);
        if (reply.empty())
          return caf::delegated<frame>{};
        return reply;
      },
      [state](update_atom, const std::string& id, uint32_t round) {
        state->update_closed(id, round);
      },
  };
}

} // namespace

caf::actor spawn_scheduler(caf::actor_system& sys, caf::actor aggregator,
                           scheduler_options options) {
  auto state = std::make_shared<scheduler_state>(std::move(aggregator),
                                                 std::move(options));
  return sys.spawn(scheduler_actor, std::move(state));
}

} // namespace fedcaf
