#include "protocol/refetch_budget.hpp"

namespace fedcaf {

std::optional<error> refetch_budget::take(const std::string& id) {
  auto per_child = chunks_;
  auto total = 2 * chunks_;
  auto& mine = per_child_[id];
  if (mine >= per_child)
    return error{errc::too_many_requests,
                 id + " fetched " + std::to_string(mine) +
                     " chunks gone from the relay's cache this round, the "
                     "model's count: the relay fetches no more again for it"};
  if (total_ >= total)
    return error{errc::too_many_requests,
                 "the relay fetched " + std::to_string(total_) +
                     " chunks again from its parent this round (two "
                     "models): no more for " +
                     id};
  ++mine;
  ++total_;
  return std::nullopt;
}

} // namespace fedcaf
