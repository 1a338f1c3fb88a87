// A relay's children's side as its server runs it (protocol/relay_flow),
// driven by hand through a port that records what the server is asked to
// do: rounds held for the parent's model, fetches that wait for bytes on
// their way, a download given up for a newer model, sit-outs, the end.

#include <doctest/doctest.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "fedcaf/chunk_plan.hpp"
#include "protocol/relay_flow.hpp"
#include "protocol/relay_residency.hpp"
#include "small_model.hpp"

using namespace fedcaf;
using namespace std::chrono_literals;

namespace {

/// What the flow asked of its "server".
struct recorder {
  std::vector<uint64_t> adopted;                  ///< versions handed
  std::vector<uint32_t> opened;                   ///< rounds opened
  std::vector<uint32_t> sat_out_asked;            ///< scheduler told
  std::vector<std::pair<uint32_t, bool>> sat_out; ///< reported
  std::vector<uint64_t> arrived;                  ///< aggregator told upto
  std::vector<std::string> refused;
  uint32_t served = 0;
  std::vector<snapshot_ptr> pinned; ///< per chunk served
};

/// A frame that says which chunk it answers (its sequence, as text).
msg::frame chunk_frame(uint64_t seq) {
  auto text = "chunk " + std::to_string(seq);
  return msg::frame(text.begin(), text.end());
}

std::string text_of(const msg::frame& f) {
  return {f.begin(), f.end()};
}

relay_port port_of(recorder& r) {
  relay_port p;
  p.adopt = [&r](relay_model m) { r.adopted.push_back(m.model->version); };
  p.open_round = [&r](uint32_t round, const auto&) {
    r.opened.push_back(round);
  };
  p.sit_out = [&r](uint32_t round) { r.sat_out_asked.push_back(round); };
  p.sat_out = [&r](uint32_t round, bool was_open) {
    r.sat_out.emplace_back(round, was_open);
  };
  p.serve = [&r](const std::string&, const msg::fetch& req,
                 const snapshot_ptr& pinned) -> result<msg::frame> {
    ++r.served;
    r.pinned.push_back(pinned);
    return chunk_frame(req.sequence);
  };
  p.refuse = [&r](const error& e) {
    r.refused.push_back(e.message);
    return msg::encode(e);
  };
  p.arrived = [&r](uint64_t upto) { r.arrived.push_back(upto); };
  p.pace_after = [](std::chrono::milliseconds) {};
  p.resident = [](uint64_t) {};
  return p;
}

/// The parent's model, version `version`, of the small model's layout.
relay_model model_of(uint64_t version, bool arriving) {
  auto s = std::make_shared<model_snapshot>();
  s->layout = testing::small_model();
  s->version = version;
  s->bytes = byte_buffer::zeroed(s->layout.total_bytes());
  relay_model m{s};
  if (arriving)
    m.arrival = std::make_shared<model_arrival>();
  return m;
}

/// The installed snapshot the server would pass to adopted().
snapshot_ptr installed(uint64_t version) {
  auto s = std::make_shared<model_snapshot>();
  s->layout = testing::small_model();
  s->version = version;
  return s;
}

/// A request of the upstream half whose answer lands in `out`.
parent_request parent_into(std::optional<result<relay_result>>& out) {
  return {[&out](result<relay_result> r) { out = std::move(r); }, {}};
}

/// A fetch reply that lands in `out`.
fetch_reply into(std::optional<msg::frame>& out) {
  return [&out](msg::frame f) { out = std::move(f); };
}

const auto t0 = fetch_pacing::time_point{};

} // namespace

TEST_CASE("a relay's round waits for its parent's model and its sum answers "
          "the parent") {
  recorder r;
  relay_flow flow{0ms, port_of(r)};
  flow.start(1, {"A", "B"}, t0); // chosen before the model came: held
  CHECK(r.opened.empty());
  std::optional<result<relay_result>> answer;
  flow.take(model_of(7, false), parent_into(answer), t0);
  REQUIRE(r.adopted == std::vector<uint64_t>{7});
  CHECK(r.opened.empty()); // not before the aggregator adopted it
  flow.adopted(installed(1), t0);
  CHECK(r.opened == std::vector<uint32_t>{1});
  CHECK(flow.may_offer("A", 1, 1)); // a model handed whole
  CHECK_FALSE(answer);
  relay_result sum;
  sum.weight = 2;
  flow.published(sum, t0);
  REQUIRE(answer);
  REQUIRE(*answer);
  CHECK((*answer)->weight == 2);
}

TEST_CASE("a relay serves a chunk the moment its bytes arrived, and takes "
          "offers only once the model is whole") {
  recorder r;
  relay_flow flow{0ms, port_of(r)};
  std::optional<result<relay_result>> answer;
  auto m = model_of(7, true);
  auto arrival = m.arrival;
  flow.take(std::move(m), parent_into(answer), t0);
  flow.adopted(installed(1), t0);
  flow.start(1, {"A"}, t0);
  REQUIRE(r.opened == std::vector<uint32_t>{1});
  // Chunk 1 (bytes 64..128) of the model served (version 1) waits.
  std::optional<msg::frame> got;
  flow.fetch("A", msg::fetch{1, 1, 1}, std::pair<uint64_t, uint64_t>{64, 64},
             t0, into(got));
  CHECK_FALSE(got);
  auto early = flow.may_offer("A", 1, 1);
  REQUIRE_FALSE(early); // nobody holds the whole model: no honest offer
  CHECK(early.err().code == errc::unexpected_message);
  flow.arrived(0, 100, t0); // not all of chunk 1 yet
  CHECK_FALSE(got);
  CHECK(r.arrived == std::vector<uint64_t>{100});
  flow.arrived(100, 112, t0); // the rest: the model is whole
  REQUIRE(got);
  CHECK(text_of(*got) == "chunk 1");
  CHECK(r.arrived.back() == testing::small_model().total_bytes());
  CHECK(arrival->whole()); // the aggregator reads the same truth
  CHECK(flow.may_offer("A", 1, 1));
}

TEST_CASE("a newer model while one arrives: the round is sat out, waiting "
          "fetches get what came, and the model given up stays served to "
          "children downloading it until the next round is answered") {
  recorder r;
  relay_flow flow{0ms, port_of(r)};
  std::optional<result<relay_result>> first, second, third;
  auto m = model_of(7, true);
  auto arrival = m.arrival;
  flow.take(std::move(m), parent_into(first), t0);
  auto given_up = installed(1);
  flow.adopted(given_up, t0);
  flow.start(1, {"A"}, t0);
  std::optional<msg::frame> waiting;
  flow.fetch("A", msg::fetch{1, 1, 2}, std::pair<uint64_t, uint64_t>{128, 64},
             t0, into(waiting));
  CHECK_FALSE(waiting);
  flow.take(model_of(8, true), parent_into(second), t0);
  REQUIRE(waiting); // served with what is there
  CHECK(r.sat_out_asked == std::vector<uint32_t>{1}); // scheduler told
  auto sat = flow.may_offer("A", 1, 1); // an honest child sits it out
  REQUIRE_FALSE(sat);
  CHECK(sat.err().code == errc::not_in_round);
  CHECK_FALSE(arrival->whole());
  // A third model displaces the second, which never comes whole.
  flow.take(model_of(9, false), parent_into(third), t0);
  REQUIRE(second);
  REQUIRE(*second);
  CHECK((*second)->weight == 0);
  CHECK(r.adopted == std::vector<uint64_t>{7}); // nothing taken yet
  // The scheduler sits round 1 out: the first model is answered with no
  // sum and the third is taken.
  std::optional<result<uint32_t>> next;
  flow.sit_out(
      1, [&next](result<uint32_t> n) { next = n; }, t0);
  REQUIRE(next);
  REQUIRE(*next);
  CHECK(**next == 2);
  REQUIRE(first);
  CHECK((*first)->weight == 0);
  CHECK(r.adopted == std::vector<uint64_t>{7, 9});
  CHECK(r.sat_out == std::vector<std::pair<uint32_t, bool>>{{1, true}});
  flow.adopted(installed(2), t0);
  // A child still downloading the model given up is served from it.
  std::optional<msg::frame> late;
  flow.fetch("A", msg::fetch{1, 1, 3}, std::pair<uint64_t, uint64_t>{192, 20},
             t0, into(late));
  REQUIRE(late);
  CHECK(r.pinned.back() == given_up);
}

TEST_CASE("a relay's sit-out before its parent's model waits for it and "
          "chooses the round again, the end answers whatever waits") {
  recorder r;
  relay_flow flow{0ms, port_of(r)};
  std::optional<result<uint32_t>> next;
  flow.sit_out(
      3, [&next](result<uint32_t> n) { next = n; }, t0);
  CHECK_FALSE(next);
  std::optional<result<uint32_t>> again;
  flow.sit_out(
      3, [&again](result<uint32_t> n) { again = n; }, t0);
  REQUIRE(again); // one sit-out at a time
  CHECK_FALSE(*again);
  std::optional<result<relay_result>> answer;
  flow.take(model_of(7, false), parent_into(answer), t0);
  flow.adopted(installed(1), t0);
  REQUIRE(next);
  CHECK(**next == 3); // chosen again: children may have come meanwhile
  CHECK(r.opened.empty());
  CHECK_FALSE(answer);

  std::optional<result<relay_result>> queued;
  flow.take(model_of(8, false), parent_into(queued), t0); // waits its turn
  std::optional<result<uint32_t>> held;
  flow.end("interrupted", t0);
  REQUIRE(answer);
  CHECK_FALSE(*answer);
  CHECK(answer->err().message.find("interrupted") != std::string::npos);
  REQUIRE(queued);
  CHECK_FALSE(*queued);
  std::optional<result<relay_result>> after;
  flow.take(model_of(9, false), parent_into(after), t0);
  REQUIRE(after);
  CHECK_FALSE(*after); // no round opens once the run has ended
}

TEST_CASE("a window-mode relay's child that asks for a position gone from "
          "the cache is served once it is fetched again from the parent") {
  recorder r;
  relay_flow flow{0ms, port_of(r)};
  auto layout = testing::small_model();
  auto plan = chunk_plan::make(layout, 64);
  REQUIRE(plan);
  auto memory = byte_buffer::anonymous(layout.total_bytes());
  REQUIRE(memory);
  auto residency =
      std::make_shared<relay_residency>(memory->share(), std::move(*plan), 1);
  std::vector<std::pair<uint64_t, uint64_t>> asked;
  residency->set_asker([&asked](uint64_t offset, uint64_t bytes) {
    asked.emplace_back(offset, bytes);
  });
  auto m = model_of(7, false);
  m.residency = residency;
  std::optional<result<relay_result>> answer;
  flow.take(std::move(m), parent_into(answer), t0);
  flow.adopted(installed(1), t0);
  flow.start(1, {"A"}, t0);
  residency->download_complete();
  residency->measured_below(4);
  residency->served_below(2); // positions 0 and 1 left the cache
  std::optional<msg::frame> got;
  flow.fetch("A", msg::fetch{1, 1, 0}, std::pair<uint64_t, uint64_t>{0, 64}, t0,
             into(got));
  CHECK_FALSE(got); // fetched again from the parent for this child
  REQUIRE(asked.size() == 1);
  CHECK(asked[0].first == 0);
  std::vector<std::byte> bytes(64, std::byte{1});
  residency->fill(0, bytes);
  flow.resident(0, t0);
  REQUIRE(got);
  CHECK(text_of(*got) == "chunk 0");
}

// -- the end of a relay's run ------------------------------------------------------

TEST_CASE("the run ends while a window-mode relay's next model is "
          "adopted: a child's fetch of it is answered at once, from what "
          "is there") {
  // The adoption's answer installs the model with its residency even
  // after the end: a fetch of it goes to its download, abandoned at the
  // end, and is served at once, never parked on the last round's
  // residency (which would ask the parent for bytes of a round long over
  // and wait until the server quits).
  recorder r;
  relay_flow flow{0ms, port_of(r)};
  auto layout = testing::small_model();
  auto residency_of = [&layout](std::vector<uint64_t>& asked) {
    auto plan = chunk_plan::make(layout, 64);
    REQUIRE(plan);
    auto memory = byte_buffer::anonymous(layout.total_bytes());
    REQUIRE(memory);
    auto made =
        std::make_shared<relay_residency>(memory->share(), std::move(*plan), 1);
    made->set_asker(
        [&asked](uint64_t offset, uint64_t) { asked.push_back(offset); });
    return made;
  };
  std::vector<uint64_t> asked_last, asked_next;
  auto last = residency_of(asked_last);
  auto count = last->plan().chunk_count();
  auto m = model_of(7, false);
  m.residency = last;
  std::optional<result<relay_result>> first, second;
  flow.take(std::move(m), parent_into(first), t0);
  flow.adopted(installed(1), t0);
  flow.start(1, {"A"}, t0);
  last->download_complete();
  last->measured_below(count);
  relay_result sum;
  sum.weight = 1;
  flow.published(sum, t0); // its positions leave the cache
  REQUIRE(first);
  auto next = model_of(8, true);
  next.residency = residency_of(asked_next);
  flow.take(std::move(next), parent_into(second), t0); // adopting
  flow.end("", t0);
  flow.adopted(installed(2), t0);
  std::optional<msg::frame> got;
  flow.fetch("A", msg::fetch{2, 2, 0}, std::pair<uint64_t, uint64_t>{0, 64}, t0,
             into(got));
  CHECK(got);
  CHECK(asked_last.empty()); // nothing of the last round asked again
}

TEST_CASE("after the end of a relay's run that never had its "
          "parent's model, a child's offer is told to sit out") {
  // The end abandons the download, whether a model came or not: every
  // offer after it is told not_in_round (none reaches the scheduler).
  recorder r;
  relay_flow flow{0ms, port_of(r)};
  flow.start(1, {"A"}, t0); // held: no model yet
  flow.end("", t0);
  auto after = flow.may_offer("A", 1, 1);
  REQUIRE_FALSE(after);
  CHECK(after.err().code == errc::not_in_round);
}
