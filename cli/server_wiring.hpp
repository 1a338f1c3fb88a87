#pragma once
// A server side wired from its config (the root's, a server's, a relay's
// children's side): the options of each of its actors (pure functions of
// the config and its aggregation plan), its initial model (or a
// checkpoint's under --resume), its evaluator, where it listens.
// Thread-safety: no shared state.

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <caf/all.hpp>

#include "actors/server_side.hpp"
#include "fedcaf/aggregation_plan.hpp"
#include "fedcaf/config.hpp"
#include "fedcaf/fashion_mnist.hpp"
#include "fedcaf/live_status.hpp"
#include "fedcaf/progress.hpp"
#include "fedcaf/report.hpp"
#include "fedcaf/tls.hpp"
#include "fedcaf/trainer.hpp"
#include "options.hpp"
#include "protocol/network.hpp"
#include "relay.hpp"

namespace fedcaf::cli {

using dataset_ptr = std::shared_ptr<const image_set>;

/// plan_aggregation of cfg.server; its error names cfg's source.
result<aggregation_plan> plan_of(const config& cfg);

/// The config the newest complete checkpoint in `dir` holds, with
/// `overrides` on top (`fedcaf server --resume DIR` without -c). A
/// checkpoint whose config had inline secrets (tokens, redacted when it
/// was written) is refused: they must come from -c.
result<config> checkpoint_config(const std::string& dir,
                                 const std::vector<std::string>& overrides);

/// The options of `cfg`'s server side under `plan` (plan_aggregation's of
/// cfg.server), its model cut in chunks of `chunk_bytes`; `remote`: clients
/// come over the network, so tokens and certificate names apply. Pure: what
/// the process adds (its outputs and live status, a resumed run's
/// checkpoint, a relay's parent's terms) is the caller's.
server_side_options options_from(const config& cfg,
                                 const aggregation_plan& plan,
                                 uint64_t chunk_bytes, bool remote);

/// What a relay's children's side changes in `own` (options_from its
/// config, named `source`): it sums (plan.partial_sums) as many rounds as
/// its parent runs (relay_rounds), tells its children the parent's `terms`
/// and `client_configs_yaml`, serves downloads compressed as those say and
/// evaluates nothing; streaming its sum, it cuts a child silent for half
/// the parent's idle_timeout_s + reconnect_grace_s, before the parent takes
/// the relay's silence for its own. Returns an error iff the parent's
/// client_configs cannot be read, or compress uploads (deltas), which a
/// relay decodes in memory_mode ram only. Pure.
result<server_side_options>
relay_children_options(server_side_options own, const msg::client_terms& terms,
                       const std::string& client_configs_yaml,
                       const std::string& source);

/// Returns the test set iff the server will evaluate, else null.
result<dataset_ptr> test_set_for(const config& cfg);

/// Spawns the server side of `cfg` (its rounds recorded in `report`;
/// `remote`: clients come over the network, so tokens and certificates
/// apply); its evaluation of `test` stops at the next batch once `stop` is
/// set. `relay`: the children's side of a relay, from its parent's first
/// model and terms. `drawn`: its clients are a population (see
/// cli/crowd.hpp).
result<server_side> spawn_from_config(
    caf::actor_system& sys, const config& cfg, dataset_ptr test,
    run_report* report, bool remote, const options& opts,
    std::shared_ptr<metrics_log> metrics, std::shared_ptr<live_status> live,
    std::shared_ptr<transfer_progress> progress, stop_flag stop,
    relay_upstream* relay = nullptr, const summoning* drawn = nullptr);

/// Where a server side listens (server_uri) and its TLS context (null:
/// plain TCP).
using front_door = std::pair<endpoint, std::shared_ptr<tls_context>>;
result<front_door> front_door_of(const comm_config& comm);

/// TrimmedMean trims floor(trim_ratio k) values of k from each end: with
/// too few clients a round trims nothing and averages like FedAvg. Logs a
/// warning iff `cfg`'s rounds would.
void warn_if_trimming_nothing(const config& cfg);

/// The characters of a token of 128 random bits (22 in base64; hex: 32).
constexpr size_t min_token_chars = 22;
/// Logs a warning naming the clients whose tokens are shorter than
/// min_token_chars (guessable: admission never locks a right token out).
void warn_if_guessable_tokens(const config& cfg);

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
