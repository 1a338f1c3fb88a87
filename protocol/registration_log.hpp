#pragma once
// The server's registration lines, quiet at scale: the first `first`
// registrations are logged one line each ("registered Client7 from
// 10.0.0.5:41234"), the rest counted and summed up at most once a second
// ("registered 2,431 more clients in the last 1.0 s (2,441 in all; the
// last: Client2441 from ...)"), and what is still counted when the first
// round starts or the run ends (flush). 10,000 clients: 10 lines and a
// few sums instead of 10,000 lines. Reads no clock: the caller passes its
// time. Thread-safety: one owner.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace fedcaf {

class registration_log {
public:
  using time_point = std::chrono::steady_clock::time_point;

  explicit registration_log(uint32_t first = 10) : first_(first) {}

  /// Client `id` registered from `from` at `now`: the line to log, if any.
  std::optional<std::string> note(const std::string& id,
                                  const std::string& from, time_point now);

  /// The sum of what is counted and not yet logged, if any.
  std::optional<std::string> flush(time_point now);

  /// Registrations noted so far.
  uint64_t total() const { return total_; }

private:
  uint32_t first_;
  uint64_t total_ = 0;
  uint64_t pending_ = 0; ///< counted since the last line
  std::string last_;     ///< "<id> from <address>" of the last counted
  std::optional<time_point> since_; ///< of the last line logged
};

} // namespace fedcaf
