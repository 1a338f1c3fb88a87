#pragma once
// A window-mode relay's upstream client's fetches made again
// (protocol/refetch_queue) as its client actor sends them: on the
// connection the client has, once the round's download is done and never
// while it registers again; each one answered once on its connection,
// whatever else happened meanwhile (no round's generation drops it).
// Thread-safety: none; part of the client actor (actors/client.cpp).

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "actors/interfaces.hpp"
#include "protocol/refetch_queue.hpp"

namespace fedcaf {

class client_refetch {
public:
  /// What the client is now: its connection, the open round's number
  /// and fetch window, whether fetches may go (the round downloaded, the
  /// client registered).
  struct now {
    server_link server;
    uint32_t round = 0;
    uint32_t window = 0;
    bool may_send = false;
  };

  /// As refetch_queue's; `state` tells what the client is at each send.
  client_refetch(client_actor::pointer* self, std::string who,
                 refetch_queue::reader read, refetch_queue::giver give,
                 std::function<now()> state);

  /// Round `round`'s model bytes [offset, + bytes) are asked again, as the
  /// chunk fetches `fetches`; sent as they may.
  void ask(uint32_t round, uint64_t offset, uint64_t bytes,
           std::vector<std::pair<uint64_t, msg::frame>> fetches);
  /// Sends what may go now.
  void send();
  /// The connection went: what was in flight is asked again on the next.
  void lost() { queue_.lost(); }

private:
  client_actor::pointer* self_;
  std::function<now()> state_;
  refetch_queue queue_;
};

} // namespace fedcaf
