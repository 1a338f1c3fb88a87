#include "protocol/offer_admission.hpp"

#include <algorithm>

#include "fedcaf/server_optimizer.hpp"

namespace fedcaf {

namespace {

offer_verdict admit(double weight) {
  return {offer_verdict::kind::admitted, weight, {}};
}

offer_verdict answer(error e) {
  return {offer_verdict::kind::answered, 0, std::move(e)};
}

offer_verdict refuse(error e) {
  return {offer_verdict::kind::refused, 0, std::move(e)};
}

std::string str(uint64_t n) {
  return std::to_string(n);
}

/// The checks of the round an offer is for, and of its client's place in
/// it; nullopt iff they pass.
std::optional<offer_verdict> check_round(const msg::offer& o,
                                         const round_view& r) {
  // A past round (an honest client that trained past its deadline, or a
  // relay's child of a round given up): it sits it out and takes the next.
  if (o.round < r.open_round)
    return answer({errc::not_in_round, "round " + str(o.round) +
                                           " is over; open round is " +
                                           str(r.open_round)});
  if (o.round == r.open_round && r.finalizing) // its update is in, or late
    return answer({errc::not_in_round,
                   "round " + str(r.open_round) + " is being finalized"});
  if (o.round != r.open_round)
    return refuse({errc::wrong_round, "offer for round " + str(o.round) +
                                          ", open round is " +
                                          str(r.open_round)});
  if (!r.registered)
    return refuse({errc::unknown_client, o.client_id});
  if (r.sitting_out)
    return answer({errc::not_in_round,
                   "round " + str(r.open_round) +
                       " is sat out: the relay's children are fewer than "
                       "its min_clients"});
  if (!r.participant)
    return refuse({errc::not_in_round,
                   o.client_id + " is not in round " + str(r.open_round) +
                       (r.missing ? " (it left it: missed the deadline, or its "
                                    "update was refused)"
                                  : " (it joined after the round started)") +
                       "; it takes part in the next"});
  return std::nullopt;
}

/// The refusal of a partial sum from a client that is no relay, or of a
/// relay's plain update; nullopt iff the offer is of the kind its sender
/// must offer.
std::optional<offer_verdict> check_kind(const msg::offer& o, bool relay) {
  if (o.partial_sum == relay)
    return std::nullopt;
  return refuse({errc::not_authorized,
                 o.partial_sum
                     ? o.client_id + " offered a partial sum, which only a "
                                     "relay in server_configs.relays may"
                     : o.client_id + " is a relay in server_configs.relays "
                                     "and must offer a partial sum"});
}

/// A relay's sum: it weighs what its children do, at most as many as it
/// has (`clients`).
offer_verdict admit_relay_sum(const msg::offer& o, uint64_t clients,
                              const round_view& r,
                              const admission_terms& terms) {
  auto cap = terms.max_sample_size;
  auto most = clients;
  if (terms.weights == client_weighting::sample_size)
    most *= cap > 0 ? cap : uint64_t{1} << 20;
  if (o.sample_count == 0 && !r.offered)
    return {offer_verdict::kind::sits_out, 0,
            error{errc::not_in_round, o.client_id + " sits round " +
                                          str(r.open_round) +
                                          " out: its group has no update"}};
  if (o.sample_count == 0) // a restarted relay: its first sum decides
    return answer(
        {errc::not_in_round, o.client_id + " offered a sum of round " +
                                 str(r.open_round) +
                                 " already, which stands or falls on its own"});
  if (o.sample_count > most)
    return refuse({errc::out_of_range,
                   o.client_id + " offered a partial sum of weight " +
                       str(o.sample_count) + "; a relay of at most " +
                       str(clients) + " clients weighs 1 to " + str(most)});
  return admit(static_cast<double>(o.sample_count));
}

/// A client's weight: 1, or (sample_size weights) its claimed sample
/// count capped at max_sample_size (2^20 unless set), so that one
/// client's weight share stays at most cap / (cap + the others' weights).
double client_weight(const msg::offer& o, const admission_terms& terms) {
  if (terms.weights != client_weighting::sample_size)
    return 1.0;
  auto cap = terms.max_sample_size;
  return static_cast<double>(cap > 0 ? std::min(o.sample_count, cap)
                                     : o.sample_count);
}

} // namespace

msg::frame answer_frame(const offer_verdict& v, const refusal_log& refusals) {
  return v.counted() ? refusals.refuse(v.answer) : msg::encode(v.answer);
}

offer_verdict admit_round_offer(const msg::offer& o, const round_view& round,
                                const admission_terms& terms) {
  if (auto v = check_round(o, round))
    return *v;
  if (terms.weights == client_weighting::sample_size && o.sample_count == 0)
    return refuse({errc::out_of_range,
                   o.client_id + " offered an update of 0 samples, which "
                                 "sample_size weights cannot average"});
  auto relay = terms.relays.find(o.client_id);
  bool is_relay = relay != terms.relays.end();
  if (auto v = check_kind(o, is_relay))
    return *v;
  if (is_relay)
    return admit_relay_sum(o, relay->second, round, terms);
  return admit(client_weight(o, terms));
}

std::string relay_without_sum(uint32_t round, const std::string& id) {
  return "round " + str(round) + ": relay " + id +
         " has no partial sum (its own round fell short of its "
         "min_clients); it leaves the round";
}

std::optional<offer_verdict>
check_task_offer(const msg::offer& o, const std::optional<task_info>& task,
                 bool run_ended) {
  if (run_ended) // a task finished as the run ended: no error of the client
    return run_ended_answer();
  if (!task || task->round != o.round)
    return refuse({errc::wrong_round, "offer of " + o.client_id + " for task " +
                                          str(o.round) + " it does not hold"});
  return std::nullopt;
}

offer_verdict admit_task_offer(const msg::offer& o,
                               const std::optional<task_info>& task,
                               uint64_t version, server_rule rule,
                               const rule_config& cfg) {
  if (!task || task->round != o.round)
    return refuse({errc::wrong_round, "stale offer"});
  auto s = staleness_weight(cfg, version - task->base_version);
  return admit(rule == server_rule::fedasync ? cfg.alpha * s : s);
}

offer_verdict run_ended_answer() {
  return answer({errc::not_in_round, "the run has ended"});
}

} // namespace fedcaf
