#pragma once
// What the parts of the server actor share: its handle and peers, its
// options, and the protocol objects every part asks (who is registered,
// what is served, which round is open, the report, federated evaluation's
// tally), with the few helpers they all use. Private to the server's
// implementation (actors/server.cpp and its parts, server_secagg and
// server_publication); other actors see actors/server.hpp only.
// Thread-safety: none; the server actor's.

#include <chrono>
#include <string>
#include <utility>

#include <caf/all.hpp>

#include "actors/interfaces.hpp"
#include "actors/server_options.hpp"
#include "protocol/client_registry.hpp"
#include "protocol/evaluation_tally.hpp"
#include "protocol/model_exchange.hpp"
#include "protocol/round_announcement.hpp"
#include "protocol/round_reporter.hpp"

namespace fedcaf {

struct server_core {
  using time_point = caf::actor_clock::time_point;

  /// The server of `initial`, reporting into `report`.
  server_core(snapshot_ptr initial, server_peers peers, server_options options,
              run_report* report);

  /// The actor's clock: virtual time under CAF's test coordinator.
  time_point now() const { return self_->clock().now(); }
  /// Returns the seconds from `t` to now, on the actor's clock.
  double seconds_from(time_point t) const {
    return std::chrono::duration<double>(now() - t).count();
  }
  /// The run's time and refusals so far, for the report's events.
  report_stamp stamp() const {
    return {seconds_from(started_), refusals_.count()};
  }
  /// `e` as a refusal: counted, logged, an error frame.
  frame refuse(const error& e) const { return refusals_.refuse(e); }

  /// Sends client `id` (`xs`) iff it is connected (a sharded client: each
  /// rank connected); returns whether it was.
  template <class... Ts> bool tell(const std::string& id, const Ts&... xs) {
    auto to = registry_.connections(id);
    for (const auto* c : to)
      self_->send(c->handle, xs...);
    return !to.empty();
  }

  /// True iff client `key` was dropped from the run for lying (banned).
  bool banned(const std::string& key) {
    const auto* c = registry_.find(key);
    return c && c->banned;
  }

  /// Sends what is open to client `key`, which came back (round_
  /// announcement), iff it is connected and something is.
  void announce_to(const std::string& key);

  /// AsyncScheduler: client `id`'s next task, on the current model (none
  /// once the run ends, or for a client not registered).
  void give_task(const std::string& id, uint32_t round);

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
  time_point started_;
  time_point round_started_;
  bool stopping_ = false; ///< the run ended: Done sent, clients leaving
};

} // namespace fedcaf
