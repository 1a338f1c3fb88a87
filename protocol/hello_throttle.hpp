#pragma once
// Failed Hellos counted by host (the peer's address without its port), so
// that nobody can guess tokens online: past `failures` failed Hellos within
// `window`, a host's failing Hellos are refused as too_many_requests,
// unlogged, for a back-off that doubles
// with every burst (first_backoff .. max_backoff) and starts again from the
// first once a whole window passed without a failure. Other hosts are not
// affected: a guesser cannot lock an honest client out from elsewhere.
// Memory: one entry of fixed size (plus the host's name) per host, at most
// max_hosts of them; past that the least recently failed host is forgotten.
// Reads no clock: the server actor passes its time.
// Thread-safety: none; owned by the client registry (the server actor).

#include <chrono>
#include <cstdint>
#include <list>
#include <optional>
#include <string>
#include <unordered_map>

namespace fedcaf {

struct hello_throttle_limits {
  uint32_t failures = 5; ///< failed Hellos a host may have within `window`
  std::chrono::seconds window{60};
  std::chrono::milliseconds first_backoff{1000};
  std::chrono::milliseconds max_backoff{60000};
  size_t max_hosts = 4096; ///< hosts remembered at once
};

/// Returns the host of `address` ("host:port", "[v6]:port" or "v6:port"):
/// everything before its last ':'; `address` itself iff it has none.
std::string host_of(const std::string& address);

class hello_throttle {
public:
  using time_point = std::chrono::steady_clock::time_point;
  using milliseconds = std::chrono::milliseconds;

  explicit hello_throttle(hello_throttle_limits limits = {})
      : limits_(limits) {}

  /// Returns how long the Hellos of `host` are still refused at `now`
  /// (zero iff a Hello from it is heard), and counts a refused one.
  milliseconds backoff_left(const std::string& host, time_point now);

  /// What to log of a failed Hello: its own refusal iff it is its host's
  /// first after a quiet window; the one line of a burst iff it starts a
  /// back-off (the failures of the window and the Hellos refused unlogged
  /// during the last back-off, counted).
  struct verdict {
    bool log_refusal = true;
    std::optional<std::string> burst;
  };

  /// Counts a failed Hello (unknown id, wrong token, wrong certificate)
  /// from `host` at `now`; returns what to log of it.
  verdict failed(const std::string& host, time_point now);

  /// Returns the number of hosts remembered (at most max_hosts).
  size_t hosts() const { return hosts_.size(); }

  const hello_throttle_limits& limits() const { return limits_; }

private:
  struct entry {
    uint32_t failures = 0;      ///< within the window that started at `since`
    time_point since{};         ///< start of the current window
    time_point last_failure{};  ///< of the back-off's reset rule
    time_point blocked_until{}; ///< failing Hellos before it: unlogged
    milliseconds next_backoff{0};
    uint64_t refused = 0; ///< Hellos refused unlogged since the last line
    std::list<std::string>::iterator order;
  };

  /// Returns the entry of `host`, made (and the oldest forgotten) if need be.
  entry& touch(const std::string& host);

  hello_throttle_limits limits_;
  std::unordered_map<std::string, entry> hosts_;
  std::list<std::string> order_; ///< hosts, most recently failed first
};

} // namespace fedcaf
