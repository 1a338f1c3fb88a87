#pragma once
// Log lines of refusals paced per source (a peer's host), so that a flood of
// junk connections or frames cannot fill the disk with log: a source's first
// `lines` refusals within `period` are logged (and answered), the rest only
// counted, and once the period is over one line sums them up ("N more
// refused from A in the last M s"). Sources past max_sources at once share
// one entry ("other sources"), so that rotating addresses buys nothing.
// Reads no clock: the caller passes its time. Memory: at most max_sources
// entries of fixed size plus their names.
// Thread-safety: note() may be called from any thread (one mutex): the
// server's gateways share one pacer.

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace fedcaf {

class log_pacer {
public:
  using time_point = std::chrono::steady_clock::time_point;

  struct limits {
    uint32_t lines = 10; ///< refusals logged per source and period
    std::chrono::seconds period{10};
    size_t max_sources = 1024;
  };

  /// What to do with one refusal.
  struct verdict {
    bool log = true; ///< log (and answer) this one
    /// Summaries of periods that ended with refusals only counted.
    std::vector<std::string> summaries;
  };

  explicit log_pacer(limits l) : limits_(l) {}
  log_pacer() : log_pacer(limits{}) {}

  /// Counts a refusal of a peer of host `source` at `now`.
  verdict note(const std::string& source, time_point now);

  /// The summaries of periods over by `now` whose refusals were counted
  /// only (a flood that stopped: no refusal of its source comes to carry
  /// them); the caller logs them. Call it every period.
  std::vector<std::string> flush(time_point now);

  /// Sources remembered (at most max_sources + 1).
  size_t sources() const;

private:
  struct entry {
    time_point started{};
    uint32_t events = 0;
    uint64_t counted = 0; ///< refused and not logged this period
  };
  std::string summary(const std::string& source, const entry& e,
                      time_point now) const;
  void sweep(time_point now, std::vector<std::string>& summaries);

  limits limits_;
  mutable std::mutex mutex_;
  std::unordered_map<std::string, entry> sources_;
  time_point swept_{};
};

} // namespace fedcaf
