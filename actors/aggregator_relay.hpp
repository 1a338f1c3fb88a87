#pragma once
// A relay's part of the aggregator: relay_checks (protocol/) with what it
// needs of the actor: the parent's model adopted and measured as it
// arrives, in window mode the chunks that wait for g at their position
// (parked, answered through their response promises once g is fetched
// again) and the wake-ups of the relay's residency, and a streaming
// relay's positions scaled and told to its scheduler as they settle. On
// any other aggregator it holds nothing and asks nothing.
// Thread-safety: none; part of the aggregator actor
// (actors/aggregator_core.hpp).

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "actors/aggregator_core.hpp"
#include "protocol/relay_checks.hpp"

namespace fedcaf {

class aggregator_relay {
public:
  using promise = aggregator_core::promise;
  /// Takes a chunk again (a parked one, answered through `parked`).
  using consumer = std::function<caf::result<frame>(
      const std::string& sender, const frame& f, promise* parked)>;

  /// `consume` takes a parked chunk as if it came now; `advance` settles
  /// what may settle (the window waited for g, or for sums to go up).
  aggregator_relay(aggregator_core& core, consumer consume,
                   std::function<void()> advance);

  // -- the parent's model ------------------------------------------------------

  /// A relay: `m`, its parent's model for the next round, becomes the
  /// global model the children's updates are checked and summed against,
  /// as a new version (model_versions::adopt). Returns it, or an error iff
  /// it cannot be adopted.
  result<snapshot_ptr> adopt(relay_model m);
  /// Bytes [0, upto) of the model adopted as arriving are in (all: whole).
  void arrived(uint64_t upto);
  /// The refusal of client `id`'s offer iff nobody holds the model whole
  /// yet; nullopt: it opens (what arrived() has not measured is now).
  std::optional<error> refuse_offer(const std::string& id);
  /// An upload of round `round` opened, heard by `notify`.
  void opened(const upload_listener& notify, uint32_t round);

  // -- g held for the checks (window mode) -------------------------------------

  /// Chunk `h` of stream `s` (frame `f` from `sender`): returns the
  /// promise it is answered through iff it waits for g at its position.
  std::optional<promise> park(const std::string& sender, const frame& f,
                              const upload_record& s,
                              const msg::chunk_header& h);
  /// False iff the round is given up: no g to measure updates against.
  bool has_global() const { return checks_.has_global(); }
  /// Position `seq`'s g is resident again: the chunks that waited for it
  /// are taken, and the window moves on if it waited.
  void filled(uint64_t seq);
  /// Stream `sid` ended: its parked chunks are answered as later ones are.
  void unpark(uint64_t sid);
  /// Lets go of g where it is held, and of the chunks that waited for it.
  void forget_globals();
  /// True iff the relay's model is held in part (window mode): its sums
  /// went up and were given back, so the published sum is not measured.
  bool holds_in_part() const { return checks_.residency() != nullptr; }

  // -- settling ------------------------------------------------------------------

  /// True iff position `seq` may settle now (relay_checks::may_settle).
  bool may_settle(uint64_t seq) { return checks_.may_settle(seq); }
  /// Position `seq` settles now (its sum is written by the accumulator
  /// between these two).
  void settling(uint64_t seq) { checks_.settling(seq); }
  /// Position `seq` settled: g there is let go, and a streaming relay's
  /// sum there is scaled to the round's weight and told to its scheduler.
  void settled(uint64_t seq);

private:
  aggregator_core& core_;
  consumer consume_;
  std::function<void()> advance_;
  relay_checks checks_;
  parked_chunks<promise> parked_;
  /// A streaming relay: who hears its round's positions settle.
  upload_listener stream_listener_;
  /// ... and, where its sum goes up on the grid, which positions did.
  std::shared_ptr<grid_positions> positions_;
};

} // namespace fedcaf
