// The ranks of sharded clients joined into one client (protocol/shard_hub):
// what a rank's Hello must fit, one offer once every rank offered (the same
// sample count; the ranks' norms summed as squares), the model's chunks
// sent up in order once complete and no more than the window unanswered,
// a rank's chunk credited with the model's chunk it lies in, one end, and a
// refusal heard by every rank.

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "protocol/shard_hub.hpp"

using namespace fedcaf;

namespace {

/// w: 16 x 4 floats, b: 8 floats, s: a scalar; 64-byte chunks: w's rows
/// 0-7 (rank 0 of 2) are chunks 0 and 1, rows 8-15 (rank 1) chunks 2 and 3,
/// and b and s share chunk 4.
manifest layout_of() {
  manifest m;
  m.tensors = {make_tensor_info("w", dtype::float32, {16, 4}),
               make_tensor_info("b", dtype::float32, {8}),
               make_tensor_info("s", dtype::float32, {})};
  return m;
}

constexpr uint64_t chunk_bytes = 64;

msg::hello hello_of(uint32_t rank, uint32_t ranks,
                    std::vector<declared_slice> slices = {}) {
  return msg::hello{"C", "", shard_spec{rank, ranks, std::move(slices)}};
}

/// A hub with client "C" of `ranks` ranks registered.
shard_hub hub_of(uint32_t ranks) {
  shard_hub hub{layout_of(), chunk_bytes};
  for (uint32_t r = 0; r < ranks; ++r)
    hub.registered(hello_of(r, ranks));
  return hub;
}

msg::offer offer_of(const shard_hub& hub, uint32_t rank, uint64_t samples,
                    double norm = 0, uint64_t update_id = 7) {
  const auto& p = *hub.plan_of("C", rank);
  msg::offer o{
      1,   "C", samples, digest(layout_of()), p.total_bytes(), p.chunk_count(),
      0.5, 1.0};
  o.update_norm = norm;
  o.update_id = update_id + rank;
  return o;
}

/// Rank `rank`'s chunk `seq` of stream `sid`, every value `value`.
msg::frame piece(const shard_hub& hub, uint32_t rank, uint64_t sid,
                 uint64_t seq, float value) {
  const auto& e = hub.plan_of("C", rank)->extent(seq);
  std::vector<float> x(e.bytes / 4, value);
  return msg::encode_chunk(
      msg::chunk_header{sid, 1, seq, e.tensor_index, e.tensor_offset}, e.bytes,
      [&x](std::span<std::byte> dst) {
        std::memcpy(dst.data(), x.data(), dst.size());
      });
}

/// Both ranks offered; returns the stream id the accept gave (window 4:
/// 2 for each rank).
uint64_t accept_both(shard_hub& hub) {
  CHECK_FALSE(hub.offer("C", 0, offer_of(hub, 0, 5)).forward);
  auto step = hub.offer("C", 1, offer_of(hub, 1, 5));
  REQUIRE(step.forward);
  auto answers = hub.accepted("C", hub.generation("C"),
                              msg::encode(msg::accept{42, 4, 0, 0}));
  CHECK(answers.size() == 2);
  for (auto& [rank, f] : answers)
    CHECK(msg::decode<msg::accept>(f)->window == 2);
  return 42;
}

} // namespace

TEST_CASE("a rank's Hello fits its client: the rank count, and slices that "
          "cover the model once") {
  shard_hub hub{layout_of(), chunk_bytes};
  CHECK(hub.check_hello(hello_of(0, 2), {}));
  hub.registered(hello_of(0, 2));
  auto other = hub.check_hello(hello_of(1, 3), {0});
  REQUIRE_FALSE(other);
  CHECK(other.err().code == errc::not_authorized);
  CHECK(hub.check_hello(hello_of(1, 2), {0}));

  // Declared rows: rank 0 rows 0-4 of w and all of b and s; rank 1 must
  // hold rows 4-16 of w, no more, no less.
  shard_hub tp{layout_of(), chunk_bytes};
  tp.registered(hello_of(0, 2, {{"w", 0, 4}, {"b", 0, 8}, {"s", 0, 1}}));
  auto gap = tp.check_hello(hello_of(1, 2, {{"w", 5, 16}}), {0});
  REQUIRE_FALSE(gap);
  CHECK(gap.err().message ==
        "C: shard slices leave a gap: no rank holds rows [4, 5) of tensor 'w'");
  auto overlap = tp.check_hello(hello_of(1, 2, {{"w", 3, 16}}), {0});
  REQUIRE_FALSE(overlap);
  CHECK(overlap.err().message == "C: shard slices overlap: ranks 0 and 1 both "
                                 "hold rows [3, 4) of tensor 'w'");
  auto unknown = tp.check_hello(hello_of(1, 2, {{"v", 0, 1}}), {0});
  REQUIRE_FALSE(unknown);
  CHECK(unknown.err().message ==
        "rank 1 of C: shard slices: no tensor 'v' in the model");
  CHECK(tp.check_hello(hello_of(1, 2, {{"w", 4, 16}}), {0}));
  CHECK(tp.registered(hello_of(1, 2, {{"w", 4, 16}}))); // complete: joins
  // A rank that comes back must hold what it held.
  auto moved = tp.check_hello(hello_of(1, 2, {{"w", 4, 15}}), {0, 1});
  REQUIRE_FALSE(moved);
  CHECK(moved.err().code == errc::not_authorized);
}

TEST_CASE("the client joins once every rank registered, and leaves when one "
          "is dropped") {
  shard_hub hub{layout_of(), chunk_bytes};
  CHECK_FALSE(hub.registered(hello_of(0, 3)));
  CHECK_FALSE(hub.registered(hello_of(2, 3)));
  CHECK(hub.registered(hello_of(1, 3)));
  CHECK_FALSE(hub.registered(hello_of(1, 3))); // came back: joined already
  CHECK(hub.dropped("C", 2));
  CHECK_FALSE(hub.dropped("C", 0)); // it left already
  CHECK_FALSE(hub.registered(hello_of(0, 3)));
  CHECK(hub.registered(hello_of(2, 3)));
  // A rank that resumes keeps its plan (a repeated Hello costs no plan).
  auto plan = hub.plan_of("C", 1);
  CHECK(hub.check_hello(hello_of(1, 3), {0, 1, 2}));
  CHECK_FALSE(hub.registered(hello_of(1, 3)));
  CHECK(hub.plan_of("C", 1) == plan);
  // Every rank gone: the client starts over, with another layout if it
  // likes (another rank count, other slices).
  for (uint32_t r = 0; r < 3; ++r)
    hub.dropped("C", r);
  CHECK(hub.check_hello(hello_of(0, 2, {{"w", 0, 16}}), {}));
  CHECK_FALSE(hub.registered(hello_of(0, 2, {{"w", 0, 16}})));
  CHECK(hub.check_hello(hello_of(1, 2, {{"b", 0, 8}, {"s", 0, 1}}), {0}));
  // More ranks than the server takes.
  shard_hub small{layout_of(), chunk_bytes, 4};
  auto many = small.check_hello(hello_of(0, 5), {});
  REQUIRE_FALSE(many);
  CHECK(many.err().code == errc::not_authorized);
  // Ranks present that would hold more than the model (each the whole
  // of it): refused before the last rank comes.
  shard_hub greedy{layout_of(), chunk_bytes};
  std::vector<declared_slice> all{{"w", 0, 16}, {"b", 0, 8}, {"s", 0, 1}};
  greedy.registered(hello_of(0, 3, all));
  auto second = greedy.check_hello(hello_of(1, 3, all), {0});
  REQUIRE_FALSE(second);
  CHECK(second.err().code == errc::manifest_mismatch);
}

TEST_CASE("one offer goes up once every rank offered: one sample count, "
          "the norms summed as squares, one update id") {
  auto hub = hub_of(2);
  auto first = hub.offer("C", 0, offer_of(hub, 0, 5, 3.0));
  CHECK_FALSE(first.answer);
  CHECK_FALSE(first.forward);
  auto lying = hub.offer("C", 1, offer_of(hub, 1, 500, 4.0));
  REQUIRE(lying.answer);
  CHECK(msg::decode<msg::accept>(*lying.answer).err().code ==
        errc::manifest_mismatch);
  auto whole = offer_of(hub, 1, 5, 4.0);
  whole.total_bytes = layout_of().total_bytes();
  CHECK(hub.offer("C", 1, whole).answer);
  auto step = hub.offer("C", 1, offer_of(hub, 1, 5, 4.0));
  REQUIRE(step.forward);
  const auto& up = *step.forward;
  CHECK(up.client_id == "C");
  CHECK(up.sample_count == 5);
  CHECK(up.update_norm == doctest::Approx(5.0)); // sqrt(3^2 + 4^2)
  CHECK(up.total_bytes == layout_of().total_bytes());
  CHECK(up.chunk_count == hub.whole().chunk_count());
  CHECK(up.update_id != 0);
  // Each rank is answered with the client's stream and its own place.
  auto answers = hub.accepted("C", hub.generation("C"),
                              msg::encode(msg::accept{9, 4, 0, 0}));
  REQUIRE(answers.size() == 2);
  for (auto& [rank, f] : answers) {
    auto a = msg::decode<msg::accept>(f);
    REQUIRE(a);
    CHECK(a->stream_id == 9);
    CHECK(a->window == 2); // each rank its share of the window
  }
  // A repeated offer (a rank that reconnected) is answered at once.
  auto again = hub.offer("C", 0, offer_of(hub, 0, 5, 3.0));
  REQUIRE(again.answer);
  CHECK(msg::decode<msg::accept>(*again.answer)->stream_id == 9);
  // A rank that trained again (it restarted): another update of the client,
  // sent up as such (the aggregator refuses it and rejects the first).
  auto restarted = hub.offer("C", 1, offer_of(hub, 1, 5, 4.0, 1000));
  REQUIRE(restarted.forward);
  CHECK(restarted.forward->update_id != up.update_id);
}

TEST_CASE("the model's chunks go up in order once complete, at most the "
          "window unanswered, a rank's chunk is credited with its chunk of "
          "the model, each rank has its share of the window") {
  // Four ranks: rank r holds w's rows 4r-4r+3, chunk r of the model; all
  // share chunk 4 (b and s). Window 2: one chunk unanswered a rank.
  auto hub = hub_of(4);
  for (uint32_t r = 0; r < 4; ++r)
    hub.offer("C", r, offer_of(hub, r, 5));
  auto accepted = hub.accepted("C", hub.generation("C"),
                               msg::encode(msg::accept{42, 2, 0, 0}));
  REQUIRE(accepted.size() == 4);
  CHECK(msg::decode<msg::accept>(accepted[0].second)->window == 1);
  const uint64_t sid = 42;
  // Ranks 1-3 complete chunks 1-3, which wait for chunk 0.
  for (uint32_t r = 1; r < 4; ++r) {
    REQUIRE(hub.plan_of("C", r)->position(0) == r);
    auto s = hub.chunk("C", r, piece(hub, r, sid, 0, float(r)));
    CHECK_FALSE(s.refusal);
    CHECK(s.up.empty());
  }
  // Past its share of the window, out of its slices, out of order, another
  // stream: refused, nothing kept.
  auto more = hub.chunk("C", 1, piece(hub, 1, sid, 1, 1.0f));
  REQUIRE(more.refusal);
  CHECK(msg::decode<msg::credit>(*more.refusal).err().code ==
        errc::too_many_requests);
  CHECK(hub.chunk("C", 0, piece(hub, 1, sid, 0, 1.0f)).refusal);
  CHECK(hub.chunk("C", 0, piece(hub, 0, sid, 1, 1.0f)).refusal);
  CHECK(hub.chunk("C", 0, piece(hub, 0, sid + 1, 0, 1.0f)).refusal);
  // Rank 0's chunk completes chunk 0: chunks 0 and 1 go up (the window),
  // 2 and 3 wait though complete.
  auto s0 = hub.chunk("C", 0, piece(hub, 0, sid, 0, 7.0f));
  REQUIRE_FALSE(s0.refusal);
  REQUIRE(s0.up.size() == 2);
  auto first = msg::decode_chunk(s0.up[0].frame, chunk_bytes);
  REQUIRE(first);
  CHECK(first->header.sequence == 0);
  CHECK(first->header.stream_id == sid);
  std::vector<float> values(first->bytes.size() / 4);
  std::memcpy(values.data(), first->bytes.data(), first->bytes.size());
  for (auto x : values) // chunk 0 is rank 0's rows of w
    CHECK(x == 7.0f);
  CHECK(msg::decode_chunk(s0.up[1].frame, chunk_bytes)->header.sequence == 1);
  CHECK(s0.up[1].sequence == 1);
  // A credit asked for again after a reconnect: owed ones wait.
  CHECK_FALSE(hub.owed_credit("C", 0, msg::encode(msg::credit{sid, 0})));
  auto credit = hub.credited("C", hub.generation("C"), 0,
                             msg::encode(msg::credit{sid, 0}));
  REQUIRE(credit.answers.size() == 1);
  CHECK(credit.answers[0].first == rank_piece{0, 0});
  CHECK(msg::decode<msg::credit>(credit.answers[0].second)->sequence == 0);
  REQUIRE(credit.up.size() == 1); // the window has room again: chunk 2
  CHECK(msg::decode_chunk(credit.up[0].frame, chunk_bytes)->header.sequence ==
        2);
  // Given ones come at once.
  CHECK(hub.owed_credit("C", 0, msg::encode(msg::credit{sid, 0})));
  // A refusal of a chunk of the model is every rank's: the chunks that
  // wait hear it, and so does each rank's next.
  auto refused = hub.credited(
      "C", hub.generation("C"), 1,
      msg::encode(error{errc::poisoned_update, "a NaN in the update"}));
  // (Their stream is gone: a fedcaf client waits for the server's word.)
  CHECK(refused.answers.size() == 3); // ranks 1, 2 and 3's chunks
  for (auto& [p, f] : refused.answers) {
    auto e = msg::decode<msg::credit>(f).err();
    CHECK(e.code == errc::unknown_stream);
    CHECK(e.message == "the client's update was refused: a NaN in the update");
  }
  CHECK(refused.up.empty());
  auto later = hub.chunk("C", 1, piece(hub, 1, sid, 1, 2.0f));
  REQUIRE(later.refusal);
  CHECK(msg::decode<msg::credit>(*later.refusal).err().code ==
        errc::unknown_stream);
}

TEST_CASE("the client's end goes up once every rank ended after its last "
          "credit, the answer goes to each") {
  auto hub = hub_of(2);
  auto sid = accept_both(hub);
  const auto& p0 = *hub.plan_of("C", 0);
  const auto& p1 = *hub.plan_of("C", 1);
  // Early end: refused.
  auto early =
      hub.end("C", 0, msg::encode(msg::end_of_stream{sid, p0.chunk_count()}));
  REQUIRE(early.answer);
  CHECK(msg::decode<msg::stream_closed>(*early.answer).err().code ==
        errc::bad_sequence);
  // Everything, each model chunk answered as it goes up.
  uint64_t n0 = 0, n1 = 0;
  std::vector<shard_hub::up_chunk> pending;
  auto answer_all = [&] {
    while (!pending.empty()) {
      auto seq = pending.front().sequence;
      CHECK(msg::decode_chunk(pending.front().frame, chunk_bytes)
                ->header.sequence == seq);
      pending.erase(pending.begin());
      auto c = hub.credited("C", hub.generation("C"), seq,
                            msg::encode(msg::credit{sid, seq}));
      for (auto& f : c.up)
        pending.push_back(std::move(f));
    }
  };
  while (n0 < p0.chunk_count() || n1 < p1.chunk_count()) {
    bool zero = n1 == p1.chunk_count() ||
                (n0 < p0.chunk_count() && p0.position(n0) <= p1.position(n1));
    auto step = zero ? hub.chunk("C", 0, piece(hub, 0, sid, n0++, 1.0f))
                     : hub.chunk("C", 1, piece(hub, 1, sid, n1++, 2.0f));
    REQUIRE_FALSE(step.refusal);
    for (auto& f : step.up)
      pending.push_back(std::move(f));
    answer_all();
  }
  auto e0 =
      hub.end("C", 0, msg::encode(msg::end_of_stream{sid, p0.chunk_count()}));
  CHECK_FALSE(e0.answer);
  CHECK_FALSE(e0.up);
  auto e1 =
      hub.end("C", 1, msg::encode(msg::end_of_stream{sid, p1.chunk_count()}));
  REQUIRE(e1.up);
  auto end = msg::decode<msg::end_of_stream>(*e1.up);
  CHECK(end->chunk_count == hub.whole().chunk_count());
  auto closed = hub.closed(
      "C", hub.generation("C"),
      msg::encode(msg::stream_closed{sid, layout_of().total_bytes()}));
  CHECK(closed.size() == 2);
  // A repeated end (its answer lost) is answered the same.
  auto repeated =
      hub.end("C", 0, msg::encode(msg::end_of_stream{sid, p0.chunk_count()}));
  REQUIRE(repeated.answer);
  CHECK(msg::decode<msg::stream_closed>(*repeated.answer)->bytes_received ==
        layout_of().total_bytes());
}

TEST_CASE("a late answer to an upload forgotten touches none after it") {
  auto hub = hub_of(2);
  auto sid = accept_both(hub);
  auto old = hub.generation("C");
  auto s = hub.chunk("C", 0, piece(hub, 0, sid, 0, 1.0f));
  REQUIRE(s.up.size() == 1); // chunk 0 of the model is rank 0's alone
  hub.forget("C");           // collected again
  CHECK_FALSE(hub.offer("C", 0, offer_of(hub, 0, 5)).forward);
  REQUIRE(hub.offer("C", 1, offer_of(hub, 1, 5)).forward);
  CHECK(hub.generation("C") != old);
  // The old upload's answers, late: nothing of the new one moves.
  CHECK(hub.accepted("C", old, msg::encode(msg::accept{99, 2, 0, 0})).empty());
  CHECK(
      hub.credited("C", old, 0, msg::encode(error{errc::stream_reset, "reset"}))
          .answers.empty());
  auto answers = hub.accepted("C", hub.generation("C"),
                              msg::encode(msg::accept{7, 2, 0, 0}));
  REQUIRE(answers.size() == 2);
  CHECK(msg::decode<msg::accept>(answers[0].second)->stream_id == 7);
  CHECK_FALSE(hub.chunk("C", 0, piece(hub, 0, 7, 0, 1.0f)).refusal);
}

TEST_CASE("a round over before every rank offered: the waiting ranks sit it "
          "out") {
  auto hub = hub_of(3);
  CHECK_FALSE(hub.offer("C", 0, offer_of(hub, 0, 5)).answer);
  CHECK_FALSE(hub.offer("C", 2, offer_of(hub, 2, 5)).answer);
  auto over = hub.round_over(1);
  REQUIRE(over.size() == 2);
  for (auto& [id, rank, f] : over) {
    CHECK(id == "C");
    CHECK(msg::decode<msg::accept>(f).err().code == errc::not_in_round);
  }
  // An offer of the round over: refused as one.
  auto late = offer_of(hub, 1, 5);
  late.round = 0;
  CHECK(hub.offer("C", 1, late).answer);
}
