#include "protocol/range_tracer.hpp"

#include <algorithm>
#include <vector>

namespace fedcaf {

range_tracer::range_tracer(uint64_t seed) : draw_(seed) {}

std::set<std::string>
range_tracer::hold_out(const std::set<std::string>& members, size_t least) {
  if (!named_.empty())
    return members.count(named_) && members.size() > least
               ? std::set<std::string>{named_}
               : std::set<std::string>{};
  std::vector<std::string> candidates;
  for (const auto& id : members)
    if (suspects_.count(id))
      candidates.push_back(id);
  if (candidates.empty() || members.size() <= least)
    return {};
  std::shuffle(candidates.begin(), candidates.end(), draw_);
  std::stable_partition(
      candidates.begin(), candidates.end(),
      [this](const std::string& id) { return !cleared_.count(id); });
  auto room = members.size() - least;
  auto half = std::max<size_t>(candidates.size() / 2, 1);
  // The only suspect, cleared already, would have been named.
  candidates.resize(std::min({candidates.size(), half, room}));
  return {candidates.begin(), candidates.end()};
}

std::optional<range_tracer::traced>
range_tracer::record(uint32_t round, const std::set<std::string>& in_sum,
                     const std::set<std::string>& held, bool in_range) {
  if (!named_.empty()) {
    if (in_range || in_sum.count(named_))
      return std::nullopt; // as named, or it could not be held out
    named_.clear(); // another uploads out of range: it may have been framed
  }
  if (in_range) {
    for (const auto& id : held)
      if (suspects_.count(id))
        cleared_.insert(id);
  } else {
    std::set<std::string> both;
    for (const auto& id : suspects_)
      if (in_sum.count(id))
        both.insert(id);
    if (!tracing() || both.empty()) { // a new trace, or more than one liar
      suspects_ = in_sum;
      cleared_.clear();
      failed_ = 0;
      first_ = round;
    } else {
      suspects_ = std::move(both);
      std::erase_if(cleared_,
                    [this](const auto& id) { return !suspects_.count(id); });
    }
    ++failed_;
  }
  if (suspects_.size() != 1 || !cleared_.count(*suspects_.begin()))
    return std::nullopt;
  traced out{*suspects_.begin(),
             "uploaded a masked update out of range: the unmasked sums of " +
                 std::to_string(failed_) + " rounds since round " +
                 std::to_string(first_) +
                 " failed with it in the sum (each other suspect held out of "
                 "one of them), and a sum without it was in range"};
  named_ = out.id;
  suspects_.clear();
  cleared_.clear();
  failed_ = 0;
  return out;
}

} // namespace fedcaf
