#pragma once
// A window-mode relay's upstream client's fetches made again, without CAF:
// model bytes of the round its trainer asks for again
// (relay_hooks::on_refetch) are fetched chunk by chunk, within the
// server's fetch window and only once the round's own download is done;
// a parent chunk that covers several positions is fetched once (the
// requests for one in flight wait for its answer, and the last answer
// serves the requests for it that come next); what was in flight on a
// connection lost is asked again on the next; the bytes go to the trainer
// once every chunk of a request came (nothing: one was refused, or the
// round is over). The client actor sends what next() gives and passes the
// answers back; see docs/design.md, "Trees of aggregators".
// Thread-safety: none; owned by the client actor.

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "fedcaf/error.hpp"
#include "messages/codec.hpp"

namespace fedcaf {

class refetch_queue {
public:
  /// Copies the bytes of `reply` (the answer to the fetch of chunk `seq`)
  /// that lie in [offset, + out.size()) to `out` (client_round::refetched);
  /// an error iff the server refused it or it does not decode.
  using reader =
      std::function<result<void>(uint64_t seq, const msg::frame& reply,
                                 uint64_t offset, std::span<std::byte> out)>;
  /// Hands the trainer model bytes at `offset` fetched again; empty: they
  /// could not be.
  using giver =
      std::function<void(uint64_t offset, std::span<const std::byte> bytes)>;

  /// One fetch to send: chunk `seq`'s frame, on connection `epoch`.
  struct outgoing {
    uint64_t seq = 0;
    msg::frame frame;
    uint32_t round = 0;
    uint64_t epoch = 0;
  };

  /// Logs as client `who`.
  refetch_queue(std::string who, reader read, giver give);

  /// Round `round`'s model bytes [offset, + bytes) are asked for again, as
  /// the chunk fetches `fetches` (client_round::refetch_requests).
  void ask(uint32_t round, uint64_t offset, uint64_t bytes,
           std::vector<std::pair<uint64_t, msg::frame>> fetches);
  /// The fetches to send now for round `round` (the open round's number),
  /// keeping at most `window` in flight; requests of other rounds are
  /// dropped, and those the last answer covers served at once.
  std::vector<outgoing> next(uint32_t round, uint32_t window);
  /// `sent`'s answer `reply` came (the open round now `round`); ignored if
  /// its connection is gone (asked again on the next).
  void answered(const outgoing& sent, msg::frame reply, uint32_t round);
  /// `sent` failed (its connection went): asked again.
  void failed(const outgoing& sent);
  /// The connection went: what was in flight on it is asked again on the
  /// next (what its gateway still answers is not taken).
  void lost();

private:
  /// One request's bytes, as its chunks come.
  struct part {
    std::vector<std::byte> bytes;
    size_t left = 0;
    bool failed = false;
    uint32_t round = 0;
  };
  /// One fetch of a request: the chunk, its frame, the request's offset.
  struct request {
    uint64_t seq;
    msg::frame frame;
    uint64_t offset;
    std::shared_ptr<part> of;
  };
  /// The last answer: the chunk it carried, of which round.
  struct answer {
    uint32_t round;
    uint64_t seq;
    msg::frame reply;
  };

  /// `reply` answers request `r` (the open round `round`).
  void took(const request& r, const msg::frame& reply, uint32_t round);

  std::string who_;
  reader read_;
  giver give_;
  std::deque<request> queue_; ///< not sent yet
  /// Per parent chunk in flight, the requests that wait for it.
  std::map<uint64_t, std::vector<request>> waiting_;
  std::optional<answer> last_;
  uint32_t in_flight_ = 0;
  uint64_t epoch_ = 0; ///< connections lost so far
};

} // namespace fedcaf
