// The server's roll of clients driven by hand, connections named by ints:
// admission by places, tokens and certificate names; a lost client coming
// back over a new connection (the old one told), takeovers limited; drops
// only for the loss they were armed for; a dropped client rejoining.

#include <doctest/doctest.h>

#include "protocol/client_registry.hpp"

using namespace fedcaf;

namespace {

using registry = client_registry<int>;

msg::hello hi(const std::string& id, const std::string& token = "") {
  return msg::hello{id, token};
}

/// The time of the calls.
const event_limit::time_point t0 =
    event_limit::time_point{} + std::chrono::hours{1};

/// The refusal's message, or "" iff it was admitted.
template <class R> std::string refusal(const R& r) {
  return r ? std::string{} : r.err().message;
}

} // namespace

TEST_CASE("client registry: new clients take the places in turn") {
  registry r{{{}, false, 2}};
  auto a = r.admit(hi("A"), 1, "", "", false, t0);
  REQUIRE(a);
  CHECK_FALSE(a->resumed);
  CHECK(a->index == 0);
  CHECK(a->from == in_process);
  auto b = r.admit(hi("B"), 2, "10.0.0.2:5000", "", false, t0);
  REQUIRE(b);
  CHECK(b->index == 1);
  CHECK(b->from == "10.0.0.2:5000");
  auto c = r.admit(hi("C"), 3, "", "", false, t0);
  REQUIRE_FALSE(c);
  CHECK(c.err().code == errc::unknown_client);
  CHECK(c.err().message ==
        "C from this process: all 2 client places are taken");
  REQUIRE(r.id_of(2));
  CHECK(*r.id_of(2) == "B");
  CHECK(r.id_of(3) == nullptr);
  CHECK(r.connected_count() == 2);
  CHECK(r.connected_among({"B", "C"}) == std::vector<std::string>{"B"});
}

TEST_CASE("client registry: tokens and certificate names are checked") {
  registry r{{{{"A", "secret-a"}}, true, 4}};
  // An unknown id and a wrong token get one answer.
  auto unknown = r.admit(hi("X", "secret-a"), 1, "h:1", "X", false, t0);
  CHECK(refusal(unknown) == "X from h:1: unknown client id or wrong token");
  CHECK(unknown.err().code == errc::not_authorized);
  auto wrong = r.admit(hi("A", "secret-b"), 1, "h:2", "A", false, t0);
  CHECK(refusal(wrong) == "A from h:2: unknown client id or wrong token");
  CHECK(wrong.err().code == errc::not_authorized);
  CHECK(refusal(r.admit(hi("A", ""), 1, "h:3", "A", false, t0)) ==
        "A from h:3: unknown client id or wrong token");
  CHECK(refusal(r.admit(hi("A", "secret-a-and-more"), 1, "h:4", "A", false,
                        t0)) == "A from h:4: unknown client id or wrong token");
  CHECK(refusal(r.admit(hi("A", "secret-a"), 1, "h:5", "B", false, t0)) ==
        "A from h:5: its client certificate is for 'B'");
  // In this process there is no certificate to check.
  CHECK(r.admit(hi("A", "secret-a"), 1, "", "", false, t0));
}

TEST_CASE("client registry: a lost client resumes over a new connection, "
          "and the old one is told") {
  registry r{{{}, false, 2}};
  REQUIRE(r.admit(hi("A"), 1, "h:1", "", false, t0));
  auto lost = r.lose([](int h) { return h == 1; });
  REQUIRE(lost);
  CHECK(lost->first == "A");
  CHECK(r.connected_count() == 0);
  CHECK(r.active_count() == 1);
  CHECK(r.id_of(1) == nullptr);
  CHECK_FALSE(r.lose([](int h) { return h == 1; })); // once

  auto back = r.admit(hi("A"), 5, "h:2", "", false, t0);
  REQUIRE(back);
  CHECK(back->resumed);
  CHECK(back->index == 0);
  REQUIRE(back->replaced);
  CHECK(*back->replaced == 1);
  REQUIRE(back->notice);
  CHECK(back->notice->message ==
        "another connection took over as A (old connection from h:1)");
  REQUIRE(r.id_of(5));
  CHECK(*r.id_of(5) == "A");
  CHECK(r.find("A")->epoch > lost->second);
}

TEST_CASE("client registry: a stalled remote client registers again on its "
          "connection, nobody takes over a live one unauthenticated") {
  registry r{{{}, false, 2}};
  REQUIRE(r.admit(hi("A"), 1, "h:1", "", false, t0));
  auto again = r.admit(hi("A"), 1, "h:1", "", false, t0);
  REQUIRE(again);
  CHECK(again->resumed);
  CHECK_FALSE(again->replaced);
  CHECK_FALSE(again->notice);
  CHECK(refusal(r.admit(hi("A"), 2, "h:2", "", false, t0)) ==
        "A from h:2: already registered");
  REQUIRE(r.admit(hi("B"), 3, "", "", false, t0));
  CHECK(refusal(r.admit(hi("B"), 3, "", "", false, t0)) ==
        "B from this process: already registered");
}

TEST_CASE("client registry: a client says Hello again after \"already "
          "registered\" (a restarted process), never after the others") {
  registry r{{{}, false, 1}};
  REQUIRE(r.admit(hi("A"), 1, "h:1", "", false, t0));
  auto twice = r.admit(hi("A"), 2, "h:2", "", false, t0);
  REQUIRE_FALSE(twice);
  CHECK(retries_hello(twice.err()));
  auto full = r.admit(hi("B"), 3, "h:3", "", false, t0);
  REQUIRE_FALSE(full);
  CHECK(full.err().code == errc::unknown_client);
  CHECK_FALSE(retries_hello(full.err()));
  auto ended = r.admit(hi("C"), 4, "h:4", "", true, t0);
  REQUIRE_FALSE(ended);
  CHECK_FALSE(retries_hello(ended.err()));
  CHECK(retries_hello(error{errc::too_many_requests, "slow down"}));
  CHECK_FALSE(retries_hello(error{errc::not_authorized, "wrong token"}));
}

TEST_CASE("client registry: takeovers are limited to 8 in 10 s") {
  registry r{{{{"A", "t"}}, false, 2}};
  REQUIRE(r.admit(hi("A", "t"), 0, "h:0", "", false, t0));
  for (int h = 1; h <= 8; ++h)
    REQUIRE(r.admit(hi("A", "t"), h, "h", "", false, t0));
  auto ninth = r.admit(hi("A", "t"), 9, "h", "", false, t0);
  REQUIRE_FALSE(ninth);
  CHECK(ninth.err().code == errc::too_many_requests);
  CHECK(ninth.err().message == "A from h: more than 8 new connections in 10 s");
  // The next period counts again.
  CHECK(
      r.admit(hi("A", "t"), 10, "h", "", false, t0 + std::chrono::seconds{11}));
}

TEST_CASE("client registry: a drop needs the loss it was armed for, a "
          "dropped client rejoins as new at its index") {
  registry r{{{}, false, 1}};
  REQUIRE(r.admit(hi("A"), 1, "", "", false, t0));
  auto lost = r.lose([](int h) { return h == 1; });
  REQUIRE(lost);
  CHECK_FALSE(r.drop("A", lost->second - 1));
  CHECK_FALSE(r.drop("B", lost->second));
  // An AsyncScheduler task's model stays pinned while A is lost, and goes
  // when A is dropped.
  auto pinned = std::make_shared<const model_snapshot>();
  r.find("A")->model = pinned;
  r.find("A")->task = msg::frame(8);
  CHECK(pinned.use_count() == 2);
  CHECK(r.drop("A", lost->second));
  CHECK(pinned.use_count() == 1);
  CHECK(r.find("A")->task.empty());
  CHECK_FALSE(r.drop("A", lost->second)); // once
  CHECK(r.active_count() == 0);
  CHECK(refusal(r.admit(hi("A"), 2, "", "", true, t0)) ==
        "A from this process: the run has ended");
  REQUIRE(r.admit(hi("B"), 3, "", "", false, t0)); // A's place is free
  CHECK(refusal(r.admit(hi("A"), 2, "", "", false, t0)) ==
        "A from this process: all 1 client places are taken");
  r.lose([](int h) { return h == 3; });
  r.drop("B", r.find("B")->epoch);
  auto back = r.admit(hi("A"), 2, "", "", false, t0);
  REQUIRE(back);
  CHECK_FALSE(back->resumed);
  CHECK(back->index == 0);
}

TEST_CASE("client registry: a client that leaves (a goodbye drops it at "
          "once) joins again at most 8 times in 10 s") {
  registry r{{{}, false, 2}};
  int h = 1;
  REQUIRE(r.admit(hi("A"), h, "h", "", false, t0));
  for (int i = 0; i < 8; ++i) { // goodbye, then Hello again: a join
    auto gone = r.lose([h](int x) { return x == h; });
    REQUIRE(gone);
    REQUIRE(r.drop("A", gone->second));
    auto again = r.admit(hi("A"), ++h, "h", "", false, t0);
    REQUIRE(again);
    CHECK_FALSE(again->resumed);
  }
  auto gone = r.lose([h](int x) { return x == h; });
  REQUIRE(gone);
  REQUIRE(r.drop("A", gone->second));
  auto ninth = r.admit(hi("A"), ++h, "h", "", false, t0);
  REQUIRE_FALSE(ninth);
  CHECK(ninth.err().code == errc::too_many_requests);
  CHECK(ninth.err().message == "A from h: more than 8 joins again in 10 s");
  CHECK(r.admit(hi("A"), ++h, "h", "", false, t0 + std::chrono::seconds{11}));
}
