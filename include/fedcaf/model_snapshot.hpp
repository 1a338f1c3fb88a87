#pragma once
// One published version of the global model: manifest plus bytes in manifest
// order. Immutable once published; shared read-only (std::shared_ptr<const>)
// by every download stream, so no per-client copy of the model exists. The
// one writer after publication is the aggregator that made it: in window
// and disk modes it averages each position of the next round into the last
// model's bytes in place, and tells the server first, which serves those
// bytes no more (docs/design.md, "Memory").

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "fedcaf/byte_buffer.hpp"
#include "fedcaf/manifest.hpp"

namespace fedcaf {

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
  /// A relay's sum whose bytes are int32 sums on its parent's exact grid
  /// (float32 model; docs/design.md, "Exact sums"), not floats.
  bool grid_sums = false;

  const_model_view view() const {
    return split_contiguous(layout, bytes.bytes());
  }
};

using snapshot_ptr = std::shared_ptr<const model_snapshot>;

} // namespace fedcaf
