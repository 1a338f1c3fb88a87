#include "protocol/absences.hpp"

#include <algorithm>

namespace fedcaf {

uint32_t absences::missed(const std::string& id, uint32_t r) {
  auto& rec = records_[id];
  rec.misses = std::min<uint32_t>(rec.misses + 1, 32);
  rec.last_round = r;
  rec.heard = false;
  return rec.misses;
}

void absences::heard_from(const std::string& id) {
  if (auto it = records_.find(id); it != records_.end())
    it->second.heard = true;
}

bool absences::eligible(const std::string& id, uint32_t r) const {
  auto it = records_.find(id);
  if (it == records_.end())
    return true;
  const auto& rec = it->second;
  return rec.heard && uint64_t{r} > uint64_t{rec.last_round} +
                                        rounds_passed_over(rec.misses);
}

uint32_t absences::misses(const std::string& id) const {
  auto it = records_.find(id);
  return it == records_.end() ? 0 : it->second.misses;
}

uint32_t absences::rounds_passed_over(uint32_t misses) {
  if (misses == 0)
    return 0;
  if (misses > 7)
    return max_rounds_passed_over;
  return std::min(uint32_t{1} << (misses - 1), max_rounds_passed_over);
}

std::string passed_over_line(uint32_t misses) {
  auto n = absences::rounds_passed_over(misses);
  return std::to_string(misses) + (misses == 1 ? " round" : " rounds") +
         " missed in a row: not chosen again until it is heard from "
         "(registers again or offers), then after " +
         std::to_string(n) + (n == 1 ? " round" : " rounds");
}

std::string passed_over_note(uint32_t round, const std::string& id,
                             uint32_t misses) {
  return "round " + std::to_string(round) +
         ": the deadline passed without an update from " + id + " (" +
         passed_over_line(misses) + ")";
}

} // namespace fedcaf
