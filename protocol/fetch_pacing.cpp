#include "protocol/fetch_pacing.hpp"

#include <algorithm>

namespace fedcaf {

void fetch_pacing::start(uint64_t chunks, const std::set<std::string>& children,
                         time_point now, uint64_t hold_gap) {
  chunks_ = chunks;
  hold_gap_ = hold_gap;
  last_low_ = 0;
  children_.clear();
  for (const auto& id : children)
    children_[id].last = now;
}

void fetch_pacing::fetched(const std::string& id, uint64_t seq,
                           time_point now) {
  auto it = children_.find(id);
  if (!active() || it == children_.end())
    return; // not one of the round's: it paces nobody
  auto& c = it->second;
  if (seq < c.prefix)
    return; // fetched again (a resumed download): no progress
  c.above.insert(seq);
  auto before = c.prefix;
  while (!c.above.empty() && *c.above.begin() == c.prefix) {
    c.above.erase(c.above.begin());
    ++c.prefix;
  }
  if (c.prefix > before) // only progress counts: a child that fetches
    c.last = now;        // one chunk again and again is silent
}

uint64_t fetch_pacing::low(time_point now, std::chrono::milliseconds idle,
                           std::vector<std::string>* dropped) {
  // Only a child that holds the others back (at the low) can be silent:
  // one ahead of it waits for the cache, and its clock starts again when
  // the low moves.
  auto at = [this] {
    uint64_t low = chunks_;
    for (const auto& [id, c] : children_)
      if (c.paced)
        low = std::min(low, c.prefix);
    return low;
  };
  auto low = at();
  uint64_t furthest = 0;
  for (const auto& [id, c] : children_)
    if (c.paced)
      furthest = std::max(furthest, c.prefix);
  for (auto& [id, c] : children_) {
    if (!c.paced)
      continue;
    // Holding back: from when, at the low, it is a cache or more behind the
    // furthest (who then waits for it) until it catches up with it or is
    // no longer the low: a drip of one chunk at a time does not end it.
    bool at_low = hold_gap_ > 0 && c.prefix == low && low < chunks_;
    if (!at_low || furthest <= low)
      c.holding.reset();
    else if (!c.holding && furthest >= low + hold_gap_)
      c.holding = now;
    bool holds = c.holding.has_value();
    bool silent = c.prefix == low && low < chunks_ && now - c.last > idle;
    bool held_back = holds && now - *c.holding > idle;
    if (idle.count() > 0 && (silent || held_back)) {
      c.paced = false;
      if (dropped)
        dropped->push_back(id);
    }
  }
  auto moved = at();
  if (moved > low)
    for (auto& [id, c] : children_)
      if (c.paced)
        c.last = std::max(c.last, now);
  if (moved > last_low_)
    for (auto& [id, c] : children_)
      if (c.paced && c.prefix > last_low_)
        c.last = std::max(c.last, now);
  last_low_ = std::max(last_low_, moved);
  return moved;
}

} // namespace fedcaf
