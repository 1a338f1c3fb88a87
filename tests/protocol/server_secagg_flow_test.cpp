// The server's SecAgg+ flow with real participants' frames and recording
// callbacks in place of the actor's promises, timers and sends: requests
// held until their phase ends, the deadlines it asks for, the clients it
// sends away (once), a failed keys phase ending the run, refusals as error
// frames, and the unmask plan going back once every survivor revealed.

#include <doctest/doctest.h>

#include <functional>
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

/// What a test does to a client's sealed shares before they go.
using tamper_fn = std::function<void(const std::string& id, msg::secagg_shares&,
                                     const msg::secagg_roster&)>;

/// Round 4 for A..E up to the shares relayed (t.replies): each client's
/// index.
std::map<std::string, uint32_t> share_round(trial& t,
                                            const tamper_fn& tamper = {}) {
  std::vector<std::string> all{"A", "B", "C", "D", "E"};
  t.clients.clear();
  t.replies.clear();
  t.start({all.begin(), all.end()}, all);
  for (const auto& id : all)
    t.advertise(id);
  std::map<std::string, uint32_t> index;
  for (const auto& id : all) {
    auto roster = msg::decode<msg::secagg_roster>(t.replies.at(id));
    REQUIRE(roster);
    index[id] = roster->index;
    auto shares = t.clients.at(id).seal_shares(*roster);
    REQUIRE(shares);
    if (tamper)
      tamper(id, *shares, *roster);
    t.replies.erase(id);
    CHECK_FALSE(t.send(id, msg::encode(*shares)));
  }
  REQUIRE(t.replies.size() == 5);
  return index;
}

/// Round 4 for A..E up to the receipts, where E sealed garbage for all
/// (`garbage`) and `accuser` says the shares of `accused` did not open:
/// each client's answer to its receipt (a dispute for a client accused).
std::map<std::string, msg::frame>
receipts_round(trial& t, bool garbage, const std::string& accuser = "",
               const std::vector<std::string>& accused = {}) {
  auto index = share_round(t, [garbage](const std::string& id,
                                        msg::secagg_shares& shares,
                                        const msg::secagg_roster&) {
    if (garbage && id == "E")
      for (auto& sh : shares.shares)
        for (auto& b : sh.sealed)
          b ^= 0x5a;
  });
  auto relayed = std::move(t.replies);
  t.replies.clear();
  for (auto& [id, f] : relayed) {
    auto receipt =
        t.clients.at(id).receive_shares(*msg::decode<msg::secagg_shares>(f));
    REQUIRE(receipt);
    CHECK(receipt->unopened.size() == (garbage && id != "E" ? 1u : 0u));
    if (id == accuser)
      for (const auto& a : accused)
        receipt->unopened.push_back(index.at(a));
    CHECK_FALSE(t.send(id, msg::encode(*receipt)));
  }
  return std::move(t.replies);
}

/// The clients disputed answer with their defences (all but `silent`);
/// returns every client's answer to its receipt.
std::map<std::string, msg::frame>
defend(trial& t, std::map<std::string, msg::frame> disputes,
       const std::string& silent = "") {
  t.replies.clear();
  for (auto& [id, f] : disputes) {
    auto d = msg::decode<msg::secagg_receipt>(f);
    REQUIRE(d);
    REQUIRE_FALSE(d->disputed.empty());
    if (id == silent)
      continue;
    auto defence = t.clients.at(id).defend(*d);
    REQUIRE(defence);
    CHECK(defence->share_secrets.size() == d->disputed.size());
    CHECK_FALSE(t.send(id, msg::encode(*defence)));
  }
  return std::move(t.replies);
}

/// Round 4 for A..E, where E sealed garbage for all: each client's answer.
std::map<std::string, msg::frame> garbage_round(trial& t) {
  auto disputes = receipts_round(t, true);
  REQUIRE(disputes.size() == 1); // only E is disputed, the others wait
  REQUIRE(disputes.count("E"));
  CHECK(t.flow.current() == phase::disputes);
  auto answers = defend(t, disputes);
  answers.insert(disputes.begin(), disputes.end());
  answers.erase("E");
  CHECK(t.flow.current() == phase::upload);
  return answers;
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

TEST_CASE("server secagg flow: a lost client's held request is dropped, "
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

TEST_CASE("server secagg flow: unmask for another round fails, an "
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

TEST_CASE("server secagg flow: a client whose shares do not open is asked "
          "for their keys, excluded before anyone masks, and named, the "
          "others unmask without it") {
  trial t{3};
  auto answers = garbage_round(t);
  REQUIRE(answers.size() == 4);
  REQUIRE(t.blamed.size() == 1);
  CHECK(std::get<0>(t.blamed[0]) == "E");
  // Two of its four accusers' complaints are put to it (threshold - 1).
  auto why = std::get<1>(t.blamed[0]);
  CHECK(why.find("sealed ") == 0);
  CHECK(why.find(" a share that does not open under the key it revealed "
                 "(and 1 more such)") != std::string::npos);
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
  msg::secagg_receipt keeps{4, {}, {}, {}, {}};
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

TEST_CASE("server secagg flow: a receipt that lies is resolved by the "
          "share itself: the accuser is named and excluded, the accused "
          "stay") {
  trial t{3};
  // A says B's and C's shares did not open (they did).
  auto disputes = receipts_round(t, false, "A", {"B", "C"});
  REQUIRE(disputes.size() == 2);
  for (auto id : {"B", "C"}) {
    auto d = msg::decode<msg::secagg_receipt>(disputes.at(id));
    REQUIRE(d);
    CHECK(d->disputed.size() == 1); // A's index
    CHECK(d->excluded.empty());
  }
  auto answers = defend(t, disputes);
  answers.insert(disputes.begin(), disputes.end());
  REQUIRE(t.blamed.size() == 1);
  CHECK(std::get<0>(t.blamed[0]) == "A");
  CHECK(std::get<1>(t.blamed[0]) ==
        "said that B's share did not open for it; revealed, its key opens it "
        "(and 1 more such)");
  CHECK(refused(answers.at("A"), errc::not_in_round));
  // B and C's answers to their defences: excluded A only.
  for (auto id : {"B", "C", "D", "E"}) {
    auto a = msg::decode<msg::secagg_receipt>(answers.at(id));
    REQUIRE(a);
    CHECK(a->excluded.size() == 1);
    CHECK(a->disputed.empty());
    CHECK(t.clients.at(id).settle(*a));
  }
}

TEST_CASE("server secagg flow: complaints past threshold - 1 against one "
          "client are not put to it, a silent accused client is named") {
  // A and C frame E: with threshold 2 one complaint is put to E, shown
  // false (its accuser named); the other accuser sits out unnamed.
  trial u{2};
  auto index = share_round(u);
  auto relayed = std::move(u.replies);
  u.replies.clear();
  for (auto& [id, f] : relayed) {
    auto receipt =
        u.clients.at(id).receive_shares(*msg::decode<msg::secagg_shares>(f));
    REQUIRE(receipt);
    if (id == "A" || id == "C")
      receipt->unopened.push_back(index.at("E"));
    CHECK_FALSE(u.send(id, msg::encode(*receipt)));
  }
  auto framed = std::move(u.replies);
  REQUIRE(framed.size() == 1);
  auto d = msg::decode<msg::secagg_receipt>(framed.at("E"));
  REQUIRE(d);
  CHECK(d->disputed.size() == 1); // threshold - 1
  auto answers = defend(u, framed);
  REQUIRE(u.blamed.size() == 1); // the accuser asked about
  auto liar = std::get<0>(u.blamed[0]);
  CHECK((liar == "A" || liar == "C"));
  CHECK(u.failures.empty());
  // E masks on: its answer excludes the two accusers.
  auto a = msg::decode<msg::secagg_receipt>(answers.at("E"));
  REQUIRE(a);
  CHECK(a->excluded.size() == 2);
  CHECK(refused(answers.at("A"), errc::not_in_round));
  CHECK(refused(answers.at("C"), errc::not_in_round));
  CHECK(msg::decode<msg::secagg_receipt>(answers.at("B")));

  // A disputed client that does not answer by the deadline is named.
  trial w{3};
  auto silent = receipts_round(w, false, "A", {"B"});
  REQUIRE(silent.size() == 1);
  auto rest = defend(w, silent, "B");
  CHECK(rest.empty()); // the others wait for B
  REQUIRE_FALSE(w.deadlines.empty());
  CHECK(std::get<2>(w.deadlines.back()) ==
        static_cast<uint32_t>(phase::disputes));
  w.flow.expire(4, static_cast<uint32_t>(phase::disputes));
  REQUIRE(w.blamed.size() == 1);
  CHECK(std::get<0>(w.blamed[0]) == "B");
  CHECK(std::get<1>(w.blamed[0]) ==
        "did not reveal the key of its share for A, which said it did not "
        "open");
}

TEST_CASE("secagg shares: a share's revealed secret opens that share and no "
          "other of its sender's") {
  auto recipient = secagg::generate_key_pair();
  auto other = secagg::generate_key_pair();
  secagg::share_payload p{1, 2, 3, {}, {}};
  p.mask_key_share[0] = 9;
  auto to_2 = seal_share(p, recipient.public_key, 4);
  auto to_5 = seal_share({1, 5, 4, {}, {}}, other.public_key, 4);
  REQUIRE(to_2);
  REQUIRE(to_5);
  REQUIRE(to_2->sealed.size() == msg::sealed_share_bytes);
  CHECK(share_public_key(to_2->sealed) == secagg::public_key_of(to_2->secret));
  // The recipient opens it with its own secret, the server with the
  // share's revealed secret: the same payload.
  auto mine = open_share(recipient.secret, share_public_key(to_2->sealed),
                         to_2->sealed, 4, 1, 2);
  auto shown =
      open_share(to_2->secret, recipient.public_key, to_2->sealed, 4, 1, 2);
  REQUIRE(mine);
  REQUIRE(shown);
  CHECK(shown->mask_key_share[0] == 9);
  // That secret opens neither the sender's share for another client nor
  // this share as another pair's or round's.
  CHECK_FALSE(
      open_share(to_2->secret, other.public_key, to_5->sealed, 4, 1, 5));
  CHECK_FALSE(
      open_share(to_2->secret, recipient.public_key, to_2->sealed, 5, 1, 2));
  CHECK_FALSE(
      open_share(to_2->secret, recipient.public_key, to_2->sealed, 4, 1, 3));
}

TEST_CASE("server secagg flow: a client lost after its receipt and falsely "
          "accused leaves unnamed, the disputes do not wait for it") {
  trial t{3};
  auto index = share_round(t);
  auto relayed = std::move(t.replies);
  t.replies.clear();
  // B sends its receipt, then its connection drops; A says B's share did
  // not open.
  for (auto id : {"B", "A", "C", "D", "E"}) {
    auto receipt = t.clients.at(id).receive_shares(
        *msg::decode<msg::secagg_shares>(relayed.at(id)));
    REQUIRE(receipt);
    if (std::string{id} == "A")
      receipt->unopened.push_back(index.at("B"));
    CHECK_FALSE(t.send(id, msg::encode(*receipt)));
    if (std::string{id} == "B")
      t.flow.lost("B");
  }
  CHECK(t.flow.current() == phase::upload); // nobody left to dispute
  CHECK(t.blamed.empty());
  REQUIRE(t.replies.size() == 4);
  for (auto& [id, f] : t.replies) {
    auto a = msg::decode<msg::secagg_receipt>(f);
    REQUIRE(a);
    CHECK(a->excluded == std::vector<uint32_t>{index.at("B")});
    CHECK(t.clients.at(id).settle(*a));
  }
}

TEST_CASE("server secagg flow: a dealer of wrong shares (they open, but no "
          "threshold of them gives its commitment) fails the round and is "
          "blamed, counted") {
  trial t{3};
  share_round(t, [](const std::string& id, msg::secagg_shares& s,
                    const msg::secagg_roster& r) {
    if (id != "E")
      return;
    s.shares.clear();
    uint8_t x = 1;
    for (const auto& peer : r.neighbours) {
      secagg::share_payload p{r.index, peer.index, x++, secagg::random_seed(),
                              secagg::random_seed()};
      auto sealed = seal_share(p, peer.share_key, 4);
      REQUIRE(sealed);
      s.shares.push_back({peer.index, sealed->sealed});
    }
  });
  auto relayed = std::move(t.replies);
  t.replies.clear();
  for (auto& [id, f] : relayed) {
    auto receipt =
        t.clients.at(id).receive_shares(*msg::decode<msg::secagg_shares>(f));
    REQUIRE(receipt);
    CHECK(receipt->unopened.empty()); // every share opened
    CHECK_FALSE(t.send(id, msg::encode(*receipt)));
  }
  REQUIRE(t.flow.current() == phase::upload);
  for (auto& [id, f] : t.replies)
    REQUIRE(t.clients.at(id).settle(*msg::decode<msg::secagg_receipt>(f)));
  std::map<std::string, msg::frame> asks;
  auto ask = [&asks](const std::string& id, msg::frame f) {
    asks[id] = std::move(f);
    return true;
  };
  REQUIRE(t.flow.open_unmask(
      4, {"A", "B", "C", "D", "E"}, ask,
      [&t](result<secagg::unmask_plan> p) { t.plan = std::move(p); }));
  for (auto& [id, f] : asks) {
    auto revealed =
        t.clients.at(id).reveal(*msg::decode<msg::secagg_unmask>(f));
    REQUIRE(revealed);
    t.send(id, msg::encode(*revealed));
  }
  REQUIRE(t.plan);
  CHECK_FALSE(*t.plan); // the round cannot unmask
  // 5 shares, threshold 3: every 3-subset tried, and 3 honest holders
  // among 5 if fewer than 3 lie: E dealt them wrong.
  REQUIRE(t.blamed.size() == 1);
  CHECK(std::get<0>(t.blamed[0]) == "E");
  CHECK(std::get<1>(t.blamed[0]) ==
        "dealt shares of its self seed from which no 3 of 5 revealed give "
        "what it committed to");
  CHECK(std::get<2>(t.blamed[0]) == 1);
}
