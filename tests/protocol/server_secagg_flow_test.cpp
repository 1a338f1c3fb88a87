// The server's SecAgg+ flow with real participants' frames and recording
// callbacks in place of the actor's promises, timers and sends: requests
// held until their phase ends, the deadlines it asks for, the clients it
// sends away (once), a failed keys phase ending the run, refusals as error
// frames, and the unmask plan going back once every survivor revealed.

#include <doctest/doctest.h>

#include <map>
#include <tuple>

#include "protocol/secagg_participant.hpp"
#include "protocol/server_secagg_flow.hpp"

using namespace fedcaf;
using namespace std::chrono_literals;

namespace {

using phase = server_secagg_flow::phase;

struct trial {
  std::vector<std::tuple<std::chrono::milliseconds, uint32_t, uint32_t>>
      deadlines;
  std::vector<std::pair<std::string, std::string>> sent_away;
  std::vector<std::string> failures;
  std::vector<std::tuple<std::string, std::string, uint32_t>> blamed;
  std::map<std::string, msg::frame> replies;
  std::optional<result<secagg::unmask_plan>> plan;
  std::map<std::string, secagg_participant> clients;
  server_secagg_flow flow;

  explicit trial(uint32_t threshold, std::chrono::milliseconds keys = 0ms)
      : flow{secure_aggregation_config{true, threshold, 1.0, 22, 0},
             true,
             0,
             7,
             secagg_timeouts{keys, 900ms},
             refusal_log{"server", nullptr},
             port()} {}

  secagg_port port() {
    return {
        [this](std::chrono::milliseconds after, uint32_t round, uint32_t p) {
          deadlines.emplace_back(after, round, p);
        },
        [this](const std::string& id, uint32_t round, const std::string& why) {
          CHECK(round == 4);
          sent_away.emplace_back(id, why);
        },
        [this](const std::string& why) { failures.push_back(why); },
        [this](const std::string& id, uint32_t, const std::string& why,
               uint32_t times) { blamed.emplace_back(id, why, times); }};
  }

  void start(const std::set<std::string>& chosen,
             const std::vector<std::string>& reached) {
    for (const auto& id : reached)
      clients.emplace(id, secagg_participant{4, 100});
    flow.start(4, chosen, reached);
  }

  /// Client `id` sends `f`; a held request records its answer.
  std::optional<msg::frame> send(const std::string& id, const msg::frame& f) {
    auto now = flow.receive(id, f);
    if (!now)
      flow.hold(id, [this, id](msg::frame r) { replies[id] = std::move(r); });
    return now;
  }

  void advertise(const std::string& id) {
    CHECK_FALSE(send(id, msg::encode(clients.at(id).keys())));
  }

  /// Client `id` seals its shares for the roster it was answered.
  void share(const std::string& id) {
    auto roster = msg::decode<msg::secagg_roster>(replies.at(id));
    REQUIRE(roster);
    auto shares = clients.at(id).seal_shares(*roster);
    REQUIRE(shares);
    replies.erase(id);
    CHECK_FALSE(send(id, msg::encode(*shares)));
  }
};

/// Round 4 for A..E up to the receipts, where E sealed garbage for all:
/// each client's answer to its receipt.
std::map<std::string, msg::frame> garbage_round(trial& t) {
  std::vector<std::string> all{"A", "B", "C", "D", "E"};
  t.clients.clear();
  t.replies.clear();
  t.start({all.begin(), all.end()}, all);
  for (const auto& id : all)
    t.advertise(id);
  for (const auto& id : all) {
    auto roster = msg::decode<msg::secagg_roster>(t.replies.at(id));
    REQUIRE(roster);
    auto shares = t.clients.at(id).seal_shares(*roster);
    REQUIRE(shares);
    if (id == "E")
      for (auto& sh : shares->shares)
        for (auto& b : sh.sealed)
          b ^= 0x5a;
    t.replies.erase(id);
    CHECK_FALSE(t.send(id, msg::encode(*shares)));
  }
  REQUIRE(t.replies.size() == 5);
  auto relayed = std::move(t.replies);
  t.replies.clear();
  for (auto& [id, f] : relayed) {
    auto receipt =
        t.clients.at(id).receive_shares(*msg::decode<msg::secagg_shares>(f));
    REQUIRE(receipt);
    CHECK(receipt->unopened.size() == (id == "E" ? 0u : 1u));
    CHECK_FALSE(t.send(id, msg::encode(*receipt)));
  }
  return std::move(t.replies);
}

bool refused(const msg::frame& f, errc code) {
  auto e = msg::error_in(f);
  return e && e->code == code;
}

} // namespace

TEST_CASE("server secagg flow: a round from keys to the unmask plan") {
  trial t{3};
  t.start({"A", "B", "C", "D"}, {"A", "B", "C", "D"});
  CHECK(t.deadlines.empty()); // no keys deadline
  for (auto id : {"A", "B", "C"})
    t.advertise(id);
  CHECK(t.replies.empty()); // held until the last one advertised
  CHECK(t.deadlines.empty());
  t.advertise("D");
  REQUIRE(t.replies.size() == 4);
  CHECK(t.flow.current() == phase::shares);
  for (auto id : {"A", "B", "C", "D"})
    t.share(id);
  // The first shares held started the shares phase's deadline.
  REQUIRE(t.deadlines.size() == 1);
  CHECK(t.deadlines[0] ==
        std::tuple{900ms, 4u, static_cast<uint32_t>(phase::shares)});
  REQUIRE(t.replies.size() == 4);
  for (auto& [id, f] : t.replies) {
    auto relayed = msg::decode<msg::secagg_shares>(f);
    REQUIRE(relayed);
    REQUIRE(t.clients.at(id).receive_shares(*relayed));
  }
  std::map<std::string, msg::frame> asks;
  auto ask = [&asks](const std::string& id, msg::frame f) {
    asks[id] = std::move(f);
    return true;
  };
  auto opened = t.flow.open_unmask(
      4, {"A", "B", "C", "D"}, ask,
      [&t](result<secagg::unmask_plan> p) { t.plan = std::move(p); });
  REQUIRE(opened);
  REQUIRE(asks.size() == 4);
  CHECK(std::get<2>(t.deadlines.back()) ==
        static_cast<uint32_t>(phase::unmask));
  for (auto& [id, f] : asks) {
    CHECK_FALSE(t.plan);
    auto request = msg::decode<msg::secagg_unmask>(f);
    REQUIRE(request);
    auto revealed = t.clients.at(id).reveal(*request);
    REQUIRE(revealed);
    auto echo = t.send(id, msg::encode(*revealed));
    REQUIRE(echo); // answered at once
    CHECK(msg::decode<msg::secagg_unmask>(*echo));
  }
  REQUIRE(t.plan);
  REQUIRE(*t.plan);
  CHECK((*t.plan)->contributors == 4);
  CHECK(t.sent_away.empty());
  CHECK(t.failures.empty());
}

TEST_CASE("server secagg flow: at the keys deadline the late leave the round, "
          "each sent away once") {
  trial t{2, 500ms};
  t.start({"A", "B", "C", "D", "E"}, {"A", "B", "C", "D"});
  REQUIRE(t.deadlines.size() == 1);
  CHECK(t.deadlines[0] ==
        std::tuple{500ms, 4u, static_cast<uint32_t>(phase::keys)});
  for (auto id : {"A", "B", "C"})
    t.advertise(id);
  t.flow.expire(3, static_cast<uint32_t>(phase::keys));   // another round's
  t.flow.expire(4, static_cast<uint32_t>(phase::shares)); // not open
  CHECK(t.replies.empty());
  t.flow.expire(4, static_cast<uint32_t>(phase::keys));
  CHECK(t.replies.size() == 3);
  CHECK(t.flow.current() == phase::shares);
  CHECK(t.sent_away == std::vector<std::pair<std::string, std::string>>{
                           {"D", "left the secure aggregation setup"},
                           {"E", "missed the secure aggregation keys phase"}});
  // D, late, is refused: it sits this round out.
  auto late = t.send("D", msg::encode(t.clients.at("D").keys()));
  REQUIRE(late);
  CHECK(msg::error_in(*late));
  // At the shares deadline, C (which did not share) leaves as well.
  t.share("A");
  t.share("B");
  t.flow.expire(4, static_cast<uint32_t>(phase::shares));
  CHECK(t.replies.size() == 3); // A's and B's relays, C's roster kept
  CHECK(t.sent_away.back() == std::pair<std::string, std::string>{
                                  "C", "left the secure aggregation setup"});
}

TEST_CASE("server secagg flow: too few clients for the threshold end the "
          "run") {
  trial t{3};
  t.start({"A", "B", "C", "D"}, {"A", "B", "C", "D"});
  t.advertise("A");
  t.advertise("B");
  t.flow.lost("C");
  CHECK(t.failures.empty());
  t.flow.lost("D"); // the keys phase is complete: two of threshold 3
  REQUIRE(t.failures.size() == 1);
  CHECK(t.failures[0].rfind("round 4: ", 0) == 0);
  REQUIRE(t.replies.size() == 2);
  for (auto& [id, f] : t.replies)
    CHECK(msg::error_in(f));
}

TEST_CASE("server secagg flow: a lost client's held request is dropped; "
          "the lost leave the round") {
  trial t{2};
  t.start({"A", "B", "C", "D"}, {"A", "B", "C", "D"});
  t.advertise("A");
  t.flow.lost("A"); // after advertising
  t.flow.lost("C"); // before
  t.advertise("B");
  t.advertise("D");
  CHECK(t.replies.count("A") == 0);
  CHECK(t.replies.size() == 2);
  CHECK(t.sent_away == std::vector<std::pair<std::string, std::string>>{
                           {"C", "left the secure aggregation setup"},
                           {"A", "missed the secure aggregation keys phase"}});
}

TEST_CASE("server secagg flow: refusals are error frames, nothing held") {
  trial t{2};
  t.start({"A", "B"}, {"A", "B"});
  auto junk = t.send("A", msg::frame(40, 'x'));
  REQUIRE(junk);
  CHECK(msg::error_in(*junk));
  auto hello = t.send("A", msg::encode(msg::hello{"A", ""}));
  REQUIRE(hello);
  CHECK(refused(*hello, errc::unexpected_message));
  CHECK(msg::error_in(*hello)->message == "A: not a frame a client sends");
  t.advertise("A");
  auto again = t.send("A", msg::encode(t.clients.at("A").keys()));
  REQUIRE(again); // advertised twice
  CHECK(msg::error_in(*again));
  CHECK(t.replies.empty());
}

TEST_CASE("server secagg flow: unmask for another round fails; an "
          "unreachable survivor counts as lost") {
  trial t{2};
  t.start({"A", "B", "C"}, {"A", "B", "C"});
  for (auto id : {"A", "B", "C"})
    t.advertise(id);
  for (auto id : {"A", "B", "C"})
    t.share(id);
  for (auto& [id, f] : t.replies)
    REQUIRE(
        t.clients.at(id).receive_shares(*msg::decode<msg::secagg_shares>(f)));
  auto none = [](const std::string&, msg::frame) { return true; };
  auto wrong = t.flow.open_unmask(3, {"A", "B", "C"}, none, nullptr);
  REQUIRE_FALSE(wrong);
  CHECK(wrong.err().code == errc::wrong_round);
  CHECK(wrong.err().message == "no secure aggregation round 3");
  std::map<std::string, msg::frame> asks;
  auto ask = [&asks](const std::string& id, msg::frame f) {
    if (id == "C")
      return false; // gone
    asks[id] = std::move(f);
    return true;
  };
  REQUIRE(t.flow.open_unmask(
      4, {"A", "B"}, ask,
      [&t](result<secagg::unmask_plan> p) { t.plan = std::move(p); }));
  for (auto& [id, f] : asks)
    REQUIRE(t.send(id, msg::encode(*t.clients.at(id).reveal(
                           *msg::decode<msg::secagg_unmask>(f)))));
  REQUIRE(t.plan);
  REQUIRE(*t.plan);
  CHECK((*t.plan)->contributors == 2);
}

TEST_CASE("server secagg flow: a client whose shares do not open is excluded "
          "before anyone masks, and named; the others unmask without it") {
  trial t{3};
  auto answers = garbage_round(t);
  REQUIRE(answers.size() == 5);
  CHECK(refused(answers.at("E"), errc::not_in_round));
  REQUIRE(t.blamed.size() == 1);
  CHECK(std::get<0>(t.blamed[0]) == "E");
  CHECK(std::get<1>(t.blamed[0]) ==
        "sealed shares that did not open for A, B, C, D");
  CHECK(std::get<2>(t.blamed[0]) == 1);
  CHECK(std::count_if(t.sent_away.begin(), t.sent_away.end(),
                      [](const auto& s) { return s.first == "E"; }) == 1);
  for (auto id : {"A", "B", "C", "D"}) {
    auto a = msg::decode<msg::secagg_receipt>(answers.at(id));
    REQUIRE(a);
    REQUIRE(a->excluded.size() == 1); // E's index, not masked against
    REQUIRE(t.clients.at(id).settle(*a));
  }
  // A server that keeps E for A is refused by A (E's share did not open).
  msg::secagg_receipt keeps{4, {}, {}};
  CHECK_FALSE(t.clients.at("A").settle(keeps));

  std::map<std::string, msg::frame> asks;
  auto ask = [&asks](const std::string& id, msg::frame f) {
    asks[id] = std::move(f);
    return true;
  };
  REQUIRE(t.flow.open_unmask(
      4, {"A", "B", "C", "D"}, ask,
      [&t](result<secagg::unmask_plan> p) { t.plan = std::move(p); }));
  REQUIRE(asks.size() == 4);
  for (auto& [id, f] : asks) {
    auto request = msg::decode<msg::secagg_unmask>(f);
    REQUIRE(request);
    CHECK(request->dropped.empty()); // nobody masked against E
    auto revealed = t.clients.at(id).reveal(*request);
    REQUIRE(revealed);
    REQUIRE(t.send(id, msg::encode(*revealed)));
  }
  REQUIRE(t.plan);
  REQUIRE(*t.plan);
  CHECK((*t.plan)->contributors == 4);
  CHECK((*t.plan)->pairwise.empty());

  // The same lie again: excluded a second time (the server drops it).
  garbage_round(t);
  REQUIRE(t.blamed.size() == 2);
  CHECK(std::get<0>(t.blamed[1]) == "E");
  CHECK(std::get<2>(t.blamed[1]) == 2);
}

TEST_CASE("secagg share complaints: a client disputed by most of its "
          "neighbours is the culprit; word against word takes out all, "
          "unnamed") {
  auto each = [](uint32_t n) { // every client neighbours every other
    std::map<uint32_t, size_t> k;
    for (uint32_t i = 0; i < n; ++i)
      k[i] = n - 1;
    return k;
  };
  // 0..3 all complain of 4.
  auto all_against_one =
      judge_share_complaints({{0, {4}}, {1, {4}}, {2, {4}}, {3, {4}}}, each(5));
  CHECK(all_against_one.culprits == std::set<uint32_t>{4});
  CHECK(all_against_one.unsure.empty());
  // A client that says everyone's shares failed it.
  auto one_against_all = judge_share_complaints({{2, {0, 1, 3, 4}}}, each(5));
  CHECK(one_against_all.culprits == std::set<uint32_t>{2});
  CHECK(one_against_all.unsure.empty());
  // Two liars among six, one of them also complaining.
  auto two = judge_share_complaints(
      {{0, {4, 5}}, {1, {4, 5}}, {2, {4, 5}}, {3, {4}}, {4, {0, 1}}}, each(6));
  CHECK(two.culprits == std::set<uint32_t>{4, 5});
  CHECK(two.unsure.empty());
  // Two colluders framing an honest client: 2 of its 4 neighbours are no
  // majority; the three sit out, nobody is named.
  auto framed = judge_share_complaints({{3, {0}}, {4, {0}}}, each(5));
  CHECK(framed.culprits.empty());
  CHECK(framed.unsure == std::set<uint32_t>{0, 3, 4});
  // One disputed pair: nobody can tell who lies.
  auto pair = judge_share_complaints({{1, {3}}}, each(5));
  CHECK(pair.culprits.empty());
  CHECK(pair.unsure == std::set<uint32_t>{1, 3});
  CHECK(judge_share_complaints({}, each(5)).culprits.empty());
}
