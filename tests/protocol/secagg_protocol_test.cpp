// One SecAgg+ round between the server's coordinator and the clients'
// participants, frames encoded and decoded as on the wire, masked chunks
// summed in the ring: the unmasked sum equals FedAvg of the clients whose
// updates are in it, within the quantizer's bound; clients lost at each
// phase, refusals of shares for others and of reveals not asked for.

#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <map>
#include <random>

#include "protocol/secagg_coordinator.hpp"
#include "protocol/secagg_participant.hpp"

using namespace fedcaf;

namespace {

/// A frame's trip over the wire: encoded, decoded.
template <class T> T wire(const T& x) {
  auto back = msg::decode<T>(msg::encode(x));
  REQUIRE(back);
  return *back;
}

struct trial {
  secure_aggregation_config cfg{true, 3, 1.0, 22, 6};
  secagg_coordinator server{cfg, true, 0, 11};
  std::map<std::string, secagg_participant> clients;
  std::map<std::string, std::vector<float>> updates;
  std::map<std::string, double> weights;
  std::map<std::string, uint32_t> index; ///< as the roster gave it
  size_t elements = 70001;
  std::vector<uint32_t> seen;

  explicit trial(uint32_t n, uint32_t threshold = 3)
      : cfg{true, threshold, 1.0, 22, 6}, server{cfg, true, 0, 11} {
    std::vector<std::string> ids;
    std::mt19937 rng{3};
    std::uniform_real_distribution<float> value{-0.9f, 0.9f};
    for (uint32_t i = 0; i < n; ++i) {
      auto id = "Client" + std::to_string(i + 1);
      ids.push_back(id);
      clients.emplace(id, secagg_participant{4, 100 + 50 * i});
      auto& u = updates[id];
      u.resize(elements);
      for (auto& x : u)
        x = value(rng);
    }
    server.start(4, ids);
  }

  void advertise(const std::set<std::string>& except = {}) {
    for (auto& [id, c] : clients)
      if (!except.count(id))
        REQUIRE(server.advertise(id, wire(c.keys())));
  }

  std::map<std::string, msg::secagg_shares> share() {
    auto rosters = server.close_keys();
    REQUIRE(rosters);
    std::map<std::string, msg::secagg_shares> sent;
    for (auto& [id, r] : *rosters) {
      weights[id] = r.weight;
      index[id] = r.index;
      auto s = clients.at(id).seal_shares(wire(r));
      REQUIRE(s);
      sent[id] = wire(*s);
    }
    return sent;
  }

  /// Every client advertises and shares; every relay is taken.
  void setup() {
    advertise();
    for (auto& [id, s] : share())
      REQUIRE(server.submit_shares(id, s));
    for (auto& [id, r] : server.close_shares())
      REQUIRE(clients.at(id).receive_shares(r));
  }

  /// The uploads of `ids`, chunk by chunk, into the ring sum.
  std::vector<uint32_t> upload(const std::set<std::string>& ids, size_t chunk) {
    std::vector<uint32_t> sum(elements, 0);
    for (const auto& id : ids)
      for (size_t at = 0; at < elements; at += chunk) {
        auto len = std::min(chunk, elements - at);
        std::vector<uint32_t> out(len);
        clients.at(id).mask(at, std::span{updates[id]}.subspan(at, len), out);
        for (size_t i = 0; i < len; ++i)
          sum[at + i] += out[i];
        if (id == "Client1") // what the server receives of Client1
          seen.insert(seen.end(), out.begin(), out.end());
      }
    return sum;
  }

  /// Opens the unmask phase for `in_sum`: every client asked reveals (its
  /// answer passed through `tamper` first), and the server closes it.
  result<secagg::unmask_plan>
  unmask(const std::set<std::string>& in_sum,
         const std::function<void(const std::string&, msg::secagg_unmask&)>&
             tamper = {}) {
    auto asks = server.open_unmask(in_sum);
    REQUIRE(asks);
    for (auto& [id, ask] : *asks) {
      auto r = clients.at(id).reveal(ask);
      REQUIRE(r);
      if (tamper)
        tamper(id, *r);
      REQUIRE(server.reveal(id, *r));
    }
    return server.close_unmask();
  }

  /// max |unmasked mean - FedAvg of `ids`|, and the bound.
  std::pair<double, double> compare(std::vector<uint32_t>& sum,
                                    const secagg::unmask_plan& plan,
                                    const std::set<std::string>& ids) {
    auto q = server.quantizer();
    std::vector<float> mean(elements);
    for (size_t at = 0; at < elements; at += 4096) {
      auto len = std::min<size_t>(4096, elements - at);
      secagg::unmask_chunk(q, plan, at, std::span{sum}.subspan(at, len),
                           std::span{mean}.subspan(at, len));
    }
    double total = 0, worst = 0;
    for (const auto& id : ids)
      total += weights[id];
    for (size_t i = 0; i < elements; ++i) {
      double exact = 0;
      for (const auto& id : ids)
        exact += weights[id] / total * updates[id][i];
      worst = std::max(worst, std::abs(mean[i] - exact));
    }
    return {worst, q.error_bound(plan.contributors, plan.weight_total)};
  }
};

} // namespace

TEST_CASE("secagg protocol: clients lost before keys, after sharing and "
          "mid-upload, the unmasked sum is FedAvg of the rest") {
  trial t{8};
  // Client8 never advertises: it leaves before the graph is drawn.
  t.advertise({"Client8"});
  REQUIRE(t.server.keys_complete() == false);
  t.server.lost("Client8");
  REQUIRE(t.server.keys_complete());
  auto sent = t.share();
  // Client7 is lost before it shares: nobody masks against it.
  sent.erase("Client7");
  for (auto& [id, s] : sent)
    REQUIRE(t.server.submit_shares(id, s));
  CHECK_FALSE(t.server.shares_complete()); // waits for Client7
  t.server.lost("Client7");
  CHECK(t.server.shares_complete()); // not until the deadline
  auto relays = t.server.close_shares();
  CHECK(relays.count("Client7") == 0);
  for (auto& [id, r] : relays)
    REQUIRE(t.clients.at(id).receive_shares(wire(r)));
  // Client6 shared, then was lost mid-upload: its partial upload is
  // discarded (the others' sum is collected again), so the sum holds
  // Client1..5.
  std::set<std::string> in_sum{"Client1", "Client2", "Client3", "Client4",
                               "Client5"};
  auto sum = t.upload(in_sum, 1000);
  auto asks = t.server.open_unmask(in_sum);
  REQUIRE(asks);
  for (auto& [id, ask] : *asks) {
    auto r = t.clients.at(id).reveal(wire(ask));
    REQUIRE(r);
    REQUIRE(t.server.reveal(id, wire(*r)));
  }
  REQUIRE(t.server.unmask_complete());
  auto plan = t.server.close_unmask();
  if (!plan)
    FAIL(to_string(plan.err()));
  CHECK(plan->contributors == 5);
  CHECK_FALSE(plan->pairwise.empty()); // Client6's masks came off
  auto [worst, bound] = t.compare(sum, *plan, in_sum);
  CHECK(worst <= bound + 1e-7);
  // Every value the server received from Client1 (its masked chunks) is
  // indistinguishable from uniform: chi-squared over the top 8 bits below
  // 360 (255 degrees of freedom: p = 2e-5 for uniform values); its quantized
  // update, unmasked, is far from it.
  auto chi2 = [](const std::vector<uint32_t>& v) {
    std::vector<double> bins(256);
    for (auto x : v)
      ++bins[x >> 24];
    double expected = static_cast<double>(v.size()) / 256, c = 0;
    for (auto b : bins)
      c += (b - expected) * (b - expected) / expected;
    return c;
  };
  std::vector<uint32_t> plain(t.elements);
  t.server.quantizer().quantize(t.updates["Client1"], t.weights["Client1"],
                                plain);
  CHECK(t.seen.size() == t.elements);
  CHECK(chi2(t.seen) < 360);
  CHECK(chi2(plain) > 10000);
  MESSAGE("chi-squared of what the server saw ", chi2(t.seen),
          ", of the quantized update ", chi2(plain));
  MESSAGE("worst ", worst, " bound ", bound);
}

TEST_CASE("secagg protocol: refusals name the client and what it did") {
  trial t{5};
  t.advertise();
  CHECK_FALSE(t.server.advertise("Client1", t.clients.at("Client1").keys()));
  auto sent = t.share();
  // A share addressed to a client that is not the sender's neighbour, or
  // twice to one: refused, naming the sender.
  auto bad = sent["Client1"];
  bad.shares[0].peer = 99;
  auto r = t.server.submit_shares("Client1", bad);
  REQUIRE_FALSE(r);
  CHECK(r.err().code == errc::not_authorized);
  CHECK(r.err().message.find("Client1 sealed a share for client 99") !=
        std::string::npos);
  bad = sent["Client1"];
  bad.shares[1].peer = bad.shares[0].peer;
  CHECK_FALSE(t.server.submit_shares("Client1", bad));
  for (auto& [id, s] : sent)
    REQUIRE(t.server.submit_shares(id, s));
  CHECK_FALSE(t.server.submit_shares("Client2", sent["Client2"])); // twice
  auto relays = t.server.close_shares();
  // A relay that swaps two senders' shares does not open at the client:
  // neither is held (both named), and the client goes on.
  auto swapped = relays["Client1"];
  std::swap(swapped.shares[0].sealed, swapped.shares[1].sealed);
  REQUIRE(t.clients.at("Client1").receive_shares(swapped));
  CHECK(t.clients.at("Client1").unopened().size() == 2);
  for (auto& [id, rr] : relays)
    REQUIRE(t.clients.at(id).receive_shares(rr));
  // A client refuses to reveal both secrets of one neighbour.
  msg::secagg_unmask greedy{4, {1}, {1}, {}, {}};
  auto both = t.clients.at("Client1").reveal(greedy);
  REQUIRE_FALSE(both);
  CHECK(both.err().message.find("both secrets") != std::string::npos);
  std::set<std::string> all{"Client1", "Client2", "Client3", "Client4",
                            "Client5"};
  auto asks = t.server.open_unmask(all);
  REQUIRE(asks);
  // A reveal of a share not asked for (a mask key of a client in the sum).
  auto honest = t.clients.at("Client2").reveal((*asks)["Client2"]);
  REQUIRE(honest);
  auto wrong = *honest;
  std::swap(wrong.self_seed_shares, wrong.mask_key_shares);
  auto refused = t.server.reveal("Client2", wrong);
  REQUIRE_FALSE(refused);
  CHECK(refused.err().code == errc::not_authorized);
}

TEST_CASE("secagg protocol: a survivor revealing a wrong share of a lost "
          "client's mask key is caught, not folded into the model") {
  trial t{5};
  t.setup();
  std::set<std::string> in_sum{"Client1", "Client2", "Client3", "Client4"};
  auto asks = t.server.open_unmask(in_sum);
  REQUIRE(asks);
  for (auto& [id, ask] : *asks) {
    auto r = t.clients.at(id).reveal(ask);
    REQUIRE(r);
    for (auto& sh : r->mask_key_shares) // every survivor lies about Client5
      sh.y[5] ^= 0x10; // (bits X25519 clamps away would go unseen)
    REQUIRE(t.server.reveal(id, *r));
  }
  auto plan = t.server.close_unmask();
  REQUIRE_FALSE(plan);
  CHECK(plan.err().message.find("Client5's mask key") != std::string::npos);
}

TEST_CASE("secagg protocol: a client's garbage share does not fail its "
          "neighbour, and the others' shares still unmask it") {
  trial t{5};
  t.advertise();
  auto sent = t.share();
  // Client2 seals garbage for one neighbour (the server cannot tell).
  auto& bad = sent.at("Client2").shares.at(0);
  for (auto& b : bad.sealed)
    b ^= 0x5a;
  uint32_t victim = bad.peer;
  for (auto& [id, s] : sent)
    REQUIRE(t.server.submit_shares(id, s));
  std::string victim_id;
  for (auto& [id, r] : t.server.close_shares()) {
    REQUIRE(t.clients.at(id).receive_shares(r)); // nobody fails
    if (t.index.at(id) == victim) {
      victim_id = id;
      REQUIRE(t.clients.at(id).unopened().size() == 1);
      CHECK(t.clients.at(id).unopened()[0].find("Client2") == 0);
    } else
      CHECK(t.clients.at(id).unopened().empty());
  }
  REQUIRE_FALSE(victim_id.empty());
  std::set<std::string> in_sum{"Client1", "Client2", "Client3", "Client4",
                               "Client5"};
  auto sum = t.upload(in_sum, 777);
  auto plan = t.unmask(in_sum); // the victim skips Client2
  if (!plan)
    FAIL(to_string(plan.err()));
  auto [worst, bound] = t.compare(sum, *plan, in_sum);
  CHECK(worst <= bound + 1e-7);
}

TEST_CASE("secagg protocol: a low-order public key is refused when it is "
          "advertised, naming the client") {
  trial t{3};
  auto keys = t.clients.at("Client1").keys();
  keys.mask_key.fill(0); // the point of order 1 (u = 0)
  auto refused = t.server.advertise("Client1", keys);
  REQUIRE_FALSE(refused);
  CHECK(refused.err().code == errc::malformed_frame);
  CHECK(refused.err().message.find("Client1") != std::string::npos);
}

TEST_CASE("secagg protocol: a survivor revealing a wrong share of another "
          "survivor's self seed is caught by the seed's commitment") {
  trial t{5};
  t.setup();
  std::set<std::string> in_sum{"Client1", "Client2", "Client3", "Client4",
                               "Client5"};
  auto asks = t.server.open_unmask(in_sum);
  REQUIRE(asks);
  for (auto& [id, ask] : *asks) {
    auto r = t.clients.at(id).reveal(ask);
    REQUIRE(r);
    for (auto& sh : r->self_seed_shares) // every survivor lies about Client3
      if (sh.owner == t.index.at("Client3"))
        sh.y[0] ^= 1;
    REQUIRE(t.server.reveal(id, *r));
  }
  auto plan = t.server.close_unmask();
  REQUIRE_FALSE(plan);
  CHECK(plan.err().message.find("Client3's self seed") != std::string::npos);
}

TEST_CASE("secagg protocol: fewer survivors than the threshold fail the "
          "round naming the clients that cannot be unmasked") {
  trial t{4}; // neighbours: all 3 others; threshold 3
  t.setup();
  std::set<std::string> in_sum{"Client1", "Client2"};
  auto asks = t.server.open_unmask(in_sum);
  REQUIRE(asks);
  for (auto& [id, ask] : *asks)
    REQUIRE(t.server.reveal(id, *t.clients.at(id).reveal(ask)));
  auto plan = t.server.close_unmask();
  REQUIRE_FALSE(plan);
  CHECK(plan.err().message.find("too few survivors") != std::string::npos);
  CHECK(plan.err().message.find("Client3") != std::string::npos);
}

TEST_CASE("secagg protocol: a round of two keeps threshold 2 (one share is "
          "never a secret), and a client reveals one secret of a client per "
          "round, whatever the requests") {
  trial short_of{2}; // threshold 3 configured: never lowered to fit 2
  short_of.advertise();
  auto none = short_of.server.close_keys();
  REQUIRE_FALSE(none);
  CHECK(none.err().message.find("needs threshold 3") != std::string::npos);

  trial two{2, 0}; // the default threshold, floor(1 / 2) + 1, raised to 2
  two.advertise();
  auto rosters = two.server.close_keys();
  REQUIRE(rosters);
  for (auto& [id, r] : *rosters)
    CHECK(r.threshold == 2);
  // A roster with threshold 1 is refused by the client.
  auto low = rosters->begin()->second;
  low.threshold = 1;
  auto refused = two.clients.at(rosters->begin()->first).seal_shares(low);
  REQUIRE_FALSE(refused);
  CHECK(refused.err().message.find("threshold 1") != std::string::npos);

  trial t{5};
  t.setup();
  auto c2 = t.index.at("Client2");
  auto& client = t.clients.at("Client1");
  REQUIRE(client.reveal({4, {c2}, {}, {}, {}}));    // Client2's self seed
  REQUIRE(client.reveal({4, {c2}, {}, {}, {}}));    // again: the same secret
  auto both = client.reveal({4, {}, {c2}, {}, {}}); // then its mask key
  REQUIRE_FALSE(both);
  CHECK(both.err().message.find("both secrets") != std::string::npos);
}

TEST_CASE("secagg protocol: with more shares than the threshold, a lying "
          "survivor is outvoted and named, the round goes on") {
  trial t{5}; // threshold 3 of 5 holders
  t.setup();
  std::set<std::string> in_sum{"Client1", "Client2", "Client3", "Client4",
                               "Client5"};
  auto sum = t.upload(in_sum, 1000);
  auto plan = t.unmask(in_sum, [&](const std::string& id, auto& r) {
    if (id == "Client2") // lies about every other client's self seed
      for (auto& sh : r.self_seed_shares)
        if (sh.owner != t.index.at("Client2"))
          sh.y[7] ^= 0x40;
  });
  if (!plan)
    FAIL(to_string(plan.err()));
  auto [worst, bound] = t.compare(sum, *plan, in_sum);
  CHECK(worst <= bound + 1e-7);
  CHECK(t.server.culprits().size() == 4);
  for (const auto& c : t.server.culprits()) {
    CHECK(c.id == "Client2");
    CHECK(c.why.rfind("revealed a wrong share of ", 0) == 0);
  }
}
