#pragma once
// A round's transfer progress per direction, for the console's progress
// line: down is the model going to clients, up the updates coming back (on
// the server and on a client alike). The actors count bytes as they move; a
// console thread reads and renders. Thread-safety: atomics only; any thread.

#include <atomic>
#include <cstdint>
#include <string>

namespace fedcaf {

class transfer_progress {
public:
  struct direction {
    uint64_t done = 0;     ///< bytes moved this round
    uint64_t expected = 0; ///< bytes this round moves (0: none announced)
    double first_s = 0;    ///< monotonic time of its first bytes (0: none)
  };
  struct snapshot {
    uint32_t round = 0;
    direction down, up;
  };

  /// Round `round` starts: counts restart from 0, expecting these bytes.
  void round_started(uint32_t round, uint64_t expect_down, uint64_t expect_up);
  /// More bytes expected this round (a task given under AsyncScheduler).
  void expect(uint64_t down, uint64_t up);
  void moved_down(uint64_t bytes);
  void moved_up(uint64_t bytes);
  snapshot read() const;

  /// Seconds on the monotonic clock the snapshot's times use.
  static double now();

private:
  struct counters {
    std::atomic<uint64_t> done{0};
    std::atomic<uint64_t> expected{0};
    std::atomic<double> first_s{0};
  };
  static void moved(counters& c, uint64_t bytes);

  std::atomic<uint32_t> round_{0};
  counters down_, up_;
};

/// How long a direction moves before the console line shows it, unless
/// FEDCAF_PROGRESS_AFTER_S says otherwise.
inline constexpr double default_shown_after_s = 1.0;

/// The console line for `s` at time `now`: per direction that is moving,
/// "down 412.0 MiB / 1.00 GiB, 231.4 MiB/s,
/// ETA 3 s" (a finished one: "down done"); empty when no
/// direction has been moving for `after_s` seconds (a short transfer shows
/// nothing) or every one is complete.
std::string transfer_line(const transfer_progress::snapshot& s, double now,
                          double after_s = default_shown_after_s);

/// "512 B", "3.0 KiB", "412.0 MiB", "1.00 GiB".
std::string human_bytes(double bytes);

} // namespace fedcaf
