#pragma once
// How the aggregator ends a round: the accumulator finalized (SecAgg+'s
// ring sum unmasked first, with the plan the server answers; the model
// kept where that fails), the result published as the next global model
// (a relay's sum scaled to its round's weight first), and a checkpoint of
// the model and the server optimizer's state written when asked.
// Thread-safety: none; part of the aggregator actor
// (actors/aggregator_core.hpp).

#include <cstdint>
#include <functional>
#include <string>

#include <caf/all.hpp>

#include "actors/aggregator_core.hpp"

namespace fedcaf {

class aggregator_rounds {
public:
  /// `forget` forgets the round's uploads (and what they wait for) as its
  /// result is published; `held_in_part` says whether the model is a
  /// window-mode relay's (its sums went up: not measured once published).
  aggregator_rounds(aggregator_core& core, std::function<void()> forget,
                    std::function<bool()> held_in_part);

  /// The scheduler's `(finalize_atom, round, sum_weight)`: publishes round
  /// `round`'s model (a relay's sum in ram mode: scaled to `sum_weight` at
  /// every position); under SecAgg+ once the server's unmask plan came.
  /// Fails iff a stream is still open or the accumulator cannot finish.
  caf::result<snapshot_ptr> finalize(uint32_t round, double sum_weight);

  /// Writes the checkpoint `state` describes (its round just published):
  /// the global model and the server optimizer's state with it. Returns
  /// "" or why it could not be written.
  std::string checkpoint(checkpoint_state state);

private:
  /// Finalizes the accumulator's round and publishes it.
  result<snapshot_ptr> publish_round(uint32_t round, double sum_weight);
  /// Publishes `bytes` as round `round`'s model; the round's uploads are
  /// forgotten. A relay's sum (ram mode) with positions summed over
  /// another weight than `sum_weight` (its offer's upstream) is scaled to
  /// it in place first, before anyone else holds it (0: a mean, or a sum
  /// scaled as it settled). `failure`: non-empty iff the round failed and
  /// `bytes` are the model it started from. `measured`: its norm was
  /// measured as it was made (measure_begin, measure_position).
  /// `grid`: a relay's int32 sums on its parent's grid (not measured).
  snapshot_ptr publish(uint32_t round, byte_buffer bytes, double sum_weight,
                       std::string failure = {}, bool measured = false,
                       bool grid = false);
  /// Removes the masks `plan` names from the ring sum and turns it into
  /// the round's mean (see accumulator::unmask).
  result<void> unmask(const secagg::unmask_plan& plan);
  /// Secure aggregation failed to unmask round `round` (`why`): publishes
  /// the model unchanged (one client's garbage must not end everyone's
  /// run); in window and disk modes each position's old bytes come back
  /// from the file they were kept in. Fails iff they could not be kept.
  result<snapshot_ptr> skip(uint32_t round, const std::string& why);

  aggregator_core& core_;
  std::function<void()> forget_;
  std::function<bool()> held_in_part_;
};

} // namespace fedcaf
