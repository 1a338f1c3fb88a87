// A window-mode relay's refetches from its parent on its children's behalf:
// a model per child and two models in all per round; a new round starts
// every count again.

#include <doctest/doctest.h>

#include "protocol/refetch_budget.hpp"

using namespace fedcaf;

TEST_CASE("refetch budget: a model per child, two models in all, a round at "
          "a time") {
  refetch_budget b;
  b.start(8);
  for (int i = 0; i < 8; ++i)
    CHECK_FALSE(b.take("A"));
  auto a = b.take("A"); // a fetch loop past its model
  REQUIRE(a);
  CHECK(a->code == errc::too_many_requests);
  CHECK(a->message.find("A fetched 8 chunks gone from the relay's cache") == 0);
  for (int i = 0; i < 8; ++i)
    CHECK_FALSE(b.take("B"));
  auto c = b.take("C"); // two models in all: C is refused too
  REQUIRE(c);
  CHECK(c->message.find("two models") != std::string::npos);
  CHECK(b.total() == 16);
  b.start(8); // the next round
  CHECK_FALSE(b.take("A"));
  CHECK(b.total() == 1);
}
