// The aggregator's book of upload streams driven by hand, with a clock the
// test moves: ownership, order, credits held by the window, silence, ends,
// abandon, and what the round's sum holds.

#include <doctest/doctest.h>

#include "protocol/upload_ledger.hpp"

using namespace fedcaf;
using namespace std::chrono_literals;

namespace {

constexpr uint64_t chunks = 3;
constexpr uint32_t window = 2;

const upload_ledger::time_point t0{};

msg::chunk_header header(uint64_t stream_id, uint32_t round, uint64_t seq) {
  msg::chunk_header h;
  h.stream_id = stream_id;
  h.round = round;
  h.sequence = seq;
  return h;
}

/// Folds every chunk of stream `sid` at `now`.
void fold_all(upload_ledger& book, uint64_t sid,
              upload_ledger::time_point now) {
  auto* s = book.find(sid);
  REQUIRE(s);
  for (uint64_t seq = 0; seq < chunks; ++seq) {
    REQUIRE(upload_ledger::check_next(*s, header(sid, s->round, seq)));
    book.folded(*s, 64, 1.0, now);
  }
}

} // namespace

TEST_CASE("streams are found by id and by client and round, only their own "
          "client may write to them") {
  upload_ledger book{chunks, window};
  auto a = book.open("A", 1, 2.0, 0, 1, t0);
  auto b = book.open("B", 1, 1.0, 0, 1, t0);
  CHECK(a == 1); // 0 names downloads
  CHECK(b == 2);
  CHECK(book.find("A", 1) == a);
  CHECK_FALSE(book.find("A", 2));
  auto mine = book.owned("A", a);
  REQUIRE(mine);
  CHECK((*mine)->weight == 2.0);
  auto theirs = book.owned("A", b);
  REQUIRE_FALSE(theirs);
  CHECK(theirs.err().code == errc::not_authorized);
  auto unknown = book.owned("A", 9);
  REQUIRE_FALSE(unknown);
  CHECK(unknown.err().code == errc::unknown_stream);
  book.forget();
  CHECK_FALSE(book.find(a));
  CHECK(book.open("A", 2, 1.0, 0, 1, t0) == 3); // ids are not reused
}

TEST_CASE("a chunk must be the next one of its open stream, of its round") {
  upload_ledger book{chunks, window};
  auto sid = book.open("A", 4, 1.0, 0, 1, t0);
  auto& s = *book.find(sid);
  CHECK(upload_ledger::check_next(s, header(sid, 4, 0)));
  auto late = upload_ledger::check_next(s, header(sid, 3, 0));
  REQUIRE_FALSE(late);
  CHECK(late.err().code == errc::wrong_round);
  auto ahead = upload_ledger::check_next(s, header(sid, 4, 1));
  REQUIRE_FALSE(ahead);
  CHECK(ahead.err().code == errc::bad_sequence);
  book.folded(s, 100, 0.5, t0 + 1s);
  book.folded(s, 60, 0.25, t0 + 2s);
  CHECK(s.next_sequence == 2);
  CHECK(s.bytes == 160);
  CHECK(s.distance_squared == 0.75);
  CHECK(s.last_progress == t0 + 2s);
  CHECK(upload_ledger::check_next(s, header(sid, 4, 2)));
  upload_ledger::reject(s);
  auto closed = upload_ledger::check_next(s, header(sid, 4, 2));
  REQUIRE_FALSE(closed);
  CHECK(closed.err().code == errc::unknown_stream);
}

TEST_CASE("a stream waiting for the window is never silent, one that could "
          "send is, after the idle time since its last progress") {
  upload_ledger book{chunks, window};
  auto a = book.open("A", 1, 1.0, 0, 1, t0);
  auto b = book.open("B", 1, 1.0, 0, 1, t0);
  auto& sa = *book.find(a);
  // A sent two chunks whose credits the window holds: it cannot send.
  for (int k = 0; k < 2; ++k) {
    book.folded(sa, 64, 0, t0);
    book.hold(sa, t0);
  }
  CHECK_FALSE(book.could_send(sa));
  CHECK(book.silent(t0 + 10s, 5s) == std::vector<uint64_t>{b});
  CHECK(book.silent(t0 + 5s, 5s).empty()); // exactly idle: not yet
  // One credit comes back at 8 s: A could send, and is silent from 13 s.
  book.release(a, t0 + 8s);
  CHECK(sa.held == 1);
  CHECK(book.could_send(sa));
  CHECK(book.silent(t0 + 12s, 5s) == std::vector<uint64_t>{b});
  CHECK(book.silent(t0 + 14s, 5s) == std::vector<uint64_t>{a, b});
  // Every chunk sent: its end may come only once every credit is back.
  book.folded(sa, 64, 0, t0 + 14s);
  CHECK_FALSE(book.could_send(sa));
  book.release(a, t0 + 15s);
  CHECK(book.could_send(sa));
  book.release(99, t0 + 15s); // a stream forgotten: nothing to do
  upload_ledger::reject(*book.find(b));
  CHECK(book.silent(t0 + 100s, 5s) == std::vector<uint64_t>{a});
}

TEST_CASE("credits are owed only for chunks an open stream sent") {
  upload_ledger book{chunks, window};
  auto sid = book.open("A", 1, 1.0, 0, 1, t0);
  auto& s = *book.find(sid);
  CHECK_FALSE(upload_ledger::owes_credit(s, sid, 0));
  book.folded(s, 64, 0, t0);
  CHECK(upload_ledger::owes_credit(s, sid, 0));
  auto ahead = upload_ledger::owes_credit(s, sid, 1);
  REQUIRE_FALSE(ahead);
  CHECK(ahead.err().code == errc::unknown_stream);
}

TEST_CASE("an end closes a complete stream once, a short or rejected one is "
          "refused") {
  upload_ledger book{chunks, window};
  auto a = book.open("A", 1, 1.0, 0, 1, t0);
  auto& s = *book.find(a);
  book.folded(s, 64, 0, t0);
  auto early = book.end(s, a, chunks);
  REQUIRE_FALSE(early);
  CHECK(early.err().code == errc::bad_sequence);
  CHECK(early.err().message == "stream 1 ended after 1 of 3 chunks");
  CHECK_FALSE(s.closed);
  book.folded(s, 64, 0, t0);
  book.folded(s, 64, 0, t0);
  auto lying = book.end(s, a, chunks + 1); // declares another count
  REQUIRE_FALSE(lying);
  CHECK(book.next_chunk(s) == 3);
  auto first = book.end(s, a, chunks);
  REQUIRE(first);
  CHECK(*first == upload_ledger::ending::closed);
  auto again = book.end(s, a, chunks); // the answer was lost
  REQUIRE(again);
  CHECK(*again == upload_ledger::ending::repeated);
  auto b = book.open("B", 1, 1.0, 0, 1, t0);
  auto& r = *book.find(b);
  upload_ledger::reject(r);
  auto refused = book.end(r, b, chunks);
  REQUIRE_FALSE(refused);
  CHECK(refused.err().code == errc::poisoned_update);
}

TEST_CASE("the sum holds closed, unrejected updates, abandoned and cut-off "
          "ones count as updates") {
  upload_ledger book{chunks, window};
  auto a = book.open("A", 1, 1.0, 0, 1, t0);
  auto b = book.open("B", 1, 1.0, 0, 1, t0);
  auto c = book.open("C", 1, 1.0, 0, 1, t0);
  auto d = book.open("D", 1, 1.0, 0, 1, t0);
  fold_all(book, a, t0);
  REQUIRE(book.end(*book.find(a), a, chunks));
  book.folded(*book.find(b), 64, 0, t0); // B: one chunk, then gone
  CHECK(book.open_count() == 3);
  CHECK(book.abandon("B", 1) == 1u);
  CHECK(book.abandon("B", 1) == std::nullopt); // closed already
  CHECK(book.abandon("Z", 1) == std::nullopt);
  CHECK(book.abandon("C", 1) == 0u);    // open, nothing delivered
  upload_ledger::reject(*book.find(d)); // D: rejected with nothing folded
  CHECK(book.open_count() == 0);
  CHECK(book.in_sum() == std::vector<std::string>{"A", "B", "C"});
  CHECK(book.updates() == 3); // all but D
  auto per_client = book.by_client({{a, 5}, {c, 2}, {d, 1}, {42, 7}});
  CHECK(per_client == std::vector<std::pair<std::string, uint64_t>>{
                          {"A", 5}, {"C", 2}, {"D", 1}});
}

TEST_CASE("a stream slower than the minimum over the rate window is slow, "
          "one waiting for the window is not") {
  upload_ledger book{chunks, window, 10s};
  CHECK(book.rate_window() == 10s);
  auto a = book.open("A", 1, 1.0, 0, 1, t0);
  auto b = book.open("B", 1, 1.0, 0, 1, t0);
  auto& sa = *book.find(a);
  auto& sb = *book.find(b);
  // A: one chunk of 64 bytes at 1 s, its credit held by the window from
  // then on. B: one chunk of 64 bytes at 1 s, credit returned at once.
  book.folded(sa, 64, 0, t0 + 1s);
  book.hold(sa, t0 + 1s);
  book.hold(sa, t0 + 1s); // both credits held: A cannot send
  book.folded(sb, 64, 0, t0 + 1s);
  CHECK(book.slow(t0 + 9s, 100).empty());   // not a whole window yet
  auto slow = book.slow(t0 + 10500ms, 100); // B: 64 bytes in 10 s
  REQUIRE(slow.size() == 1);
  CHECK(slow[0].first == b);
  CHECK(slow[0].second == doctest::Approx(6.4));
  CHECK(book.slow(t0 + 10500ms, 6.0).empty());
  // A could send for 1 s only: the window's wait is not its fault.
  CHECK(book.slow(t0 + 100s, 100) ==
        std::vector<std::pair<uint64_t, double>>{{b, 0.0}});
  upload_ledger::reject(sb); // closed streams are not judged
  CHECK(book.slow(t0 + 100s, 100).empty());
  upload_ledger unmeasured{chunks, window};
  auto c = unmeasured.open("C", 1, 1.0, 0, 1, t0);
  CHECK(c == 1);
  CHECK(unmeasured.slow(t0 + 1000s, 1e9).empty());
}
