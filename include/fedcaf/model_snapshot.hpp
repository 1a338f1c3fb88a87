#pragma once
// One published version of the global model: manifest plus bytes in manifest
// order. Immutable once published; shared read-only (std::shared_ptr<const>)
// by every download stream, so no per-client copy of the model exists.

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "fedcaf/byte_buffer.hpp"
#include "fedcaf/chunk_plan.hpp"
#include "fedcaf/manifest.hpp"

namespace fedcaf {

class relay_residency;

struct model_snapshot {
  manifest layout;
  uint64_t version = 0; ///< 0 for the initial model, then one per round
  uint32_t round = 0;   ///< the round that produced it
  byte_buffer bytes;    ///< layout.total_bytes() bytes
  /// Robust rules: per client, its values the round dropped as extreme.
  std::vector<std::pair<std::string, uint64_t>> trimmed_values;
  /// Non-empty iff the round that produced it failed (secure aggregation
  /// could not unmask): the model is the one the round started from.
  std::string failure;
  /// A relay's round (aggregation_plan::partial_sums): `bytes` hold each
  /// position's weighted sum, and this the weight summed there.
  std::vector<double> position_weights;
  /// A window-mode relay's model of the round: which of its bytes are
  /// resident (relay_residency); null for every other model.
  std::shared_ptr<relay_residency> residency;

  const_model_view view() const {
    return split_contiguous(layout, bytes.bytes());
  }
};

using snapshot_ptr = std::shared_ptr<const model_snapshot>;

} // namespace fedcaf
