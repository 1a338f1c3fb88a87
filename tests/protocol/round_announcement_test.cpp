// The rounds the server announces: the open round's RoundStart to its
// chosen clients, resends (now, or once a lost client is back), tasks of
// the AsyncScheduler, the final evaluation, and nothing once the run ended.

#include <doctest/doctest.h>

#include <memory>

#include "protocol/round_announcement.hpp"

using namespace fedcaf;

namespace {

snapshot_ptr model(uint64_t version) {
  auto s = std::make_shared<model_snapshot>();
  s->layout.tensors = {make_tensor_info("w", dtype::float32, {64})};
  s->version = version;
  s->bytes = byte_buffer::zeroed(s->layout.total_bytes());
  return s;
}

msg::round_start read(const msg::frame& f) {
  auto rs = msg::decode<msg::round_start>(f);
  REQUIRE(rs);
  return *rs;
}

struct fixture {
  model_exchange exchange{model(5), exchange_terms{}};
  round_announcement rounds{exchange};
};

} // namespace

TEST_CASE("round announcement: a round is announced to its chosen clients") {
  fixture x;
  x.rounds.set_previous(msg::metrics{2, 0.75, 0.5, true});
  auto rs = read(x.rounds.open(3, {"B", "A"}));
  CHECK(rs.round == 3);
  CHECK(rs.model_version == 5);
  CHECK(rs.previous.test_accuracy == 0.75);
  CHECK_FALSE(rs.resend);
  CHECK(x.rounds.round() == 3);
  CHECK(x.rounds.is_open());
  CHECK(x.rounds.chosen() == std::set<std::string>{"A", "B"});
  auto back = x.rounds.again("A", false, nullptr);
  REQUIRE(back);
  CHECK(*back == x.rounds.current());
  CHECK_FALSE(x.rounds.again("C", false, nullptr)); // not chosen
  x.rounds.close(false);
  CHECK_FALSE(x.rounds.again("A", false, nullptr));
}

TEST_CASE("round announcement: resends go to the open round only, and to a "
          "lost client once it is back") {
  fixture x;
  x.rounds.open(3, {"A", "B"});
  CHECK_FALSE(x.rounds.resend(2));
  auto now = x.rounds.resend(3);
  REQUIRE(now);
  CHECK(read(*now).resend);
  x.rounds.resend_later("B");
  auto back = x.rounds.again("B", false, nullptr);
  REQUIRE(back);
  CHECK(read(*back).resend);
  auto later = x.rounds.again("B", false, nullptr); // asked once
  REQUIRE(later);
  CHECK_FALSE(read(*later).resend);
  x.rounds.resend_later("A");
  x.rounds.open(4, {"A"}); // a new round forgets the resends
  CHECK_FALSE(read(*x.rounds.again("A", false, nullptr)).resend);
  x.rounds.close(false);
  CHECK_FALSE(x.rounds.resend(4));
}

TEST_CASE("round announcement: AsyncScheduler tasks open the rounds and are "
          "what a client gets back") {
  fixture x;
  CHECK_FALSE(x.rounds.is_open());
  auto task = x.rounds.task(9);
  CHECK(read(task).round == 9);
  CHECK(x.rounds.is_open());
  CHECK(x.rounds.round() == 0); // a task does not open a synchronous round
  auto back = x.rounds.again("A", false, &task);
  REQUIRE(back);
  CHECK(*back == task);
  msg::frame none;
  CHECK_FALSE(x.rounds.again("A", false, &none));
  x.rounds.close(true); // published: tasks go on
  CHECK(x.rounds.is_open());
}

TEST_CASE("round announcement: the final evaluation is asked of those that "
          "have not answered, until the run ends") {
  fixture x;
  x.rounds.open(3, {"A"});
  auto rs = read(x.rounds.evaluate_only(4));
  CHECK(rs.round == 4);
  CHECK(rs.evaluate_only);
  CHECK_FALSE(x.rounds.is_open());
  auto back = x.rounds.again("C", false, nullptr); // even if not chosen
  REQUIRE(back);
  CHECK(read(*back).evaluate_only);
  CHECK_FALSE(x.rounds.again("C", true, nullptr));
  x.rounds.end();
  CHECK_FALSE(x.rounds.again("C", false, nullptr));
}
