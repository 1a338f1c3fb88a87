#include "protocol/fetch_pacing.hpp"

#include <algorithm>

namespace fedcaf {

void fetch_pacing::start(uint64_t chunks, const std::set<std::string>& children,
                         time_point now) {
  chunks_ = chunks;
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
  c.last = now;
  if (seq < c.prefix)
    return; // fetched again (a resumed download)
  c.above.insert(seq);
  while (!c.above.empty() && *c.above.begin() == c.prefix) {
    c.above.erase(c.above.begin());
    ++c.prefix;
  }
}

uint64_t fetch_pacing::low(time_point now, std::chrono::milliseconds idle,
                           std::vector<std::string>* dropped) {
  uint64_t low = chunks_;
  for (auto& [id, c] : children_) {
    if (!c.paced || c.prefix >= chunks_)
      continue;
    if (idle.count() > 0 && now - c.last > idle) {
      c.paced = false;
      if (dropped)
        dropped->push_back(id);
      continue;
    }
    low = std::min(low, c.prefix);
  }
  return low;
}

} // namespace fedcaf
