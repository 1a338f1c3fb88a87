// The trace of a masked upload out of range (range_tracer), played over
// many rounds against liars that lie always, sometimes, or only when it
// pays: with one liar, only the liar is ever named, and soon.

#include <doctest/doctest.h>

#include <functional>
#include <random>

#include "protocol/range_tracer.hpp"

using namespace fedcaf;

namespace {

std::set<std::string> clients(int n) {
  std::set<std::string> out;
  for (int i = 1; i <= n; ++i)
    out.insert("Client" + std::to_string(i));
  return out;
}

/// Plays rounds of `n` clients, `least` at least in each sum, until a
/// client is named (or `rounds` pass); `lies(round, in_sum)` says whether
/// the sum is out of range. Returns the client named and the rounds it
/// took, and counts the failed rounds.
std::pair<std::string, int>
play(int n, size_t least, uint64_t seed, int rounds, int& failed,
     const std::function<bool(int, const std::set<std::string>&)>& lies) {
  range_tracer t{seed};
  auto all = clients(n);
  failed = 0;
  for (int r = 1; r <= rounds; ++r) {
    auto held = t.hold_out(all, least);
    CHECK(all.size() - held.size() >= least);
    for (const auto& id : held)
      CHECK(t.suspects().count(id));
    std::set<std::string> in_sum;
    for (const auto& id : all)
      if (!held.count(id))
        in_sum.insert(id);
    bool out_of_range = lies(r, in_sum);
    failed += out_of_range;
    if (auto named =
            t.record(static_cast<uint32_t>(r), in_sum, held, !out_of_range))
      return {named->id, r};
  }
  return {"", rounds};
}

} // namespace

TEST_CASE("range tracer: one liar that always lies is named, and nobody "
          "else, within a few rounds") {
  for (int n : {3, 5, 10}) {
    size_t least = n - std::max(1, n / 10); // the default min_clients
    int worst = 0;
    for (uint64_t seed = 1; seed <= 200; ++seed) {
      std::string liar = "Client" + std::to_string(1 + seed % n);
      int failed = 0;
      auto [named, at] = play(n, least, seed, 100, failed,
                              [&](int, const std::set<std::string>& in_sum) {
                                return in_sum.count(liar) > 0;
                              });
      REQUIRE(named == liar);
      worst = std::max(worst, at);
      CHECK(failed <= n); // each failure takes a suspect out
    }
    MESSAGE(n << " clients: named by round " << worst << " at worst");
    CHECK(worst <= 2 * n + 1);
  }
  // Three clients, two at least in the sum: always by round 4.
  for (uint64_t seed = 1; seed <= 100; ++seed) {
    int failed = 0;
    auto [named, at] = play(3, 2, seed, 20, failed,
                            [](int, const std::set<std::string>& in_sum) {
                              return in_sum.count("Client3") > 0;
                            });
    CHECK(named == "Client3");
    CHECK(at <= 4);
    CHECK(failed == 3);
  }
}

TEST_CASE("range tracer: a liar that lies only now and then, or behaves once "
          "to shift the blame, never gets an honest client named") {
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    std::mt19937_64 coin{seed * 7919};
    int failed = 0;
    auto [named, at] =
        play(6, 4, seed, 300, failed,
             [&](int r, const std::set<std::string>& in_sum) {
               // Honest in round 2 (after the trace began), then at random.
               return in_sum.count("Client2") && r != 2 && coin() % 3 != 0;
             });
    CHECK((named.empty() || named == "Client2"));
  }
}

TEST_CASE("range tracer: no trace without a failure, a passing sum clears "
          "nobody in it, sums that share no suspect start the trace "
          "again") {
  range_tracer t{1};
  auto all = clients(4);
  CHECK(t.hold_out(all, 2).empty());
  CHECK_FALSE(t.record(1, all, {}, true));
  CHECK_FALSE(t.tracing());
  CHECK_FALSE(t.record(2, all, {}, false));
  CHECK(t.suspects() == all);
  // Never below the least in the sum.
  CHECK(t.hold_out(all, 4).empty());
  CHECK(t.hold_out(all, 3).size() == 1);
  CHECK(t.hold_out(all, 1).size() == 2); // at most half the suspects
  // Two failing sums that share nobody: a new trace from the last.
  CHECK_FALSE(
      t.record(3, {"Client1", "Client2"}, {"Client3", "Client4"}, false));
  CHECK_FALSE(
      t.record(4, {"Client3", "Client4"}, {"Client1", "Client2"}, false));
  CHECK(t.suspects() == std::set<std::string>{"Client3", "Client4"});
  // Client3 held out of a passing sum, Client4 out of a failing one.
  CHECK_FALSE(
      t.record(5, {"Client1", "Client2", "Client4"}, {"Client3"}, true));
  auto named =
      t.record(6, {"Client1", "Client2", "Client3"}, {"Client4"}, false);
  REQUIRE(named);
  CHECK(named->id == "Client3");
  CHECK(named->why.find("2 rounds since round 4") != std::string::npos);
  CHECK_FALSE(t.tracing());
  // Named: held out of every sum it can be, alone; passing sums keep it so.
  CHECK(t.named() == "Client3");
  CHECK(t.hold_out(all, 2) == std::set<std::string>{"Client3"});
  CHECK(t.hold_out(all, 4).empty()); // no room: it is summed
  CHECK_FALSE(
      t.record(7, {"Client1", "Client2", "Client4"}, {"Client3"}, true));
  CHECK_FALSE(t.record(8, all, {}, false)); // summed, failing: as named
  CHECK(t.named() == "Client3");
  // A sum without it fails: it is let go, a trace starts from that sum.
  CHECK_FALSE(
      t.record(9, {"Client1", "Client2", "Client4"}, {"Client3"}, false));
  CHECK(t.named().empty());
  CHECK(t.suspects() == std::set<std::string>{"Client1", "Client2", "Client4"});
}

TEST_CASE("range tracer: two liars can make it name an honest client, who "
          "is then only held out, and let go the first round a sum without "
          "it fails") {
  // Two colluding liars (they know whom the server holds out once the
  // round is over): each lies while the other is held out, then both lie
  // whenever they are summed.
  int honest_named = 0, honest_held_passing = 0;
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    range_tracer t{seed};
    auto all = clients(6);
    std::set<std::string> liars{"Client5", "Client6"};
    for (uint32_t r = 1; r <= 60; ++r) {
      auto held = t.hold_out(all, 4);
      std::set<std::string> in_sum;
      for (const auto& id : all)
        if (!held.count(id))
          in_sum.insert(id);
      bool any_liar_held = held.count("Client5") || held.count("Client6");
      bool lies =
          (in_sum.count("Client5") || in_sum.count("Client6")) &&
          (any_liar_held || !t.tracing() || !t.suspects().count("Client5"));
      bool honest_out = !t.named().empty() && !liars.count(t.named());
      if (honest_out && !lies)
        ++honest_held_passing;
      if (auto named = t.record(r, in_sum, held, !lies))
        honest_named += !liars.count(named->id);
    }
  }
  MESSAGE("honest clients named "
          << honest_named
          << " times in 300 runs; "
             "rounds they were held out of that passed: "
          << honest_held_passing);
  // Held out while named, an honest client is let go by the liars' next
  // failing round: it loses only rounds in which the liars upload honestly.
  CHECK(honest_held_passing == 0);
}
