// The client's SecAgg+ steps driven against the server's coordinator, the
// frames encoded as on the wire: three clients go from keys to a masked
// update; a client told not_in_round at any step sits out; answers nobody
// asked for and unmask requests without a round are refused.

#include <doctest/doctest.h>

#include <map>
#include <vector>

#include "protocol/client_secagg_flow.hpp"
#include "protocol/secagg_coordinator.hpp"

using namespace fedcaf;

namespace {

template <class T> T decoded(const msg::frame& f) {
  auto x = msg::decode<T>(f);
  REQUIRE(x);
  return *x;
}

struct trio {
  secure_aggregation_config cfg{true, 2, 1.0, 22, 0};
  secagg_coordinator server{cfg, true, 0, 11};
  std::map<std::string, client_secagg_flow> clients;

  trio() {
    std::vector<std::string> ids{"Client1", "Client2", "Client3"};
    server.start(4, ids);
    for (const auto& id : ids) {
      auto keys = clients[id].start(4, 100);
      REQUIRE(server.advertise(id, decoded<msg::secagg_keys>(keys)));
    }
  }

  /// The roster to each client; returns each client's step.
  std::map<std::string, client_secagg_flow::step> rosters() {
    auto r = server.close_keys();
    REQUIRE(r);
    std::map<std::string, client_secagg_flow::step> out;
    for (auto& [id, roster] : *r) {
      auto s = clients[id].on_reply(msg::encode(roster));
      REQUIRE(s);
      out[id] = std::move(*s);
    }
    return out;
  }
};

} // namespace

TEST_CASE("keys, roster, shares and relayed shares lead to a masked update") {
  trio t;
  for (auto& [id, s] : t.rosters()) {
    CHECK_FALSE(s.sit_out);
    CHECK(std::string{s.what} == "secure aggregation shares");
    REQUIRE_FALSE(s.next.empty());
    REQUIRE(t.server.submit_shares(id, decoded<msg::secagg_shares>(s.next)));
  }
  for (auto& [id, relayed] : t.server.close_shares()) {
    auto s = t.clients[id].on_reply(msg::encode(relayed));
    REQUIRE(s);
    CHECK_FALSE(s->sit_out);
    CHECK(std::string{s->what} == "secure aggregation receipt");
    auto receipt = decoded<msg::secagg_receipt>(s->next);
    CHECK(receipt.unopened.empty()); // every share opened
    CHECK(s->warnings.empty());
    REQUIRE(t.server.submit_receipt(id, receipt));
  }
  REQUIRE(t.server.receipts_complete());
  CHECK(t.server.close_receipts().empty()); // nobody is disputed
  REQUIRE(t.server.disputes_complete());
  auto answers = t.server.close_disputes();
  REQUIRE(answers);
  for (auto& [id, answer] : *answers) {
    CHECK(answer.excluded.empty());
    auto s = t.clients[id].on_reply(msg::encode(answer));
    REQUIRE(s);
    CHECK_FALSE(s->sit_out);
    CHECK(s->next.empty()); // the masked update goes next
    CHECK(s->note == "round 4: secure aggregation keys and shares exchanged "
                     "with 2 neighbours; sending the masked update");
  }
  std::vector<float> values{0.25f, -0.5f, 0.75f, 100.0f}; // the last clipped
  auto bytes = std::as_writable_bytes(std::span{values});
  auto before = std::vector<std::byte>(bytes.begin(), bytes.end());
  CHECK(t.clients["Client1"].mask_in_place(0, bytes) == 1);
  CHECK_FALSE(std::equal(bytes.begin(), bytes.end(), before.begin()));
  // a further answer is one nobody asked for
  CHECK_FALSE(t.clients["Client1"].on_reply(msg::encode(msg::secagg_shares{})));
}

TEST_CASE("a client told not_in_round sits the round out") {
  trio t;
  auto late = msg::encode(error{errc::not_in_round, "the keys came late"});
  auto s = t.clients["Client2"].on_reply(late);
  REQUIRE(s);
  REQUIRE(s->sit_out);
  CHECK(*s->sit_out == "the keys came late");
  CHECK(s->next.empty());
  // and awaits nothing more this round
  CHECK_FALSE(t.clients["Client2"].on_reply(late));
}

TEST_CASE("other refusals, and answers before a round, are errors") {
  client_secagg_flow idle;
  CHECK_FALSE(idle.on_reply(msg::encode(msg::secagg_roster{})));
  std::vector<float> values{1.0f};
  auto bytes = std::as_writable_bytes(std::span{values});
  CHECK(idle.mask_in_place(0, bytes) == 0); // no round: left as it is
  CHECK(values[0] == 1.0f);
  auto unmask = idle.answer_unmask(msg::encode(msg::secagg_unmask{}));
  REQUIRE_FALSE(unmask);
  CHECK(unmask.err().message == "an unmask request it cannot answer");

  trio t;
  auto refused = t.clients["Client1"].on_reply(
      msg::encode(error{errc::unknown_client, "who?"}));
  REQUIRE_FALSE(refused);
  CHECK(refused.err().code == errc::unknown_client);
}
