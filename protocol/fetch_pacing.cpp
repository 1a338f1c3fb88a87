#include "protocol/fetch_pacing.hpp"

#include <algorithm>

namespace fedcaf {

void fetch_pacing::start(uint64_t chunks, const std::set<std::string>& children,
                         time_point now, uint64_t hold_gap,
                         std::optional<time_point> deadline) {
  chunks_ = chunks;
  hold_gap_ = hold_gap;
  deadline_ = deadline;
  lows_.clear();
  lows_.emplace_back(now, 0);
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
    bool silent = c.prefix == low && low < chunks_ && now - c.last > idle;
    if (idle.count() > 0 && silent) {
      c.paced = false;
      if (dropped)
        dropped->push_back(id);
    }
  }
  judge_rate(low, furthest, now, idle, dropped);
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

void fetch_pacing::judge_rate(uint64_t low, uint64_t furthest, time_point now,
                              std::chrono::milliseconds idle,
                              std::vector<std::string>* dropped) {
  // The low over time, from the round's start: the last sample at or
  // before an idle timeout ago, and every one since.
  if (lows_.empty() || lows_.back().second != low)
    lows_.emplace_back(now, low);
  while (lows_.size() > 1 && lows_[1].first <= now - idle)
    lows_.pop_front();
  bool held = hold_gap_ > 0 && idle.count() > 0 && low < chunks_ &&
              furthest >= low + hold_gap_;
  if (!held || lows_.front().first > now - idle)
    return; // nobody waits a cache ahead, or the round is younger than idle
  // How far the low must have moved in the last idle timeout: a cache, or
  // the pace that finishes the model by the deadline.
  auto moved = low - lows_.front().second;
  auto left = chunks_ - low;
  auto needed = hold_gap_;
  if (deadline_ && now < *deadline_) {
    auto per_idle =
        static_cast<double>(left) * static_cast<double>(idle.count()) /
        static_cast<double>(
            std::chrono::duration_cast<std::chrono::milliseconds>(*deadline_ -
                                                                  now)
                .count() +
            1);
    needed = std::max<uint64_t>(needed, static_cast<uint64_t>(per_idle) + 1);
  }
  if (moved >= std::min(needed, left))
    return;
  for (auto& [id, c] : children_)
    if (c.paced && c.prefix < low + hold_gap_) {
      c.paced = false;
      if (dropped)
        dropped->push_back(id);
    }
  lows_.clear(); // the next low is judged afresh, from now
  lows_.emplace_back(now, low);
}

} // namespace fedcaf
