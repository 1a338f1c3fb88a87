#pragma once
// The server's SecAgg+ flow, without CAF: the coordinator of a round plus
// what the server must remember between messages (the requests held until
// their phase ends, the clients already sent away) and the order in which
// a phase's end is carried out. What it needs done outside (timers, a
// word to the scheduler, ending the run, answering a request) goes through
// the callbacks it is given; the server actor passes its sends and
// promises, tests pass recorders.
//
// keys: a client's SecAggKeys is held until every client of the round
// advertised or was lost (or the keys deadline: the late ones leave the
// round), then answered with its roster; shares: its sealed shares are
// held until every client shared (or the phase timed out), then answered
// with those relayed to it; receipts: held until every client that shared
// said whose shares did not open for it; a client whose shares are
// disputed is answered at once with its dispute, and its answer (the keys
// of those shares) held; once every disputed client answered, every held
// receipt is answered with the clients it must not mask against (the
// culprits, see secagg_coordinator); unmask: at finalize the aggregator
// asks for the
// plan, the survivors are asked for their shares, and the plan goes back
// once all answered (or the phase timed out). The server only relays
// sealed shares it cannot open.
// Thread-safety: none; owned by the server actor. Callbacks are called
// from within the flow's member functions only.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "fedcaf/error.hpp"
#include "messages/codec.hpp"
#include "protocol/range_tracer.hpp"
#include "protocol/refusal_log.hpp"
#include "protocol/secagg_coordinator.hpp"

namespace fedcaf {

/// What the flow asks of the server.
struct secagg_port {
  /// Calls expire(round, phase) `after` from now (a timer).
  std::function<void(std::chrono::milliseconds after, uint32_t round,
                     uint32_t phase)>
      deadline;
  /// Client `id` leaves round `round` (the scheduler stops waiting for
  /// it), because it `why`.
  std::function<void(const std::string& id, uint32_t round,
                     const std::string& why)>
      send_away;
  /// The round cannot go on: "round <r>: <why>"; the run ends.
  std::function<void(const std::string& why)> fail;
  /// Client `id` was excluded from round `round` for lying (`why`), for
  /// the `times`-th time in the run (from 2 on, it is to be dropped from
  /// the run; 0: named, not counted).
  std::function<void(const std::string& id, uint32_t round,
                     const std::string& why, uint32_t times)>
      culprit;
};

/// How long the phases wait.
struct secagg_timeouts {
  /// The keys phase ends this long after the round started; 0: when every
  /// chosen client advertised or was lost.
  std::chrono::milliseconds keys{0};
  /// The shares phase (from the first shares) and the unmask phase.
  std::chrono::milliseconds phase{60000};
};

/// Answers one held request with a frame (an error frame iff refused).
using secagg_reply = std::function<void(msg::frame)>;
/// Answers the aggregator: the unmask plan, or why there is none.
using plan_reply = std::function<void(result<secagg::unmask_plan>)>;
/// Sends client `id` its unmask request; returns false iff it is gone.
using unmask_ask = std::function<bool(const std::string& id, msg::frame)>;

class server_secagg_flow {
public:
  using phase = secagg_coordinator::phase;

  /// As secagg_coordinator's constructor; refusals of clients go through
  /// `refusals` (counted and logged).
  /// `least_in_sum`: the fewest updates a round's sum may hold (the
  /// server's min_clients); clients are held out of a sum while an upload
  /// out of range is traced (range_tracer) only above it.
  server_secagg_flow(secure_aggregation_config cfg, bool by_samples,
                     uint64_t max_sample_size, uint64_t seed,
                     secagg_timeouts timeouts, refusal_log refusals,
                     secagg_port port, size_t least_in_sum = 2);

  /// Opens round `round`, whose chosen clients are `chosen`, for those of
  /// them connected now, `reached`; starts the keys deadline, if any.
  /// Forgets the last round's held requests (unanswered).
  void start(uint32_t round, const std::set<std::string>& chosen,
             const std::vector<std::string>& reached);
  uint32_t round() const { return coordinator_.round(); }
  phase current() const { return coordinator_.current(); }

  /// Client `id`'s frame `f`. Returns the answer now: an error frame iff
  /// it does not decode, is not a frame a client sends or the coordinator
  /// refuses it; the echo of an accepted SecAggUnmask. Returns nullopt
  /// iff the request is to be held: call hold().
  std::optional<msg::frame> receive(const std::string& id, const msg::frame& f);
  /// Holds client `id`'s request until its phase ends; `reply` gets the
  /// answer then (maybe at once, if this completed the phase). The first
  /// request held in the shares phase starts that phase's deadline.
  void hold(const std::string& id, secagg_reply reply);

  /// The deadline of phase `p` of round `round`: ends it (the clients that
  /// did not answer leave the round), iff still open.
  void expire(uint32_t round, uint32_t p);

  /// Client `id` lost its connection: it leaves the phase; its held
  /// request, if any, is dropped unanswered.
  void lost(const std::string& id);

  /// Client `id` lied in this round (`why`): its masked upload was refused
  /// for its content, or most of its neighbours disputed its shares.
  /// Counts it (once a round), sends it away from the round iff `leaves`
  /// and tells the port's culprit.
  void blame(const std::string& id, const std::string& why, bool leaves = true);
  /// For what cannot be checked (a wrong revealed share: its holder cannot
  /// tell whether its owner dealt it a wrong one): named in the round's
  /// report and the log, not counted toward dropping it.
  void name(const std::string& id, const std::string& why);
  /// The clients blamed in this round, with why (for its report).
  const std::vector<std::pair<std::string, std::string>>& excluded() const {
    return excluded_;
  }

  /// The aggregator unmasked round `round`'s sum: within what its
  /// contributors can give (`in_range`), or not. Feeds the trace of an
  /// upload out of range; a client it names is named in the round's report
  /// and held out of the sums from the next round on (never dropped for
  /// it: with two liars or more the trace can point at an honest client).
  void unmasked(uint32_t round, bool in_range);

  /// Opens the unmask phase for the aggregator's sum of `in_sum`'s updates
  /// in round `round`: asks each survivor through `ask`, starts the
  /// deadline; `reply` gets the plan once all answered (or the deadline).
  /// Fails (wrong_round) iff `round` is not this flow's round, or as
  /// secagg_coordinator::open_unmask; `reply` is then never called.
  result<void> open_unmask(uint32_t round,
                           const std::vector<std::string>& in_sum,
                           const unmask_ask& ask, plan_reply reply);

private:
  /// Ends the phase that is complete, if any.
  void advance();
  void close(phase p);
  void close_keys();
  void close_shares();
  void close_receipts();
  void close_disputes();
  /// While an upload out of range is traced: holds suspects of `masking`
  /// (the clients that will mask) out of the round's sum and sends them
  /// away from the round.
  void hold_out(const std::map<std::string, msg::secagg_receipt>& masking);
  /// Names `id` in the round's report and the log for what the trace says
  /// (`why`); not counted toward dropping it.
  void note(const std::string& id, const std::string& why);
  void close_unmask();
  /// Answers every held request: `answer(id)`, or not_in_round for a
  /// client the phase left behind.
  template <class F> void answer_waiting(F&& answer);
  /// Sends away the clients the setup left behind.
  void send_away_left();
  void send_away(const std::string& id, const std::string& why);

  secagg_coordinator coordinator_;
  secagg_timeouts timeouts_;
  refusal_log refusals_;
  secagg_port port_;
  std::set<std::string> chosen_;
  std::map<std::string, secagg_reply> waiting_; ///< held, by client id
  std::set<std::string> sent_away_;
  plan_reply plan_reply_; ///< the aggregator's, while unmasking
  std::map<std::string, uint32_t> blamed_; ///< rounds excluded, by client
  range_tracer tracer_;
  size_t least_in_sum_;
  std::set<std::string> held_out_; ///< of this round's sum, by the trace
  std::vector<std::pair<std::string, std::string>> excluded_; ///< this round
};

} // namespace fedcaf
