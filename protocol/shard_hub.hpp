#pragma once
// The ranks of sharded clients, without CAF: one logical client of N ranks,
// each its own connection under the same client id, each moving only its
// shard (fedcaf/shard.hpp). The hub checks what a rank says (its Hello,
// offers, chunks, ends, credit requests) and joins the ranks' uploads into
// the one upload of the logical client that the scheduler and the
// aggregator know: one offer, once every rank offered; the whole model's
// chunks in order, each once every rank delivered its part of it; one end,
// once every rank ended. Behind the server, a sharded client is one
// client: one registration, one vote, one weight, its update checked as a
// whole.
//
// Per logical upload:
//   offering (rank offers wait) -(every rank offered, the same sample
//   count)-> forwarded -(accept)-> streaming (a rank's chunks are put in
//   their place; a chunk of the whole model goes up once complete, at most
//   `window` unanswered; a rank's chunk is credited when the chunk of the
//   model it lies in is) -(every rank ended)-> ending -(closed)-> closed
//   any -(refused, reset, round over)-> gone (the ranks are answered so)
//
// It never reads a clock, holds no CAF handle and sends nothing: the
// server's part (actors/server_shards) holds the promises and sends what
// the hub returns.
// Thread-safety: none; owned by the server actor.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "fedcaf/chunk_plan.hpp"
#include "fedcaf/error.hpp"
#include "fedcaf/manifest.hpp"
#include "fedcaf/shard.hpp"
#include "messages/codec.hpp"

namespace fedcaf {

/// One rank's piece of a logical upload, by rank and its own sequence.
struct rank_piece {
  uint32_t rank = 0;
  uint64_t sequence = 0;
  friend auto operator<=>(const rank_piece&, const rank_piece&) = default;
};

class shard_hub {
public:
  /// Ranks of models laid out as `layout`, cut into chunks of
  /// `chunk_bytes`; a client of more than `max_ranks` ranks is refused.
  shard_hub(manifest layout, uint64_t chunk_bytes,
            uint32_t max_ranks = max_shard_ranks);

  // -- registration ----------------------------------------------------------

  /// Returns ok iff sharded Hello `h` may register: at most max_ranks
  /// ranks; its rank count agrees with the ranks of its id registered
  /// (`present`: those not dropped); its slices are the model's, and no
  /// more than the model's bytes the ranks present do not hold (so no
  /// rank's plan is of more than its share); a rank present (resuming)
  /// holds what it held; and, where it completes the ranks, they cover
  /// the model exactly once. Else the refusal (manifest_mismatch, naming
  /// the tensor and rows; not_authorized for another rank count, too many
  /// ranks, other slices).
  result<void> check_hello(const msg::hello& h,
                           const std::set<uint32_t>& present) const;

  /// Rank `h.shard.rank` of `h.client_id` registered (or came back: its
  /// plan is kept). A client none of whose ranks was present starts over.
  /// Returns true iff its client now has every rank for the first time
  /// since it joined or was dropped: it joins the scheduler.
  bool registered(const msg::hello& h);

  /// Rank `rank` of `id` was dropped. Returns true iff its client had
  /// joined: it leaves the scheduler (its other ranks wait for it).
  bool dropped(const std::string& id, uint32_t rank);

  /// True iff `id` is a sharded client (one of its ranks registered).
  bool sharded(const std::string& id) const { return clients_.count(id) > 0; }

  /// The plan of rank `rank` of `id`'s shard, or null.
  std::shared_ptr<const chunk_plan> plan_of(const std::string& id,
                                            uint32_t rank) const;

  /// The plan of the whole model (what the aggregator sees).
  const chunk_plan& whole() const { return whole_; }

  // -- uploads ---------------------------------------------------------------

  /// What an offer of a rank comes to.
  struct offer_step {
    /// Set: answer the rank now with this (an accept of a stream the hub
    /// already has, or a refusal).
    std::optional<msg::frame> answer;
    /// Set: every rank offered; send this offer of the logical client up
    /// (its answer goes to accepted()).
    std::optional<msg::offer> forward;
  };

  /// Rank `rank` of `id` offers `o` (o.client_id is `id`).
  offer_step offer(const std::string& id, uint32_t rank, const msg::offer& o);

  /// The upload of `id` now (0: none): what the offer, the chunks and the
  /// end it sends up belong to. The answers below name it, so that a late
  /// answer to an upload forgotten (reset, a round over) touches no other.
  uint64_t generation(const std::string& id) const;

  /// The ranks whose offers wait for the answer of `id`'s forwarded offer
  /// (of upload `generation`), and what each is answered, from `answer`
  /// (an accept or a refusal).
  std::vector<std::pair<uint32_t, msg::frame>>
  accepted(const std::string& id, uint64_t generation,
           const msg::frame& answer);

  /// What a rank's chunk comes to.
  /// A chunk of the whole model to send up, and its sequence.
  struct up_chunk {
    uint64_t sequence = 0;
    msg::frame frame;
  };

  struct chunk_step {
    /// Set: the chunk is refused with this (nothing changed).
    std::optional<msg::frame> refusal;
    /// The rank's chunk taken: its sequence (answered with its credit).
    uint64_t sequence = 0;
    /// Chunks of the whole model now complete, to send up in order.
    std::vector<up_chunk> up;
  };

  /// Rank `rank` of `id` sends chunk frame `f` (`max_payload`: the
  /// largest a chunk may carry).
  chunk_step chunk(const std::string& id, uint32_t rank, const msg::frame& f);

  /// The answer `answer` (credit or refusal) to `id`'s chunk `seq` of the
  /// whole model came back. Returns the ranks' pieces it answers, with
  /// what each is answered, and the chunks of the whole model that may go
  /// up now.
  struct credit_step {
    std::vector<std::pair<rank_piece, msg::frame>> answers;
    std::vector<up_chunk> up;
  };
  credit_step credited(const std::string& id, uint64_t generation, uint64_t seq,
                       const msg::frame& answer);

  /// A rank's request for a credit it is owed (after a reconnect): the
  /// answer now, or nullopt (held: it comes with credited()).
  std::optional<msg::frame> owed_credit(const std::string& id, uint32_t rank,
                                        const msg::frame& f);

  /// What a rank's end of stream comes to.
  struct end_step {
    std::optional<msg::frame> answer; ///< answer now (a refusal, a repeat)
    std::optional<msg::frame> up;     ///< every rank ended: the client's end
  };
  end_step end(const std::string& id, uint32_t rank, const msg::frame& f);

  /// The answer to `id`'s end (of upload `generation`) came back: each
  /// rank's answer.
  std::vector<std::pair<uint32_t, msg::frame>>
  closed(const std::string& id, uint64_t generation, const msg::frame& answer);

  /// Round `round` is over: its uploads and those before are forgotten
  /// (whatever of them still waits is stale), offers still waiting
  /// answered (not_in_round). Returns the waiting ranks of each client
  /// with their answer.
  std::vector<std::tuple<std::string, uint32_t, msg::frame>>
  round_over(uint32_t round);

  /// `id`'s upload is collected again, or was refused: it is forgotten
  /// (its buffers freed; its ranks offer again).
  void forget(const std::string& id) {
    if (auto it = clients_.find(id); it != clients_.end())
      it->second.upload.reset();
  }

  /// The window a rank of `id` is accepted with: its share of `window`,
  /// at least 1, so that a client's ranks together hold no more of the
  /// server's memory than max(window, ranks) chunks.
  uint32_t rank_window(const std::string& id, uint32_t window) const;

private:
  struct position {
    std::vector<std::byte> bytes;
    uint64_t missing = 0; ///< bytes not yet delivered
    std::vector<rank_piece> pieces;
    bool sent = false;
  };
  struct rank_stream {
    std::optional<msg::offer> offer;
    uint64_t next = 0;       ///< its next chunk
    uint64_t first_owed = 0; ///< its first chunk not credited
    std::set<uint64_t> owed; ///< received, not credited
    bool ended = false;
    bool waiting_offer = false; ///< an offer waits for the answer
  };
  struct joined_upload {
    uint32_t round = 0;
    uint64_t stream_id = 0;   ///< the aggregator's, from its accept
    uint32_t window = 0;      ///< the aggregator's, for the client
    uint32_t rank_window = 0; ///< each rank's share of it
    bool forwarded = false;
    std::optional<msg::frame> failed; ///< refused: every rank hears this
    std::vector<rank_stream> ranks;
    std::map<uint64_t, position> open; ///< by chunk of the whole model
    uint64_t next_up = 0;              ///< next chunk to send up
    uint64_t unanswered = 0;           ///< sent up, not answered
    std::set<uint64_t> credited;       ///< chunks of the whole model
    uint64_t bytes = 0;
    std::set<uint32_t> ends_waiting;
    bool end_sent = false;
    std::optional<msg::frame> closed_answer;
    uint64_t generation = 0;
  };
  struct client {
    uint32_t ranks = 0;
    /// The bytes each rank holds (0: none registered).
    std::vector<uint64_t> held;
    std::vector<shard_slices> slices; ///< by rank (empty: unknown)
    std::vector<std::shared_ptr<const chunk_plan>> plans;
    std::set<uint32_t> present;
    bool joined = false;
    std::optional<joined_upload> upload;
    uint64_t generations = 0; ///< uploads made so far

    /// The upload of generation `g`, or null.
    joined_upload* current(uint64_t g) {
      return upload && upload->generation == g ? &*upload : nullptr;
    }
  };

  std::vector<up_chunk> release(joined_upload& u);
  /// `id`'s upload of generation `g`, or null (forgotten since).
  joined_upload* upload_of(const std::string& id, uint64_t g);
  /// `u` failed with `why`: every rank's chunk that waits is answered (into
  /// `answers`: its stream is gone, unknown_stream, naming `why`) and the
  /// buffers are freed.
  static void fail(joined_upload& u, const msg::frame& why,
                   std::vector<std::pair<rank_piece, msg::frame>>& answers);
  result<void> put(client& c, joined_upload& u, uint32_t rank,
                   const msg::chunk_view& v);

  manifest layout_;
  tensor_index names_; ///< layout_'s tensors by name
  chunk_plan whole_;
  uint32_t max_ranks_;
  uint32_t over_ = 0; ///< the last round over: offers to it are refused
  std::map<std::string, client> clients_;
};

} // namespace fedcaf
