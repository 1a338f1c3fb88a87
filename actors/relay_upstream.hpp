#pragma once
// A relay's upstream half (`fedcaf relay`, and a simulated tree's relays):
// the "trainer" of its upstream client, whose round is a round of its own
// children. The parent's model of the round goes down as it downloads (the
// memory the download writes is the children's side's model of the
// round, each chunk announced as it is in), and what goes back up is the
// children's updates' weighted sum with its weight (Offer.partialSum):
// whole, once the side answers (ram mode), or as it settles (window and
// disk modes). Its messages reach the side through one courier
// (actors/relay_courier.hpp). See docs/design.md, "Trees of aggregators".
// Thread-safety: a trainer is used by its upstream client only; the link
// the trainers of a process share is used by one at a time.

#include <cstdint>
#include <functional>
#include <string>

#include <caf/fwd.hpp>

#include "actors/client.hpp"
#include "fedcaf/log.hpp"
#include "fedcaf/manifest.hpp"
#include "fedcaf/model_snapshot.hpp"
#include "messages/codec.hpp"

namespace fedcaf {

/// What a relay's children's side starts from: the parent's model of the
/// first round (or zeroes of its layout), and what the parent's Welcome
/// told (forwarded to the children).
struct relay_upstream {
  model_snapshot initial;
  msg::client_terms terms;
  std::string client_configs_yaml;
};

/// The children's side, once spawned: its server and the chunk size its
/// uploads are cut by (the positions of its sums).
struct relay_side {
  server_actor server;
  manifest layout; ///< of the model it serves
  caf::actor_system* system = nullptr;
  uint64_t chunk_bytes = 0;
  /// memory_mode window: the download cache's chunks (the side's window),
  /// and the model's memory is held chunk by chunk (relay_residency); 0:
  /// the other modes.
  uint32_t cache = 0;
};

/// Spawns the children's side from the parent's first model (called once).
using relay_spawner = std::function<result<relay_side>(relay_upstream)>;

/// Trainers for a relay's upstream client: each round hands the parent's
/// model to the children's side (spawning it the first time, or at the
/// Welcome where the parent's client_configs give the layout) and waits
/// for their partial sum. `storage_dir` (disk mode; "" otherwise): the
/// parent's model and the sums live in unlinked files there, their pages
/// given back chunk by chunk, so the relay's resident memory does not grow
/// with the model.
/// `round_level`: the level of its per-round line ("N updates summed";
/// debug inside a simulated tree).
trainer_factory relay_trainers(relay_spawner spawn, std::string storage_dir,
                               log_level round_level = log_level::info);

} // namespace fedcaf
