// What the round and registration deadlines decide, on sets of client ids.

#include <doctest/doctest.h>

#include "protocol/round_deadline.hpp"

using namespace fedcaf;
using namespace std::chrono_literals;

namespace {
bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}
using ids = std::set<std::string>;
} // namespace

TEST_CASE("the round deadline cuts off who has not offered and who is still "
          "uploading") {
  ids participants{"A", "B", "M", "S"};
  ids offered{"A", "B", "S"};
  ids closed{"A", "B"};
  auto cut = cut_at_deadline(participants, offered, closed, 2, false);
  CHECK_FALSE(cut.wait);
  CHECK(cut.not_offered == ids{"M"});
  CHECK(cut.uploading == ids{"S"});
  // on_deadline: fail cuts even when too few delivered (the round fails).
  auto few = cut_at_deadline(participants, offered, {"A"}, 2, false);
  CHECK_FALSE(few.wait);
  CHECK(few.uploading == ids{"B", "S"});
  // on_deadline: wait with too few delivered cuts nobody yet.
  auto waits = cut_at_deadline(participants, offered, {"A"}, 2, true);
  CHECK(waits.wait);
  CHECK(waits.uploading.empty());
  CHECK(waits.not_offered.empty());
  // Enough delivered: wait cuts the rest as fail does.
  auto enough = cut_at_deadline(participants, offered, closed, 2, true);
  CHECK_FALSE(enough.wait);
  CHECK(enough.not_offered == ids{"M"});
  // Everyone delivered: nothing to do.
  auto all = cut_at_deadline({"A"}, {"A"}, {"A"}, 1, true);
  CHECK_FALSE(all.wait);
  CHECK(all.uploading.empty());
  CHECK(all.not_offered.empty());
}

TEST_CASE("the registration deadline starts the run with min_clients and "
          "names the clients that never came") {
  std::vector<std::string> expected{"Client1", "Client2", "Mallory1"};
  auto go = registration_deadline_passed({"Client1", "Client2"}, expected, 3, 2,
                                         5000ms);
  CHECK(go.start);
  CHECK(
      contains(go.message, "(5 s, scheduler_kwargs.registration_deadline_s)"));
  CHECK(contains(go.message, "2 of 3 clients registered (Client1, Client2)"));
  CHECK(contains(go.message, "never came: Mallory1;"));
  CHECK(contains(go.message, "the run goes on without them"));
  auto no = registration_deadline_passed({"Client1"}, expected, 3, 2, 5000ms);
  CHECK_FALSE(no.start);
  CHECK(contains(no.message, "never came: Client2, Mallory1;"));
  CHECK(contains(no.message, "min_clients is 2: the run cannot start"));
  // Without tokens the ids are unknown: the count is named.
  auto anonymous = registration_deadline_passed({}, {}, 2, 1, 2500ms);
  CHECK_FALSE(anonymous.start);
  CHECK(contains(anonymous.message, "(2.5 s,"));
  CHECK(contains(anonymous.message, "registered (none)"));
  CHECK(contains(anonymous.message, "never came: 2 client(s)"));
}

TEST_CASE("the round deadline's log lines name the round and the clients") {
  CHECK(waiting_for_min_clients(3, 1, 2) ==
        "round 3: the deadline passed with 1 updates delivered, min_clients "
        "is 2; waiting for min_clients");
  CHECK(uploads_cut_at_deadline(3, {"S"}) ==
        "round 3: the deadline passed before the uploads of S were complete");
}
