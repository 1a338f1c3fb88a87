#include "crowd.hpp"

#include <algorithm>

#include <caf/all.hpp>

namespace fedcaf::cli {

bool drawn_as_population(const config& cfg) {
  const auto& s = cfg.server;
  return s.clients_per_round > 0 && s.clients_per_round < s.num_clients &&
         s.scheduler == scheduler_kind::sync && !s.secure_aggregation.enabled &&
         !s.federated_evaluation.value_or(false);
}

crowd::crowd(caf::actor_system& sys, uint32_t first, uint32_t count, maker make,
             std::string prefix)
    : sys_(sys),
      members_(std::make_shared<population>(first, count, std::move(prefix))),
      make_(std::move(make)) {}

summoning crowd::hook() {
  return {members_, [this](const server_actor& server, uint32_t index) {
            summon(server, index);
          }};
}

void crowd::summon(const server_actor& server, uint32_t index) {
  auto [options, trainer] = make_(members_->first() + index);
  options.client_id = members_->id_of(index);
  options.hold_model = false; // it leaves when a round opens without it
  auto report = std::make_shared<run_report>();
  {
    std::lock_guard<std::mutex> lock{mtx_};
    ++summoned_;
    peak_alive_ = std::max(peak_alive_, ++alive_);
  }
  auto client = spawn_client(sys_, server, std::move(options),
                             std::move(trainer), report.get());
  caf::actor_cast<caf::abstract_actor*>(client)->attach_functor(
      [this, report] { ended(*report); });
}

void crowd::ended(const run_report& r) {
  std::lock_guard<std::mutex> lock{mtx_};
  peak_in_flight_ = std::max(peak_in_flight_, r.peak_in_flight);
  if (!r.failure.empty())
    failed_.push_back(r);
  if (--alive_ == 0)
    none_alive_.notify_all();
}

void crowd::await_all() {
  std::unique_lock<std::mutex> lock{mtx_};
  none_alive_.wait(lock, [this] { return alive_ == 0; });
}

void crowd::report_into(run_report& into, std::vector<run_report>& clients) {
  std::lock_guard<std::mutex> lock{mtx_};
  into.peak_in_flight = std::max(into.peak_in_flight, peak_in_flight_);
  into.summoned_clients += summoned_;
  into.peak_clients_alive += peak_alive_;
  for (auto& r : failed_) {
    if (into.failure.empty())
      into.failure = r.node + ": " + r.failure;
    clients.push_back(std::move(r));
  }
  failed_.clear();
}

} // namespace fedcaf::cli
