#pragma once
// A relay's download of its parent's model as its children see it, without
// CAF: which bytes have arrived while the relay's own download goes on, and
// the children's fetches that wait for bytes still on their way. The relay
// serves a chunk the moment its bytes are in, so the model streams down the
// tree pipelined instead of store and forward. The server keeps each
// waiting fetch's response promise under the ticket this hands out; see
// docs/design.md, "Trees of aggregators".
// Thread-safety: none; owned by the server actor.

#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

namespace fedcaf {

class relay_download {
public:
  /// A model of `size` bytes comes: with `arriving`, byte by byte as
  /// arrived() says; else whole, all in now. Fetches still waiting on the
  /// previous one must have been taken (abandon()).
  void start(uint64_t size, bool arriving);

  /// True iff every byte is in (so: no fetch waits).
  bool complete() const { return !abandoned_ && in_ == size_; }

  /// True iff the download ended short of the model (abandon()): its
  /// missing bytes never come.
  bool abandoned() const { return abandoned_; }

  /// True iff bytes [offset, offset + bytes) are in, or will never be
  /// (abandoned: a fetch waits no more, it gets what is there).
  bool has(uint64_t offset, uint64_t bytes) const;

  /// Bytes [offset, offset + bytes) arrived (again is harmless; past the
  /// model's end ignored). Returns the tickets of the fetches whose bytes
  /// are all in now, in the order they came.
  std::vector<uint64_t> arrived(uint64_t offset, uint64_t bytes);

  /// A fetch waits for bytes [offset, offset + bytes). Returns its ticket.
  /// REQUIRES: !has(offset, bytes).
  uint64_t wait(uint64_t offset, uint64_t bytes);

  /// The bytes in from the model's start, without a gap.
  uint64_t prefix() const {
    auto it = ranges_.find(0);
    return it == ranges_.end() ? 0 : it->second;
  }

  /// How many fetches wait.
  size_t waiting() const { return waiting_.size(); }

  /// The download ends short of the model: returns every waiting ticket;
  /// from now on nothing waits (has() holds).
  std::vector<uint64_t> abandon();

private:
  struct range {
    uint64_t offset;
    uint64_t bytes;
  };
  uint64_t size_ = 0;
  uint64_t in_ = 0;                     ///< bytes arrived, counted once
  std::map<uint64_t, uint64_t> ranges_; ///< arrived: begin -> end, disjoint
  std::map<uint64_t, range> waiting_;   ///< by ticket
  uint64_t next_ticket_ = 1;
  bool abandoned_ = false;
};

} // namespace fedcaf
