#pragma once
// How fast an upload stream moves bytes, counted over the time it could
// send only: time in which the server withheld its credits (the window
// waits for slower streams) is not the stream's fault and is left out, so
// a stream held back by the server never looks slow. It reads no clock:
// the caller passes the time with every event. Bytes count when a chunk
// arrives whole, so a window should span a few chunks at the minimum rate
// (see upload_ledger and the aggregator, which end a stream that stays
// below stream_configs.min_rate_bytes_per_s).
// Thread-safety: none; owned by one upload_record.

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>

namespace fedcaf {

class send_rate {
public:
  using time_point = std::chrono::steady_clock::time_point;
  using duration = std::chrono::steady_clock::duration;

  /// A meter whose rate() looks back over `window` of sendable time (zero:
  /// it keeps one mark and rate() is never asked).
  explicit send_rate(duration window = {}) : window_(window) {}

  /// From `now` on, the stream can send iff `can_send`. The first call
  /// starts the meter.
  void set_can_send(bool can_send, time_point now);

  /// `bytes` more arrived at `now`.
  void moved(uint64_t bytes, time_point now);

  /// The time the stream could send, up to `now`.
  duration sendable(time_point now) const;

  /// The bytes per second that arrived over the last `window` of the time
  /// the stream could send, up to `now`; nothing iff it could send for
  /// less than `window` so far (too early to judge) or the window is zero.
  std::optional<double> rate(time_point now) const;

  /// The look-back window.
  duration window() const { return window_; }

private:
  /// Bytes that had arrived when the stream had been able to send for `at`.
  struct mark {
    duration at;
    uint64_t total;
  };

  /// The total that had arrived after `at` of sendable time.
  uint64_t total_at(duration at) const;

  duration window_;
  std::deque<mark> marks_{mark{duration{}, 0}};
  duration sendable_{}; ///< up to since_
  time_point since_{};
  bool can_send_ = false;
  uint64_t total_ = 0;
};

} // namespace fedcaf
