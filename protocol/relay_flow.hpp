#pragma once
// A relay's children's side as its server runs it, without CAF: the
// parent's model of each round handed down by the relay's upstream half,
// adopted by the aggregator and served to the children as it arrives; the
// round held until that model is in place (relay_gate), the children's
// fetches that wait for bytes still on their way (relay_download) or, in
// window mode, for positions gone from the download cache and fetched
// again (relay_residency), the children that pace that download
// (fetch_pacing); a download given up for a newer model, and the model
// given up that stays served to the children still downloading it; the
// answer to the parent: the round's sum, or nothing where it was sat out.
// What it needs done outside goes through the port (the server actor
// passes its sends and promises, tests pass recorders); every reply goes
// through the callback it came with, now or later. It takes the time as
// an argument. See docs/design.md, "Trees of aggregators".
//
// The parent's request (the relay_atom the upstream half sends with each
// model, answered with the round's sum):
//   no_request -(take)-> adopting -(adopted)-> in_round -(published, or sat
//   out)-> no_request (or adopting the model that waited for its turn)
//   in_round -(a newer model while this one arrives)-> giving_up -(the
//   scheduler sat the round out)-> no_request ...
//   any -(end)-> ended
// Beside it: the model that waits for its turn (next_), the model given up
// (retired_), and the scheduler's sit-out that waits for a model (held
// until one is in place).
// Thread-safety: none; owned by the server actor. Callbacks are called
// from within the flow's member functions only.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "fedcaf/error.hpp"
#include "fedcaf/model_snapshot.hpp"
#include "messages/codec.hpp"
#include "protocol/fetch_pacing.hpp"
#include "protocol/refetch_budget.hpp"
#include "protocol/relay_download.hpp"
#include "protocol/relay_gate.hpp"
#include "protocol/relay_model.hpp"

namespace fedcaf {

/// Answers the upstream half's model with the round's sum, or an error.
using parent_reply = std::function<void(result<relay_result>)>;
/// Answers a child's fetch with a frame (an error frame iff refused).
using fetch_reply = std::function<void(msg::frame)>;
/// Answers the scheduler's sit-out with the round to choose next (0: the
/// run ends), or an error.
using sit_out_reply = std::function<void(result<uint32_t>)>;

/// The upstream half's request that came with a model: its answer, and
/// where each step of a streaming round's sum goes (its upstream client).
struct parent_request {
  parent_reply reply;
  std::function<void(const relay_step&)> hears;
};

/// What the flow asks of the server.
struct relay_port {
  /// The aggregator adopts `m` as the round's global model; the server
  /// installs what it answers and calls adopted().
  std::function<void(relay_model m)> adopt;
  /// Round `round` opens for `chosen` (announced, served, routed).
  std::function<void(uint32_t round, const std::vector<std::string>& chosen)>
      open_round;
  /// The scheduler sits round `round` out: its model never comes whole.
  std::function<void(uint32_t round)> sit_out;
  /// Round `round` is sat out (`was_open`: it had opened, and closes now):
  /// reported.
  std::function<void(uint32_t round, bool was_open)> sat_out;
  /// Serves `req` of client `id` now, from `pinned` (a model given up that
  /// the child still downloads) or, iff null, the model served; an error
  /// iff refused.
  std::function<result<msg::frame>(const std::string& id, const msg::fetch& req,
                                   const snapshot_ptr& pinned)>
      serve;
  /// A refusal, counted and logged, as an error frame.
  std::function<msg::frame(const error&)> refuse;
  /// The aggregator hears that the model's bytes [0, upto) are in (all of
  /// them: the model is whole).
  std::function<void(uint64_t upto)> arrived;
  /// Calls paced() `after` from now (a timer).
  std::function<void(std::chrono::milliseconds after)> pace_after;
  /// Called from any thread with a position of a window-mode relay's model
  /// made resident again (fetched again from the parent): the server calls
  /// resident() with it.
  std::function<void(uint64_t position)> resident;
};

class relay_flow {
public:
  using time_point = fetch_pacing::time_point;

  /// `fetch_silence`: a window-mode relay's child that fetched nothing
  /// for this long paces its download no more (zero: never).
  /// `round_deadline`: a round's length from when it opens (0: none), by
  /// which a window-mode relay's children must have had the model.
  relay_flow(std::chrono::milliseconds fetch_silence, relay_port port,
             std::chrono::milliseconds round_deadline = {});

  // -- the upstream half ------------------------------------------------------

  /// The parent's model of the next round, `m`, whole or still arriving
  /// (arrived() says which bytes are in); `parent` is answered with the
  /// round's sum. A model that comes while the open round's still arrives
  /// ends that round (its download was given up upstream: it never comes
  /// whole): the round is sat out, then this one taken; one that comes
  /// while another waits displaces it (answered with no sum).
  void take(relay_model m, parent_request parent, time_point now);
  /// Bytes [offset, + bytes) of the model arrived: the fetches that waited
  /// for them are served, and once every byte is, the model is whole.
  void arrived(uint64_t offset, uint64_t bytes, time_point now);

  // -- the server's actors ----------------------------------------------------

  /// The aggregator adopted the model, `served` now; the round held for it
  /// opens (or the sit-out held for it is answered).
  void adopted(snapshot_ptr served, time_point now);
  /// The scheduler chose round `round` for `chosen`: it opens now iff the
  /// parent's model is in place, else once it is.
  void start(uint32_t round, const std::vector<std::string>& chosen,
             time_point now);
  /// The scheduler: round `round` cannot have min_clients. Once the
  /// parent's model of the round is in place (or the round is open), the
  /// round is sat out: the parent's model is answered with no sum and
  /// `reply` with the next round; before, `reply` waits and gets `round`
  /// again as the model comes (children may have come meanwhile). Refused
  /// iff a sit-out waits already.
  void sit_out(uint32_t round, sit_out_reply reply, time_point now);
  /// A streaming round `round`'s sum settled as `step` says: the upstream
  /// half hears it.
  void settled(uint32_t round, const relay_step& step);
  /// The round was published: `r` (its sum) answers the parent's model,
  /// and a model that waited is taken.
  void published(relay_result r, time_point now);

  // -- the children ------------------------------------------------------------

  /// Returns ok iff an offer of round `offered` may go on while round
  /// `open` is the last opened: the model is whole (its model_arrival, as
  /// the aggregator reads it) and the run has not ended. Else its answer:
  /// not_in_round for an honest child of a round given up or over, or
  /// after the end; unexpected_message (a refusal) before the model is
  /// whole.
  result<void> may_offer(const std::string& id, uint32_t offered,
                         uint32_t open) const;
  /// Client `id`'s fetch `req` of model bytes `range` (nullopt: past the
  /// plan): `reply` gets the chunk now, or once its bytes are in, or (window
  /// mode) once the position gone from the cache is fetched again.
  void fetch(const std::string& id, const msg::fetch& req,
             std::optional<std::pair<uint64_t, uint64_t>> range, time_point now,
             fetch_reply reply);
  /// Position `seq` of a window-mode relay's model is resident again: the
  /// fetches that missed it are served.
  void resident(uint64_t seq, time_point now);
  /// The children's pace of the download: positions every child still
  /// pacing has fetched leave the cache; a child silent for fetch_silence
  /// paces no more. Looks again later while the download is paced.
  void paced(time_point now);
  /// Client `id` was dropped from the run: it paces no more.
  void dropped(const std::string& id, time_point now);

  /// The run ends (`reason` empty: done): what waits is answered.
  void end(const std::string& reason, time_point now);

private:
  struct no_request {};
  struct adopting {
    parent_request parent;
  };
  struct in_round {
    parent_request parent;
  };
  struct giving_up {
    parent_request parent;
  };
  struct ended {};
  using state = std::variant<no_request, adopting, in_round, giving_up, ended>;

  /// A parent's model that came while another's round goes on, with the
  /// bytes of it that came before its turn.
  struct waiting_model {
    relay_model model;
    parent_request parent;
    std::vector<std::pair<uint64_t, uint64_t>> arrived{};
  };
  /// A model given up, still served to the children that download it
  /// until the round after it is answered (`answered`: its own is).
  struct retired_model {
    snapshot_ptr model;
    bool answered = false;
  };
  /// A fetch that waits for bytes, or for a position fetched again.
  struct waiting_fetch {
    std::string id;
    msg::fetch req;
    fetch_reply reply;
  };

  /// The open request of the upstream half, or null.
  parent_request* parent();
  bool is_adopting() const { return std::holds_alternative<adopting>(state_); }
  bool is_ended() const { return std::holds_alternative<ended>(state_); }

  /// Has the aggregator adopt `m`, whose bytes `in` are in already. A
  /// model before it still arriving (its round sat out at its deadline) is
  /// given up.
  void adopt(relay_model m, parent_request parent,
             const std::vector<std::pair<uint64_t, uint64_t>>& in,
             time_point now);
  /// The open round's model never comes whole: the fetches waiting for it
  /// get what came, and the round (if one opened on it) is sat out by the
  /// scheduler; else its answer is no sum at once.
  void give_up_download(time_point now);
  /// Answers the parent's model with `r`, then takes a model that waited.
  void answer(result<relay_result> r, time_point now);
  /// Serves `w` now (counts its progress in the pace).
  msg::frame serve_now(const std::string& id, const msg::fetch& req,
                       time_point now);
  /// Answers every fetch that waits on the model's bytes with what is
  /// there (the download was given up, or the run ends).
  void serve_waiting(time_point now);
  /// A new model: fetches that missed the last one's cache sit its round
  /// out.
  void forget_missed();
  void pace(time_point now);
  void arm_pacing();
  uint64_t served_version() const { return served_ ? served_->version : 0; }

  std::chrono::milliseconds fetch_silence_;
  std::chrono::milliseconds round_deadline_;
  relay_port port_;
  state state_;
  std::optional<waiting_model> next_;
  std::optional<retired_model> retired_;
  sit_out_reply held_sit_out_; ///< the scheduler's, until a model is in
  relay_gate gate_;
  relay_download download_; ///< which bytes of the model served are in
  snapshot_ptr served_;     ///< the model served (from adopted() on)
  std::shared_ptr<model_arrival> arrival_;     ///< the model served's
  std::shared_ptr<relay_residency> residency_; ///< window mode: its
  /// Window mode: the residency of the model being adopted (served from
  /// adopted() on, whatever happened meanwhile).
  std::shared_ptr<relay_residency> incoming_residency_;
  fetch_pacing pacing_;      ///< window mode: how far each child fetched
  refetch_budget refetches_; ///< window mode: chunks fetched again
  std::map<uint64_t, waiting_fetch> waiting_; ///< by relay_download ticket
  /// Window mode: fetches of positions gone from the cache, by position,
  /// until they are fetched again from the parent.
  std::map<uint64_t, std::vector<waiting_fetch>> missed_;
  uint32_t round_ = 0; ///< the last round opened
};

} // namespace fedcaf
