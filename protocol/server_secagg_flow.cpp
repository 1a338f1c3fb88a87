#include "protocol/server_secagg_flow.hpp"

#include <algorithm>
#include <utility>

#include "fedcaf/log.hpp"

namespace fedcaf {

server_secagg_flow::server_secagg_flow(secure_aggregation_config cfg,
                                       bool by_samples,
                                       uint64_t max_sample_size, uint64_t seed,
                                       secagg_timeouts timeouts,
                                       refusal_log refusals, secagg_port port,
                                       size_t least_in_sum)
    : coordinator_(std::move(cfg), by_samples, max_sample_size, seed),
      timeouts_(timeouts), refusals_(std::move(refusals)),
      port_(std::move(port)), tracer_(seed ^ 0x7261ce),
      least_in_sum_(least_in_sum) {}

void server_secagg_flow::start(uint32_t round,
                               const std::set<std::string>& chosen,
                               const std::vector<std::string>& reached) {
  excluded_.clear();
  held_out_.clear();
  coordinator_.start(round, reached);
  chosen_ = chosen;
  waiting_.clear();
  sent_away_.clear();
  if (timeouts_.keys.count() > 0)
    port_.deadline(timeouts_.keys, round, static_cast<uint32_t>(phase::keys));
}

std::optional<msg::frame> server_secagg_flow::receive(const std::string& id,
                                                      const msg::frame& f) {
  auto refuse = [this](const error& e) { return refusals_.refuse(e); };
  auto kind = msg::kind_of(f);
  if (!kind)
    return refuse(kind.err());
  switch (*kind) {
  case msg::frame_kind::secagg_keys: {
    auto k = msg::decode<msg::secagg_keys>(f);
    if (!k)
      return refuse(k.err());
    if (auto ok = coordinator_.advertise(id, *k); !ok)
      return refuse(ok.err());
    return std::nullopt;
  }
  case msg::frame_kind::secagg_shares: {
    auto s = msg::decode<msg::secagg_shares>(f);
    if (!s)
      return refuse(s.err());
    if (auto ok = coordinator_.submit_shares(id, *s); !ok)
      return refuse(ok.err());
    return std::nullopt;
  }
  case msg::frame_kind::secagg_receipt: {
    auto r = msg::decode<msg::secagg_receipt>(f);
    if (!r)
      return refuse(r.err());
    auto ok = current() == phase::disputes
                  ? coordinator_.defend(id, *r)
                  : coordinator_.submit_receipt(id, *r);
    if (!ok)
      return refuse(ok.err());
    return std::nullopt;
  }
  case msg::frame_kind::secagg_unmask: {
    auto u = msg::decode<msg::secagg_unmask>(f);
    if (!u)
      return refuse(u.err());
    if (auto ok = coordinator_.reveal(id, *u); !ok)
      return refuse(ok.err());
    auto echo = msg::encode(msg::secagg_unmask{u->round, {}, {}, {}, {}});
    advance();
    return echo;
  }
  default:
    return refuse(
        {errc::unexpected_message, id + ": not a frame a client sends"});
  }
}

void server_secagg_flow::hold(const std::string& id, secagg_reply reply) {
  waiting_[id] = std::move(reply);
  // The shares phase's first: its deadline. The keys phase has none of its
  // own (clients advertise once they trained, which takes what it takes:
  // an early advertiser must not start a clock on the others); it ends
  // when every chosen client advertised or was lost, or at the keys
  // deadline (start).
  if (waiting_.size() == 1 && current() != phase::keys)
    port_.deadline(timeouts_.phase, round(), static_cast<uint32_t>(current()));
  advance();
}

void server_secagg_flow::expire(uint32_t round, uint32_t p) {
  auto open = current();
  if (coordinator_.round() != round || static_cast<uint32_t>(open) != p)
    return;
  log_line(log_level::warning, "server",
           "round " + std::to_string(round) +
               ": a secure aggregation phase timed out; the clients that "
               "did not answer leave the round");
  close(open);
}

void server_secagg_flow::lost(const std::string& id) {
  coordinator_.lost(id);
  waiting_.erase(id);
  advance();
}

result<void>
server_secagg_flow::open_unmask(uint32_t round,
                                const std::vector<std::string>& in_sum,
                                const unmask_ask& ask, plan_reply reply) {
  if (coordinator_.round() != round)
    return error{errc::wrong_round,
                 "no secure aggregation round " + std::to_string(round)};
  auto asks = coordinator_.open_unmask({in_sum.begin(), in_sum.end()});
  if (!asks)
    return asks.err();
  plan_reply_ = std::move(reply);
  for (auto& [id, a] : *asks)
    if (!ask(id, msg::encode(a)))
      coordinator_.lost(id);
  port_.deadline(timeouts_.phase, round, static_cast<uint32_t>(current()));
  advance();
  return {};
}

void server_secagg_flow::advance() {
  if ((current() == phase::keys && coordinator_.keys_complete()) ||
      (current() == phase::shares && coordinator_.shares_complete()) ||
      (current() == phase::receipts && coordinator_.receipts_complete()) ||
      (current() == phase::disputes && coordinator_.disputes_complete()) ||
      (current() == phase::unmask && coordinator_.unmask_complete()))
    close(current());
}

void server_secagg_flow::close(phase p) {
  switch (p) {
  case phase::keys:
    return close_keys();
  case phase::shares:
    return close_shares();
  case phase::receipts:
    return close_receipts();
  case phase::disputes:
    return close_disputes();
  case phase::unmask:
    return close_unmask();
  default:
    return;
  }
}

void server_secagg_flow::close_keys() {
  auto rosters = coordinator_.close_keys();
  if (!rosters) {
    answer_waiting([this, &rosters](const std::string&) {
      return refusals_.refuse(rosters.err());
    });
    return port_.fail("round " + std::to_string(round()) + ": " +
                      rosters.err().message);
  }
  answer_waiting([&rosters](const std::string& id) {
    return msg::encode((*rosters)[id]);
  });
  send_away_left();
  // A chosen client that was not connected when the round started (lost,
  // within its grace) cannot join a round whose keys are set: it leaves it
  // now rather than when its grace ends.
  for (const auto& id : chosen_)
    if (!rosters->count(id))
      send_away(id, "missed the secure aggregation keys phase");
}

void server_secagg_flow::close_shares() {
  auto relays = coordinator_.close_shares();
  answer_waiting([this, &relays](const std::string& id) {
    auto it = relays.find(id);
    if (it != relays.end())
      return msg::encode(it->second);
    return refusals_.refuse(
        {errc::not_in_round,
         id + " did not share in time; it sits this round out"});
  });
  send_away_left();
}

void server_secagg_flow::close_receipts() {
  auto challenges = coordinator_.close_receipts();
  if (challenges.empty())
    return close_disputes();
  // Each disputed client is answered now with its dispute; the others'
  // receipts stay held until the disputes end.
  for (auto& [id, challenge] : challenges) {
    auto held = waiting_.find(id);
    if (held ==
        waiting_
            .end()) { // lost: it leaves, unnamed, and the disputes do not wait for it
      coordinator_.lost(id);
      continue;
    }
    auto reply = std::move(held->second);
    waiting_.erase(held);
    log_line(log_level::info, "server",
             "round " + std::to_string(round()) + ": " +
                 std::to_string(challenge.disputed.size()) +
                 " neighbours said that " + id +
                 "'s secure aggregation share did not open; it is asked "
                 "to reveal those shares' keys");
    reply(msg::encode(challenge));
  }
  port_.deadline(timeouts_.phase, round(), static_cast<uint32_t>(current()));
  advance();
}

void server_secagg_flow::close_disputes() {
  auto answers = coordinator_.close_disputes();
  for (const auto& c : coordinator_.culprits())
    blame(c.id, c.why);
  if (!answers) {
    answer_waiting([this, &answers](const std::string&) {
      return refusals_.refuse(answers.err());
    });
    send_away_left();
    return port_.fail("round " + std::to_string(round()) + ": " +
                      answers.err().message);
  }
  hold_out(*answers);
  answer_waiting([this, &answers](const std::string& id) {
    auto it = answers->find(id);
    if (it != answers->end())
      return msg::encode(it->second);
    return refusals_.refuse(
        {errc::not_in_round, id + " sent no receipt in time, or its shares "
                                  "are disputed; it sits this round out"});
  });
  send_away_left();
}

void server_secagg_flow::hold_out(
    const std::map<std::string, msg::secagg_receipt>& masking) {
  std::set<std::string> members;
  for (const auto& [id, answer] : masking)
    members.insert(id);
  auto least = std::max<size_t>(
      {least_in_sum_, size_t{coordinator_.threshold()}, size_t{2}});
  held_out_ = tracer_.hold_out(members, least);
  if (held_out_.empty())
    return;
  if (held_out_.count(tracer_.named())) {
    note(tracer_.named(), "held out of the sum: named by the trace of an "
                          "upload out of range");
    send_away(tracer_.named(), "held out of round " + std::to_string(round()) +
                                   "'s sum: named by the trace of an upload "
                                   "out of range");
    return;
  }
  std::string names;
  for (const auto& id : held_out_)
    names += (names.empty() ? "" : ", ") + id;
  log_line(log_level::warning, "server",
           "round " + std::to_string(round()) + ": " + names +
               " held out of the sum (an upload out of range is traced; " +
               std::to_string(tracer_.suspects().size()) + " suspects)");
  // Told now, before their answers go out: the scheduler turns their
  // offers away. Each masked against every other; its mask key's shares
  // remove those masks from the sum, its update stays unseen.
  for (const auto& id : held_out_)
    send_away(id, "held out of round " + std::to_string(round()) +
                      "'s sum while an upload out of range is traced");
}

void server_secagg_flow::unmasked(uint32_t round, bool in_range) {
  if (round != coordinator_.round())
    return;
  const auto& in_sum = coordinator_.in_sum();
  if (!in_range) {
    std::string names;
    for (const auto& id : in_sum)
      names += (names.empty() ? "" : ", ") + id;
    log_line(log_level::warning, "server",
             "round " + std::to_string(round) + ": the unmasked sum of " +
                 names +
                 " is beyond what they can give: one of them uploaded no "
                 "masked update of bounded values; tracing it (suspects are "
                 "held out of the next rounds' sums in turn)");
  }
  auto named = tracer_.named();
  auto traced = tracer_.record(round, in_sum, held_out_, in_range);
  if (!named.empty() && tracer_.named().empty())
    log_line(log_level::warning, "server",
             "round " + std::to_string(round) + ": a sum without " + named +
                 " is out of range too: it is no longer held out (another "
                 "client uploads out of range); tracing afresh");
  if (traced)
    note(traced->id, traced->why +
                         "; held out of the sums from now on (not dropped: "
                         "with two liars or more the trace can point at an "
                         "honest client)");
}

void server_secagg_flow::note(const std::string& id, const std::string& why) {
  log_line(log_level::warning, "server",
           "round " + std::to_string(round()) + ": " + id + " " + why);
  auto known = std::find_if(excluded_.begin(), excluded_.end(),
                            [&id](const auto& e) { return e.first == id; });
  if (known == excluded_.end())
    excluded_.emplace_back(id, why);
  if (port_.culprit)
    port_.culprit(id, round(), why, 0);
}

void server_secagg_flow::blame(const std::string& id, const std::string& why,
                               bool leaves) {
  auto again = std::find_if(excluded_.begin(), excluded_.end(),
                            [&id](const auto& e) { return e.first == id; });
  if (again != excluded_.end()) { // once a round, whatever it did
    log_line(log_level::warning, "server",
             "round " + std::to_string(round()) + ": " + id + " " + why);
    return;
  }
  auto times = ++blamed_[id];
  excluded_.emplace_back(id, why);
  log_line(log_level::warning, "server",
           "round " + std::to_string(round()) + ": " + id + " " + why +
               "; excluded from the round (" + std::to_string(times) +
               (times == 1 ? " time" : " times") +
               "; twice: dropped from the run)");
  if (leaves)
    send_away(id, why);
  if (port_.culprit)
    port_.culprit(id, round(), why, times);
}

void server_secagg_flow::name(const std::string& id, const std::string& why) {
  log_line(log_level::warning, "server",
           "round " + std::to_string(round()) + ": " + id + " " + why +
               " (or its owner dealt it a wrong share): named, not excluded");
  auto known = std::find_if(excluded_.begin(), excluded_.end(),
                            [&id](const auto& e) { return e.first == id; });
  if (known == excluded_.end())
    excluded_.emplace_back(id, why);
}

void server_secagg_flow::close_unmask() {
  auto plan = coordinator_.close_unmask();
  for (const auto& c : coordinator_.culprits())
    if (c.counted)
      blame(c.id, c.why, false);
    else
      name(c.id, c.why);
  if (!plan_reply_)
    return;
  auto reply = std::move(plan_reply_);
  plan_reply_ = nullptr;
  if (!plan)
    log_line(log_level::error, "server", plan.err().message);
  reply(std::move(plan));
}

template <class F> void server_secagg_flow::answer_waiting(F&& answer) {
  auto waiting = std::move(waiting_);
  waiting_.clear();
  const auto& left = coordinator_.left();
  for (auto& [id, reply] : waiting)
    if (std::find(left.begin(), left.end(), id) != left.end())
      reply(refusals_.refuse(
          {errc::not_in_round, id + " left the round's secure aggregation "
                                    "(late, or excluded); it sits "
                                    "this round out"}));
    else
      reply(answer(id));
}

void server_secagg_flow::send_away_left() {
  for (const auto& id : coordinator_.left())
    send_away(id, "left the secure aggregation setup");
}

void server_secagg_flow::send_away(const std::string& id,
                                   const std::string& why) {
  if (sent_away_.insert(id).second)
    port_.send_away(id, round(), why);
}

} // namespace fedcaf
