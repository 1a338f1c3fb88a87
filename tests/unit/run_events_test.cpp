// run_events: counts by event and reason, the log of the latest events with
// runs that peers can repeat folded, and its bounds whatever peers send.

#include <doctest/doctest.h>

#include <string>

#include "fedcaf/run_events.hpp"

using namespace fedcaf;

namespace {

uint64_t count(const run_events& ev, run_event e, const std::string& reason) {
  auto it = ev.counts().find({e, reason});
  return it == ev.counts().end() ? 0 : it->second;
}

} // namespace

TEST_CASE("events are counted by reason and logged in order") {
  run_events ev;
  ev.note(run_event::registered, "joined", "A", "from h:1", 10);
  ev.note(run_event::lost, "no_goodbye", "A", "closed without a goodbye", 11);
  ev.note(run_event::rejected, "poisoned_update", "B", "non-finite", 12);
  ev.note(run_event::rejected, "timeout", "C", "silent", 13);
  ev.note(run_event::rejected, "poisoned_update", "D", "too far", 14);
  CHECK(count(ev, run_event::rejected, "poisoned_update") == 2);
  CHECK(count(ev, run_event::rejected, "timeout") == 1);
  CHECK(ev.total(run_event::rejected) == 3);
  CHECK(ev.total(run_event::excluded) == 0);
  REQUIRE(ev.log().size() == 5); // rejections are not folded: each is named
  CHECK(ev.log()[1].event == run_event::lost);
  CHECK(ev.log()[1].detail == "closed without a goodbye");
  CHECK(ev.log()[4].client == "D");
  CHECK(ev.log()[4].unix_s == 14);
}

TEST_CASE("what peers repeat at will folds, refusals have a log apart") {
  run_events ev;
  for (int i = 0; i < 1000; ++i)
    ev.note(run_event::registered, "joined", "c" + std::to_string(i), "", i);
  ev.note(run_event::lost, "no_goodbye", "c7", "", 1000);
  // A stranger alternating two reasons of refusal: its own log, folded.
  for (int i = 0; i < 5000; ++i)
    ev.note(run_event::refused, i % 2 ? "not_authorized" : "too_many_requests",
            "127.0.0." + std::to_string(i % 200), "wrong token", 1001 + i);
  // A client joining and leaving again and again: two entries.
  for (int i = 0; i < 500; ++i) {
    ev.note(run_event::registered, "joined", "x", "", 7000 + i);
    ev.note(run_event::left, "other", "x", "", 7000 + i);
  }
  // Its registrations fold into the first entry (within the last 8).
  REQUIRE(ev.log().size() == 3);
  CHECK(ev.log()[0].count == 1500);
  CHECK(ev.log()[0].client == "c0");
  CHECK(ev.log()[0].last_client == "x");
  CHECK(ev.log()[0].first_unix_s == 0);
  CHECK(ev.log()[0].unix_s == 7499);
  CHECK(ev.log()[1].event == run_event::lost); // still in view
  CHECK(ev.log()[2].event == run_event::left);
  CHECK(ev.log()[2].count == 500);
  REQUIRE(ev.refusals().size() == 2);
  CHECK(ev.refusals()[0].count + ev.refusals()[1].count == 5000);
  CHECK(count(ev, run_event::refused, "not_authorized") == 2500);
}

TEST_CASE("the log and the counts stay bounded") {
  run_events ev;
  for (size_t i = 0; i < 3 * run_events::max_entries; ++i)
    ev.note(run_event::lost, "reason" + std::to_string(i), "A", "", i);
  CHECK(ev.log().size() == run_events::max_entries);
  CHECK(ev.log().back().unix_s == 3 * run_events::max_entries - 1);
  // Past max_kinds reasons, the rest count as "other".
  CHECK(ev.counts().size() == run_events::max_kinds + 1);
  CHECK(count(ev, run_event::lost, "other") ==
        3 * run_events::max_entries - run_events::max_kinds);
  CHECK(ev.total(run_event::lost) == 3 * run_events::max_entries);
}

TEST_CASE("texts from peers are cut and made safe") {
  run_events ev;
  std::string id(500, 'a');
  id[3] = '\n';
  ev.note(run_event::refused, "Bad Token!\n\"x\"", id, std::string(10000, 'z'),
          1);
  const auto& e = ev.refusals().back();
  CHECK(e.reason == "bad_token___x_");
  CHECK(e.client.size() == run_events::max_client_bytes);
  CHECK(e.client[3] == '?');
  CHECK(e.client.substr(e.client.size() - 3) == "..."); // cut: says so
  CHECK(printable_cut("abc", 3) == "abc");
  CHECK(e.detail.size() == run_events::max_detail_bytes);
  CHECK(reason_token("") == "unknown");
  CHECK(reason_token(std::string(100, 'r')).size() ==
        run_events::max_reason_bytes);
}

TEST_CASE("the Prometheus families name every event") {
  run_events ev;
  ev.note(run_event::excluded, "secure_aggregation", "E", "garbage shares", 1);
  ev.note(run_event::registered, "joined", "A", "", 2);
  ev.note(run_event::registered, "joined", "B", "", 3);
  std::string text;
  append_prometheus(text, ev.counts());
  CHECK(text.find("# TYPE fedcaf_clients_excluded_total counter\n") !=
        std::string::npos);
  CHECK(
      text.find(
          "fedcaf_clients_excluded_total{reason=\"secure_aggregation\"} 1\n") !=
      std::string::npos);
  CHECK(text.find("fedcaf_registrations_total 2\n") != std::string::npos);
  CHECK(text.find("# TYPE fedcaf_resumptions_total counter\n") !=
        std::string::npos);
  CHECK(text.find("fedcaf_resumptions_total{") == std::string::npos);
  CHECK(text.find("# TYPE fedcaf_rounds_failed_total counter\n") !=
        std::string::npos);
  CHECK(text.find("fedcaf_updates_rejected_total{") == std::string::npos);
}
