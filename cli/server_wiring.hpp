#pragma once
// A server side wired from its config (the root's, a server's, a relay's
// children's side): the options of each of its actors, its initial model
// (or a checkpoint's under --resume), its evaluator, where it listens.
// Thread-safety: no shared state.

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <caf/all.hpp>

#include "actors/server_side.hpp"
#include "fedcaf/config.hpp"
#include "fedcaf/fashion_mnist.hpp"
#include "fedcaf/live_status.hpp"
#include "fedcaf/progress.hpp"
#include "fedcaf/report.hpp"
#include "fedcaf/tls.hpp"
#include "fedcaf/trainer.hpp"
#include "protocol/network.hpp"
#include "relay.hpp"
#include "run.hpp"

namespace fedcaf::cli {

using dataset_ptr = std::shared_ptr<const image_set>;

/// Returns the test set iff the server will evaluate, else null.
result<dataset_ptr> test_set_for(const config& cfg);

/// Spawns the server side of `cfg` (its rounds recorded in `report`;
/// `remote`: clients come over the network, so tokens and certificates
/// apply); its evaluation of `test` stops at the next batch once `stop` is
/// set. `relay`: the children's side of a relay, from its parent's first
/// model and terms.
result<server_side>
spawn_from_config(caf::actor_system& sys, const config& cfg, dataset_ptr test,
                  run_report* report, bool remote, const options& opts,
                  std::shared_ptr<metrics_log> metrics,
                  std::shared_ptr<live_status> live,
                  std::shared_ptr<transfer_progress> progress, stop_flag stop,
                  relay_upstream* relay = nullptr);

/// Where a server side listens (server_uri) and its TLS context (null:
/// plain TCP).
result<std::pair<endpoint, std::shared_ptr<tls_context>>>
front_door_of(const comm_config& comm);

/// TrimmedMean trims floor(trim_ratio k) values of k from each end: with
/// too few clients a round trims nothing and averages like FedAvg. Logs a
/// warning iff `cfg`'s rounds would.
void warn_if_trimming_nothing(const config& cfg);

/// Blocks until every actor in `actors` has terminated.
template <class Handle>
void await_all(caf::actor_system& sys, const std::vector<Handle>& actors) {
  caf::scoped_actor self{sys};
  for (const auto& a : actors)
    self->monitor(a);
  for (size_t i = 0; i < actors.size(); ++i)
    self->receive([](const caf::down_msg&) {});
}

} // namespace fedcaf::cli
