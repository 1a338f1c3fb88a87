// A simulation's population: member ids and indices, the order of their
// ids, and a roster drawing from it as it would from the same clients
// registered; members not drawn leave as a round starts, dropped ones are
// drawn no more, and a round's missing are those drawn and not in it.

#include <doctest/doctest.h>

#include <algorithm>
#include <set>
#include <string>

#include "protocol/population.hpp"
#include "protocol/round_roster.hpp"

using namespace fedcaf;
using ids = std::set<std::string>;

TEST_CASE("population: ids, indices and the ids' order") {
  population p{40, 1000}; // Client41 .. Client1040
  CHECK(p.size() == 1000);
  CHECK(p.first() == 40);
  CHECK(p.id_of(0) == "Client41");
  CHECK(p.id_of(999) == "Client1040");
  CHECK(p.index_of("Client41") == 0u);
  CHECK(p.index_of("Client1040") == 999u);
  for (const char* not_one :
       {"Client40", "Client1041", "Client041", "Client", "client41", "Client4x",
        "Client+41", "Client-1", "Client99999999999999999999", "Relay41", ""})
    CHECK_FALSE(p.index_of(not_one));
  // Every member once, in the order a std::set of the ids has them.
  ids sorted;
  for (uint32_t i = 0; i < p.size(); ++i)
    sorted.insert(p.id_of(i));
  std::vector<std::string> walked;
  for (auto i : p.in_id_order())
    walked.push_back(p.id_of(i));
  CHECK(walked == std::vector<std::string>(sorted.begin(), sorted.end()));
  for (auto [first, count] : {std::pair{0u, 1u},
                              {0u, 9u},
                              {0u, 10u},
                              {9u, 2u},
                              {99u, 1u},
                              {0u, 12345u}}) {
    population q{first, count};
    std::vector<std::string> got, want;
    for (auto i : q.in_id_order())
      got.push_back(q.id_of(i));
    for (uint32_t i = 0; i < count; ++i)
      want.push_back(q.id_of(i));
    std::sort(want.begin(), want.end());
    CHECK(got == want);
  }
  CHECK(population{0, 0}.in_id_order().empty());
  // A relay's children: its id before theirs.
  population r{0, 40, "R1-Client"};
  CHECK(r.id_of(0) == "R1-Client1");
  CHECK(r.index_of("R1-Client40") == 39u);
  CHECK_FALSE(r.index_of("Client1"));
  CHECK_FALSE(r.index_of("R2-Client1"));
  CHECK_FALSE(r.index_of("R1-Client41"));
  std::vector<std::string> got, want;
  for (auto i : r.in_id_order())
    got.push_back(r.id_of(i));
  for (uint32_t i = 0; i < r.size(); ++i)
    want.push_back(r.id_of(i));
  std::sort(want.begin(), want.end());
  CHECK(got == want);
}

namespace {

round_roster::terms drawn(uint32_t k, std::shared_ptr<const population> p) {
  round_roster::terms t;
  t.clients_per_round = k;
  t.sampling_seed = 7;
  t.members = std::move(p);
  return t;
}

} // namespace

TEST_CASE("population: a roster draws what it would from the clients "
          "registered, and members come and go") {
  auto p = std::make_shared<const population>(0, 300);
  round_roster all(drawn(10, nullptr)), pop(drawn(10, p));
  for (uint32_t i = 0; i < p->size(); ++i)
    all.join(p->id_of(i), "");
  ids before;
  for (uint32_t r = 1; r <= 6; ++r) {
    all.start(r);
    pop.start(r);
    CHECK(pop.participants().size() == 10);
    CHECK(pop.participants() == all.participants());
    // The last round's members not drawn again left as this one started.
    for (const auto& id : pop.registered())
      CHECK(pop.participants().count(id));
    for (const auto& id : pop.participants())
      if (!before.count(id))
        pop.join(id, ""); // summoned: it registers
    CHECK(pop.registered() == pop.participants());
    before = pop.participants();
  }
  // A round's missing: drawn and not in the model (the others of the
  // population are not named).
  auto r = pop.round();
  auto first = *pop.participants().begin();
  for (const auto& id : pop.participants())
    if (id != first) {
      pop.offer(msg::offer{.round = r, .client_id = id}, 1);
      pop.close(id);
    }
  auto f = pop.figures({});
  CHECK(f.clients == 9);
  CHECK(f.missing == std::vector<std::string>{first});
  // A dropped member is drawn no more.
  pop.unregister(first);
  auto idx = p->index_of(first);
  REQUIRE(idx);
  for (uint32_t round = 7; round <= 60; ++round) {
    pop.start(round);
    CHECK_FALSE(pop.participants().count(first));
  }
}

TEST_CASE("population: a member that missed a round is passed over while "
          "a draw can do without it") {
  auto p = std::make_shared<const population>(0, 3);
  round_roster pop(drawn(2, p));
  pop.start(1);
  auto chosen = pop.participants();
  REQUIRE(chosen.size() == 2);
  for (const auto& id : chosen)
    pop.join(id, "");
  auto late = *chosen.begin();
  CHECK(pop.missed(late) == 1);
  // Round 2 draws from the two others; the late one, not drawn, leaves
  // (sent away, it is never heard from again) and is passed over...
  pop.start(2);
  ids others;
  for (uint32_t i = 0; i < 3; ++i)
    if (p->id_of(i) != late)
      others.insert(p->id_of(i));
  CHECK(pop.participants() == others);
  CHECK_FALSE(pop.registered().count(late));
  for (uint32_t r = 3; r <= 40; ++r) {
    pop.start(r);
    CHECK(pop.participants() == others);
  }
  // ... unless min_clients needs every member: then the draw is over all.
  bool back = false;
  for (uint32_t r = 41; r <= 60; ++r) {
    pop.start(r, 3);
    CHECK(pop.participants().size() == 2);
    back = back || pop.participants().count(late) > 0;
  }
  CHECK(back);
}
