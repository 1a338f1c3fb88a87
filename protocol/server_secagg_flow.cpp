#include "protocol/server_secagg_flow.hpp"

#include <algorithm>
#include <utility>

#include "fedcaf/log.hpp"

namespace fedcaf {

server_secagg_flow::server_secagg_flow(secure_aggregation_config cfg,
                                       bool by_samples,
                                       uint64_t max_sample_size, uint64_t seed,
                                       secagg_timeouts timeouts,
                                       refusal_log refusals, secagg_port port)
    : coordinator_(std::move(cfg), by_samples, max_sample_size, seed),
      timeouts_(timeouts), refusals_(std::move(refusals)),
      port_(std::move(port)) {}

void server_secagg_flow::start(uint32_t round,
                               const std::set<std::string>& chosen,
                               const std::vector<std::string>& reached) {
  excluded_.clear();
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
    if (auto ok = coordinator_.submit_receipt(id, *r); !ok)
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
  auto answers = coordinator_.close_receipts();
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
