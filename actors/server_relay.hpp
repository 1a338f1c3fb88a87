#pragma once
// A relay's server part: relay_flow (protocol/) with what it needs of the
// actor: the aggregator's adoption of each parent's model, rounds opened
// and sat out, chunks served and refused, its pace timer, and the response
// promises of its upstream half's requests, of the scheduler's sit-out and
// of the children's fetches that wait. Each of the server's relay
// handlers is one call here.
// Thread-safety: none; part of the server actor (actors/server_core.hpp).

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <caf/all.hpp>

#include "actors/server_core.hpp"
#include "protocol/relay_flow.hpp"

namespace fedcaf {

class server_relay {
public:
  /// What the part asks of the rest of the server.
  struct server_calls {
    /// Round `round` opens for `chosen` (announced, served, routed).
    std::function<void(uint32_t round, const std::vector<std::string>& chosen)>
        open_round;
    /// Round `round` is over.
    std::function<void(uint32_t round)> close_round;
    /// Serves `req` of client `id` (from `pinned` unless the client pins a
    /// model of its own); an error iff refused.
    std::function<result<frame>(const std::string& id, const msg::fetch& req,
                                const snapshot_ptr& pinned)>
        serve;
    /// Ends the run with its reason.
    std::function<void(const std::string& why)> stop;
    /// Has the connected children evaluate the model served now (the
    /// run's final evaluation, which ends the run).
    std::function<void()> final_pass;
  };

  server_relay(server_core& core, server_calls calls);

  /// The upstream half's `(relay_atom, m)`: answered with the round's sum.
  caf::result<relay_result> take(relay_model m);
  /// The scheduler's `(sit_out_atom, round)`: see relay_flow::sit_out.
  caf::result<uint32_t> sit_out(uint32_t round);
  /// The upstream half's `(eval_atom, m)`: the parent's final model, which
  /// the children evaluate (the side's final evaluation, after which its
  /// run ends); answered with their evaluation and no sum, at once where
  /// there is nobody to ask.
  caf::result<relay_result> evaluate_final(relay_model m);
  /// The side's run ends: the parent's final evaluation, if asked for, is
  /// answered with what the children said.
  void final_evaluated();
  /// A child's fetch `req` (registered as `id`): answered now or later.
  caf::result<frame> fetch(const std::string& id, const msg::fetch& req,
                           uint64_t position);

  /// The flow, for the calls that need no promise (relay_flow: start,
  /// may_offer, published, dropped, end, arrived, resident, paced,
  /// settled), each with the time.
  relay_flow& flow() { return flow_; }

private:
  /// What the flow needs done.
  relay_port port_of();
  /// The children's evaluation of the model of the round now (its weighted
  /// means), if any evaluated it.
  std::optional<relay_evaluation> children_evaluation() const;
  /// Has the aggregator adopt `m` as the global model, then serves it.
  void adopt(relay_model m);

  server_core& core_;
  server_calls calls_;
  relay_flow flow_;
  /// The parent's final evaluation, while the children evaluate.
  std::optional<caf::typed_response_promise<relay_result>> final_;
};

} // namespace fedcaf
