#pragma once
// A window-mode relay's fetches from its parent on its children's behalf,
// without CAF: a child's fetch of a chunk gone from the relay's cache makes
// the relay fetch it again from its parent (counted only then: a chunk
// held, or asked for already, costs the parent nothing). Per round, each child may cost
// that at most `per_child` chunks (one model: a child let go for holding
// its siblings back refetches what it still needs once), and all children
// together at most `total` (two models): whatever its children do, the
// relay takes at most 3 x the model from its parent a round (its download
// and two models of refetches). A fetch past either is refused.
// See docs/design.md, "Trees of aggregators".
// Thread-safety: none; owned by the server actor's relay_flow.

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "fedcaf/error.hpp"

namespace fedcaf {

class refetch_budget {
public:
  /// A round of a model of `chunks` chunks starts: every count is zero.
  void start(uint64_t chunks) {
    chunks_ = chunks;
    total_ = 0;
    per_child_.clear();
  }

  /// Child `id` fetches a chunk gone from the cache: returns nullopt iff it
  /// may (counted), else the refusal (too_many_requests), counting nothing.
  std::optional<error> take(const std::string& id);

  /// Chunks fetched again this round, all children together.
  uint64_t total() const { return total_; }

private:
  uint64_t chunks_ = 0;
  uint64_t total_ = 0;
  std::map<std::string, uint64_t> per_child_;
};

} // namespace fedcaf
