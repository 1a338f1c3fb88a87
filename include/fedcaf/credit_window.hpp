#pragma once
// Flow-control bookkeeping for one stream on the sending side: at most
// `window` chunks unacknowledged; a credit comes back per consumed chunk.
// Thread-safety: none; owned by one actor.

#include <cstdint>

#include "fedcaf/error.hpp"

namespace fedcaf {

class credit_window {
public:
  /// A stream of `total` chunks, at most `window` of them unacknowledged.
  /// REQUIRES: window > 0.
  credit_window(uint64_t total, uint32_t window)
      : total_(total), window_(window) {}

  /// Returns true iff another chunk may be sent now.
  bool can_send() const { return next_ < total_ && in_flight() < window_; }

  /// Returns the sequence number of the next chunk to send and counts it in
  /// flight. REQUIRES: can_send().
  uint64_t take();

  /// Records the credit for chunk `seq`. Credits arrive in order; returns an
  /// error iff `seq` is not the oldest chunk in flight.
  result<void> ack(uint64_t seq);

  /// After a lost connection: the chunks in flight are sent again.
  void rewind() { next_ = acked_; }

  /// After a resumed upload: chunks below `first_unacknowledged` are
  /// acknowledged, those up to `next` are in flight, and sending goes on at
  /// `next`. REQUIRES: first_unacknowledged <= next <= total.
  void resume(uint64_t first_unacknowledged, uint64_t next) {
    acked_ = first_unacknowledged;
    next_ = next;
  }

  /// Returns true iff every chunk has been acknowledged.
  bool complete() const { return acked_ == total_; }

  uint32_t in_flight() const { return static_cast<uint32_t>(next_ - acked_); }
  uint32_t peak_in_flight() const { return peak_; }
  uint64_t acked() const { return acked_; }
  uint64_t next() const { return next_; }
  uint64_t total() const { return total_; }

private:
  uint64_t total_;
  uint32_t window_;
  uint64_t next_ = 0;
  uint64_t acked_ = 0;
  uint32_t peak_ = 0;
};

} // namespace fedcaf
