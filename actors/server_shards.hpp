#pragma once
// The server's part for sharded clients: shard_hub (protocol/) with what it
// needs of the actor: the ranks' requests it holds (offers until every rank
// offered, chunks until the chunk of the whole model they lie in is
// credited, ends until every rank ended), and the requests it makes of the
// scheduler and the aggregator for the logical client, whose answers it
// hands out to the ranks. Each of the server's handlers for a rank's frame
// is one call here.
// Thread-safety: none; part of the server actor (actors/server_core.hpp).

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <caf/all.hpp>

#include "actors/server_core.hpp"
#include "protocol/shard_hub.hpp"

namespace fedcaf {

class server_shards {
public:
  using promise = caf::typed_response_promise<frame>;

  /// The sharded clients of `core`'s run.
  explicit server_shards(server_core& core);

  /// Returns the refusal of sharded Hello `h` iff it may not register: a
  /// run whose features need the whole model in one process, a rank count
  /// or slices that do not fit (shard_hub::check_hello).
  std::optional<error> refusal(const msg::hello& h) const;
  /// Rank `h` registered (or came back); returns true iff its client now
  /// has every rank for the first time: it joins the scheduler.
  bool registered(const msg::hello& h) { return hub_.registered(h); }
  /// Rank `rank` of `id` was dropped; returns true iff its client leaves
  /// the scheduler (its other ranks' requests that wait are answered).
  bool dropped(const std::string& id, uint32_t rank);
  /// The client and rank of the connection registered as `key` iff it is
  /// a rank of a sharded client.
  std::optional<std::pair<std::string, uint32_t>>
  rank_of(const std::string& key) const;
  /// The plan of the shard of connection `key` iff it is a rank, else
  /// null.
  std::shared_ptr<const chunk_plan> plan_for(const std::string& key) const {
    auto r = rank_of(key);
    return r ? hub_.plan_of(r->first, r->second) : nullptr;
  }
  /// The plan of a rank's shard (null: none).
  std::shared_ptr<const chunk_plan> plan_of(const std::string& id,
                                            uint32_t rank) const {
    return hub_.plan_of(id, rank);
  }

  /// Rank `rank` of `id`'s offer frame `f`, refused with what `refusal`
  /// says of it (the checks of any client's offer), if anything.
  caf::result<frame>
  offer(const std::string& id, uint32_t rank, const frame& f,
        const std::function<std::optional<frame>(const msg::offer&)>& refusal);
  /// A rank's chunk, end and credit request.
  caf::result<frame> chunk(const std::string& id, uint32_t rank,
                           const frame& f);
  caf::result<frame> end(const std::string& id, uint32_t rank, const frame& f);
  caf::result<frame> credit(const std::string& id, uint32_t rank,
                            const frame& f);

  /// Round `round` is over: offers still waiting are answered.
  void round_over(uint32_t round);
  /// `id`'s update was rejected (`why`): its upload is forgotten and what
  /// its ranks wait for answered.
  void rejected(const std::string& id, const error& why) {
    if (!hub_.sharded(id))
      return;
    hub_.forget(id);
    flush(id, error{errc::unknown_stream,
                    "the client's update was refused: " + why.message});
  }
  /// The uploads of `ids` are collected again.
  void collect_again(const std::vector<std::string>& ids);

private:
  using piece_key = std::tuple<std::string, uint32_t, uint64_t>;

  /// Sends `up` (chunks of the whole model) of `id` to the aggregator.
  void send_up(const std::string& id, std::vector<shard_hub::up_chunk> up);
  /// The answer to `id`'s offer of upload `g`, handed to its ranks.
  void answer_offers(const std::string& id, uint64_t g, const frame& answer);
  /// Answers the chunks and ends of client `id` (empty: every client)
  /// that wait with `why`.
  void flush(const std::string& id, const error& why);
  void answer_pieces(const std::string& id,
                     std::vector<std::pair<rank_piece, frame>> answers);

  server_core& core_;
  shard_hub hub_;
  std::map<std::pair<std::string, uint32_t>, promise> offers_;
  std::map<piece_key, promise> pieces_;
  std::map<std::pair<std::string, uint32_t>, promise> ends_;
};

} // namespace fedcaf
