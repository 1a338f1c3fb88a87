#include "protocol/population.hpp"

#include <charconv>
#include <string_view>
#include <utility>

namespace fedcaf {

population::population(uint32_t first, uint32_t count, std::string prefix)
    : prefix_(std::move(prefix)), first_(first), count_(count) {
  // The numbers first+1 .. first+count in the order of their decimal
  // strings: a walk of 1 .. last in that order (1, 10, 100, ..., 101, ...,
  // 11, ...), keeping those in range.
  uint64_t lo = uint64_t{first} + 1;
  uint64_t last = lo + count - 1;
  order_.reserve(count);
  uint64_t n = 1;
  for (uint64_t seen = 0; count > 0 && seen < last; ++seen) {
    if (n >= lo)
      order_.push_back(static_cast<uint32_t>(n - lo));
    if (n * 10 <= last) {
      n *= 10;
      continue;
    }
    while (n % 10 == 9 || n + 1 > last)
      n /= 10;
    ++n;
  }
}

std::string population::id_of(uint32_t i) const {
  return prefix_ + std::to_string(uint64_t{first_} + i + 1);
}

std::optional<uint32_t> population::index_of(const std::string& id) const {
  std::string_view s{id};
  if (!s.starts_with(prefix_))
    return std::nullopt;
  s.remove_prefix(prefix_.size());
  if (s.empty() || s.front() == '0')
    return std::nullopt;
  uint64_t n = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
  if (ec != std::errc{} || end != s.data() + s.size() || n <= first_ ||
      n > uint64_t{first_} + count_)
    return std::nullopt;
  return static_cast<uint32_t>(n - first_ - 1);
}

} // namespace fedcaf
