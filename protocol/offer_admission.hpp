#pragma once
// Whether a scheduler takes an update's offer, without CAF. From the
// decoded offer and what the scheduler knows (the SyncScheduler: its open
// round; the AsyncScheduler: the client's task), an offer is admitted with
// a weight, answered (the client sits the round out: not_in_round, not a
// refusal of bad input), or refused (bad input: counted and logged). Both
// schedulers answer what they do not admit with answer_frame(), so the
// refused-vs-answered line is drawn once. The rules themselves differ:
// the SyncScheduler weighs by sample counts and relays' sums, the
// AsyncScheduler by staleness. See docs/design.md, "Actors",
// "AsyncScheduler" and "Trees of aggregators".
// Thread-safety: value types and pure functions only.

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "fedcaf/aggregation_rule.hpp"
#include "fedcaf/config.hpp"
#include "fedcaf/error.hpp"
#include "messages/codec.hpp"
#include "protocol/refusal_log.hpp"

namespace fedcaf {

/// What a scheduler does with an offer.
struct offer_verdict {
  enum class kind {
    admitted, ///< its stream opens with `weight`
    answered, ///< `answer` tells the client to sit out; not a refusal
    refused,  ///< `answer` refuses bad input: counted and logged
    sits_out, ///< a relay without a sum: it leaves the round, then `answer`
  };
  kind outcome = kind::refused;
  double weight = 0; ///< admitted: the update's weight
  error answer;      ///< any other: what the client hears

  /// Returns true iff the offer is admitted.
  bool admitted() const { return outcome == kind::admitted; }
  /// Returns true iff the answer counts as a refusal of bad input.
  bool counted() const { return outcome == kind::refused; }
};

/// Returns the frame that answers an offer not admitted: a refusal is
/// counted and logged through `refusals`, any other answer only encoded.
/// REQUIRES: !v.admitted().
msg::frame answer_frame(const offer_verdict& v, const refusal_log& refusals);

// -- SyncScheduler ------------------------------------------------------------

/// The SyncScheduler's open round as one offer sees it.
struct round_view {
  uint32_t open_round = 0;
  bool finalizing = false;  ///< the open round's updates are in
  bool sitting_out = false; ///< a relay's round short of min_clients
  bool registered = false;  ///< the offering client is registered
  bool participant = false; ///< it may still deliver to the open round
  bool missing = false;     ///< it left the open round
  bool offered = false;     ///< it offered in the open round already
};

/// The SyncScheduler's weighting terms.
struct admission_terms {
  client_weighting weights = client_weighting::equal;
  /// A claimed sample count is capped at it (0: no cap; a relay's weight
  /// is then bounded with 2^20 per client).
  uint64_t max_sample_size = 0;
  /// server_configs.relays: client id -> the most clients under it.
  std::map<std::string, uint64_t> relays;
};

/// The SyncScheduler's admission of `o` into `round`. Answered
/// (not_in_round): an offer of a past round, of the open round while it
/// finalizes or is sat out, a relay's sum of weight 0 offered again;
/// sits_out: a relay's first sum of weight 0 (its group has no update).
/// Refused: another round (wrong_round), an unregistered client
/// (unknown_client), one not in the round (not_in_round), 0 samples under
/// sample_size weights (out_of_range), a partial sum from a client not in
/// `terms.relays` or a relay's plain update (not_authorized), a relay's
/// weight above its clients' bound (out_of_range). Admitted: a relay with
/// its sum's weight, a client with 1 (equal weights) or its sample count
/// capped at max_sample_size.
offer_verdict admit_round_offer(const msg::offer& o, const round_view& round,
                                const admission_terms& terms);

/// The log line of relay `id` leaving round `round` without a sum (its
/// verdict sits_out).
std::string relay_without_sum(uint32_t round, const std::string& id);

// -- AsyncScheduler -----------------------------------------------------------

/// An AsyncScheduler client's task: the round number it carries and the
/// model version it trains on.
struct task_info {
  uint32_t round = 0;
  uint64_t base_version = 0;
};

/// The AsyncScheduler's check of `o` as it comes, from a client holding
/// `task` (nullopt: none). Returns nullopt iff the offer goes on (queued
/// for a place in the step, or resumed); else the answer: the run has
/// ended iff `run_ended` (answered), or the client does not hold the task
/// it offers for (refused, wrong_round).
std::optional<offer_verdict>
check_task_offer(const msg::offer& o, const std::optional<task_info>& task,
                 bool run_ended);

/// The AsyncScheduler's admission of the queued offer `o` into the step
/// that makes model version `version + 1`, from a client now holding
/// `task`. Refused (wrong_round) iff the client no longer holds the task
/// it offered for; else admitted with alpha s(staleness) (FedAsync) or
/// s(staleness) (FedBuff), staleness = version - task->base_version.
offer_verdict admit_task_offer(const msg::offer& o,
                               const std::optional<task_info>& task,
                               uint64_t version, server_rule rule,
                               const rule_config& cfg);

/// The answer to an offer that comes after the run's last step: the
/// client sits it out (not_in_round) until the server's done arrives.
offer_verdict run_ended_answer();

} // namespace fedcaf
