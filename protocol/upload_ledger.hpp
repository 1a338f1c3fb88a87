#pragma once
// The aggregator's book of a round's upload streams, without CAF: who opened
// which stream, with what weight, how far it got, the credits the window
// holds for it, when it last made progress, and how it ended (closed,
// rejected, abandoned). It never reads a clock: callers pass the time. The
// aggregator actor keeps what needs CAF (the listeners it tells, the
// response promises of held credits) and asks the ledger the rest.
//
// Per stream: open -(its own client's chunks, in sequence)-> closed |
// rejected. A closed stream is kept until the round is forgotten, so that a
// repeated end or offer is answered.
// Thread-safety: none; owned by the aggregator actor.

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fedcaf/error.hpp"
#include "messages/codec.hpp"
#include "protocol/send_rate.hpp"

namespace fedcaf {

/// One open upload: who sends it, with what weight, and where it stands.
struct upload_record {
  using time_point = std::chrono::steady_clock::time_point;

  std::string client_id;
  uint32_t round = 0;
  double weight = 0;
  uint64_t next_sequence = 0;
  uint64_t bytes = 0;
  bool closed = false;         ///< kept until forgotten: a repeated end is
                               ///< answered
  bool rejected = false;       ///< poisoned, too far, or silent: refused
  double distance_squared = 0; ///< from the global model, so far
  /// The last chunk that arrived or credit that went out: the stream could
  /// send from then on.
  time_point last_progress{};
  uint32_t held = 0; ///< its credits held by the window
  /// norm_bound: ||x - g|| as its offer declared it, and the factor its
  /// update is scaled by (x' = g + scale (x - g)).
  double declared_norm = 0;
  double scale = 1;
  /// A relay's partial sum (weight = the weights summed in it): folded
  /// as it is.
  bool summed = false;
  /// Its sums come as int32 on the exact grid (Offer.gridSums).
  bool grid = false;
  /// The offer's updateId: a repeated offer with another one is another
  /// update (0: not told).
  uint64_t update_id = 0;
  /// Its bytes over the time it could send (the window's waits left out).
  send_rate rate;
};

class upload_ledger {
public:
  using time_point = upload_record::time_point;
  using duration = std::chrono::steady_clock::duration;

  /// A ledger for streams of `chunk_count` chunks each, with at most
  /// `window` credits per stream, whose rates look back over `rate_window`
  /// of the time each could send (zero: rates are not measured). Stream
  /// ids start at 1 (0 names downloads).
  upload_ledger(uint64_t chunk_count, uint32_t window,
                duration rate_window = {})
      : chunk_count_(chunk_count), window_(window), rate_window_(rate_window) {}

  /// Opens a stream for `client_id`'s update to `round`, whose progress
  /// counts from `now`; returns its id, never used before by this ledger.
  uint64_t open(std::string client_id, uint32_t round, double weight,
                double declared_norm, double scale, time_point now);

  /// Returns the id of `client_id`'s stream to `round` (open or not) iff
  /// there is one.
  std::optional<uint64_t> find(const std::string& client_id,
                               uint32_t round) const;

  /// Returns stream `stream_id` iff it exists and `sender` opened it; else
  /// unknown_stream or not_authorized, naming both. The pointer is valid
  /// until the ledger forgets the round.
  result<upload_record*> owned(const std::string& sender, uint64_t stream_id);

  /// Returns stream `stream_id`, or null.
  upload_record* find(uint64_t stream_id);

  /// Returns ok iff a chunk with header `h` is the next one of open stream
  /// `s`, of its round (unknown_stream, wrong_round, bad_sequence).
  static result<void> check_next(const upload_record& s,
                                 const msg::chunk_header& h);

  /// A chunk of `bytes` bytes and squared distance `distance_squared` was
  /// folded into the sum from stream `s` at `now`: the stream moves on.
  void folded(upload_record& s, uint64_t bytes, double distance_squared,
              time_point now);

  /// Returns ok iff stream `stream_id` (of `s`) is owed the credit of chunk
  /// `sequence`: it is open and sent that chunk (else unknown_stream).
  static result<void> owes_credit(const upload_record& s, uint64_t stream_id,
                                  uint64_t sequence);

  /// The window holds one more of `s`'s credits, from `now`.
  void hold(upload_record& s, time_point now) {
    ++s.held;
    sync_rate(s, now);
  }

  /// A credit the window held goes back to stream `stream_id` (if it is
  /// still known) at `now`: that is progress.
  void release(uint64_t stream_id, time_point now);

  /// Returns true iff open stream `s` is not waiting for the window: it
  /// holds a credit for its next chunk, or (every chunk sent) all its
  /// credits, so that its end may come.
  bool could_send(const upload_record& s) const;

  /// The streams, in id order, that could send but made no progress for
  /// more than `idle` up to `now`.
  std::vector<uint64_t> silent(time_point now, duration idle) const;

  /// The open streams, in id order, to reject at `now`, each with why:
  /// silent (could send, no progress for more than `idle`; zero: never)
  /// or slower than `min_bytes_per_s` over the rate window (see slow).
  std::vector<std::pair<uint64_t, error>> stalled(time_point now, duration idle,
                                                  double min_bytes_per_s) const;

  /// What the round deadline does to the streams of clients still
  /// uploading.
  struct overdue {
    std::vector<uint64_t> cut;               ///< to be ended
    std::vector<std::string> without_stream; ///< ids with no stream
  };

  /// The round deadline of `round` passed with `ids` still uploading. A
  /// stream that owes the chunk the accumulator waits for (its next chunk
  /// is at or below `settled`, the lowest open position; ram mode: every
  /// open stream) is cut; one that only waits for the window is spared (it
  /// waits for those cut).
  overdue past_deadline(uint32_t round, const std::vector<std::string>& ids,
                        uint64_t settled) const;

  /// The open streams, in id order, with their rate (bytes per second),
  /// that moved fewer than `min_bytes_per_s` over the last rate window of
  /// the time they could send, up to `now`. A stream that could send for
  /// less than the window so far is not judged yet.
  std::vector<std::pair<uint64_t, double>> slow(time_point now,
                                                double min_bytes_per_s) const;

  /// The rate window (zero: rates are not measured).
  duration rate_window() const { return rate_window_; }

  /// Where stream `s` stands for a client that offers again: its next
  /// chunk (the chunk count once closed).
  uint64_t next_chunk(const upload_record& s) const {
    return s.closed ? chunk_count_ : s.next_sequence;
  }

  /// Stream `s`'s whole update is refused: closed for good.
  static void reject(upload_record& s) { s.closed = s.rejected = true; }

  /// What an end of stream did.
  enum class ending { closed, repeated };

  /// Ends stream `stream_id` (of `s`), whose client declared
  /// `declared_chunks`. Returns `closed` iff it was open and every chunk of
  /// the plan arrived (then it is closed), `repeated` iff it was closed
  /// before (the answer was lost); an error (poisoned_update) iff it was
  /// rejected, (bad_sequence) iff chunks are missing.
  result<ending> end(upload_record& s, uint64_t stream_id,
                     uint64_t declared_chunks);

  /// Closes `client_id`'s open stream to `round` and returns the chunks it
  /// delivered; nothing iff it has none open.
  std::optional<uint64_t> abandon(const std::string& client_id, uint32_t round);

  /// The clients whose whole update is in the sum: closed, not rejected.
  std::vector<std::string> in_sum() const;

  /// How many streams are still open.
  uint64_t open_count() const;

  /// The updates folded this round: every stream but those rejected with
  /// nothing folded (cut-off ones count).
  uint64_t updates() const;

  /// `by_stream` (values per stream id) per client instead, in client
  /// order; unknown streams are left out.
  std::vector<std::pair<std::string, uint64_t>>
  by_client(const std::map<uint64_t, uint64_t>& by_stream) const;

  /// Forgets every stream of the round (ids are not reused).
  void forget() { streams_.clear(); }

private:
  /// Tells `s`'s rate meter whether it can send from `now` on.
  void sync_rate(upload_record& s, time_point now) const {
    s.rate.set_can_send(could_send(s), now);
  }

  uint64_t chunk_count_;
  uint32_t window_;
  duration rate_window_;
  std::map<uint64_t, upload_record> streams_;
  uint64_t next_stream_id_ = 1; // 0 names downloads
};

} // namespace fedcaf
