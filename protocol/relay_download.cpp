#include "protocol/relay_download.hpp"

#include <algorithm>
#include <iterator>

namespace fedcaf {

void relay_download::start(uint64_t size, bool arriving) {
  size_ = size;
  in_ = arriving ? 0 : size;
  abandoned_ = false;
  ranges_.clear();
  if (!arriving && size > 0)
    ranges_[0] = size;
  waiting_.clear();
}

bool relay_download::has(uint64_t offset, uint64_t bytes) const {
  if (bytes == 0 || abandoned_)
    return true;
  auto after = ranges_.upper_bound(offset);
  if (after == ranges_.begin())
    return false;
  auto it = std::prev(after);
  return it->second >= offset + bytes;
}

std::vector<uint64_t> relay_download::arrived(uint64_t offset, uint64_t bytes) {
  if (abandoned_)
    return {};
  auto begin = std::min(offset, size_);
  auto end = begin + std::min(bytes, size_ - begin);
  if (end > begin) {
    // Merges [begin, end) with every range it touches, counting only the
    // bytes not in before.
    auto it = ranges_.upper_bound(begin);
    if (it != ranges_.begin() && std::prev(it)->second >= begin)
      --it;
    uint64_t covered = 0;
    auto lo = begin;
    auto hi = end;
    while (it != ranges_.end() && it->first <= end) {
      covered += std::min(it->second, end) - std::max(it->first, begin);
      lo = std::min(lo, it->first);
      hi = std::max(hi, it->second);
      it = ranges_.erase(it);
    }
    ranges_[lo] = hi;
    in_ += (end - begin) - covered;
  }
  std::vector<uint64_t> ready;
  for (auto w = waiting_.begin(); w != waiting_.end();)
    if (has(w->second.offset, w->second.bytes)) {
      ready.push_back(w->first);
      w = waiting_.erase(w);
    } else {
      ++w;
    }
  return ready;
}

uint64_t relay_download::wait(uint64_t offset, uint64_t bytes) {
  auto ticket = next_ticket_++;
  waiting_[ticket] = range{offset, bytes};
  return ticket;
}

std::vector<uint64_t> relay_download::abandon() {
  std::vector<uint64_t> tickets;
  for (const auto& [ticket, r] : waiting_)
    tickets.push_back(ticket);
  waiting_.clear();
  abandoned_ = true;
  return tickets;
}

} // namespace fedcaf
