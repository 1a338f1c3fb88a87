// A window-mode relay's upstream client's fetches made again
// (protocol/refetch_queue): within the fetch window, one fetch per parent
// chunk for every request it covers, asked again after a lost connection,
// the bytes handed over once a request's chunks all came, nothing from a
// round before or after a refusal.

#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <vector>

#include "protocol/refetch_queue.hpp"

using namespace fedcaf;

namespace {

/// A parent whose chunk k (16 bytes at offset 16 k) is all value k, and
/// which refuses chunk 9.
struct fixture {
  std::vector<std::pair<uint64_t, std::vector<std::byte>>> given;
  refetch_queue queue{
      "R",
      [](uint64_t seq, const msg::frame& reply, uint64_t offset,
         std::span<std::byte> out) -> result<void> {
        if (reply.empty())
          return error{errc::not_in_round, "chunk " + std::to_string(seq)};
        for (size_t i = 0; i < out.size(); ++i) {
          auto at = offset + i;
          if (at / 16 == seq)
            out[i] = static_cast<std::byte>(reply[0]);
        }
        return {};
      },
      [this](uint64_t offset, std::span<const std::byte> bytes) {
        given.emplace_back(offset,
                           std::vector<std::byte>(bytes.begin(), bytes.end()));
      }};

  /// The fetch frames of the chunks touching [offset, + bytes).
  static std::vector<std::pair<uint64_t, msg::frame>> fetches(uint64_t offset,
                                                              uint64_t bytes) {
    std::vector<std::pair<uint64_t, msg::frame>> out;
    for (auto k = offset / 16; k * 16 < offset + bytes; ++k)
      out.emplace_back(k, msg::frame(1, static_cast<char>(k)));
    return out;
  }
  static msg::frame reply(uint64_t k) {
    return k == 9 ? msg::frame{} : msg::frame(1, static_cast<char>(k));
  }
};

} // namespace

TEST_CASE("fetches made again go within the window, one per parent chunk, "
          "and a request's bytes go over once all its chunks came") {
  fixture x;
  x.queue.ask(1, 8, 24, fixture::fetches(8, 24));   // chunks 0, 1
  x.queue.ask(1, 24, 16, fixture::fetches(24, 16)); // chunks 1, 2
  auto out = x.queue.next(1, 2);
  REQUIRE(out.size() == 2); // 0 and 1; the second request's 1 waits on it
  CHECK(out[0].seq == 0);
  CHECK(out[1].seq == 1);
  CHECK(x.queue.next(1, 2).empty()); // the window is full
  x.queue.answered(out[0], fixture::reply(0), 1);
  CHECK(x.given.empty());
  x.queue.answered(out[1], fixture::reply(1), 1);
  REQUIRE(x.given.size() == 1); // the first request: chunks 0 and 1
  CHECK(x.given[0].first == 8);
  CHECK(x.given[0].second[0] == std::byte{0});
  CHECK(x.given[0].second[8] == std::byte{1});
  auto more = x.queue.next(1, 2);
  REQUIRE(more.size() == 1);
  CHECK(more[0].seq == 2);
  x.queue.answered(more[0], fixture::reply(2), 1);
  REQUIRE(x.given.size() == 2);
  CHECK(x.given[1].first == 24);
  CHECK(x.given[1].second.size() == 16);
  CHECK(x.given[1].second[0] == std::byte{1});
  CHECK(x.given[1].second[15] == std::byte{2});
}

TEST_CASE("the last answer serves the requests for its chunk that come next") {
  fixture x;
  x.queue.ask(1, 32, 4, fixture::fetches(32, 4));
  auto out = x.queue.next(1, 4);
  REQUIRE(out.size() == 1);
  x.queue.answered(out[0], fixture::reply(2), 1);
  REQUIRE(x.given.size() == 1);
  x.queue.ask(1, 40, 4, fixture::fetches(40, 4)); // chunk 2 again
  CHECK(x.queue.next(1, 4).empty());              // served from the last answer
  REQUIRE(x.given.size() == 2);
  CHECK(x.given[1].second[0] == std::byte{2});
}

TEST_CASE("what was in flight on a lost connection is asked again, and its "
          "late answer is not taken") {
  fixture x;
  x.queue.ask(1, 0, 16, fixture::fetches(0, 16));
  auto out = x.queue.next(1, 4);
  REQUIRE(out.size() == 1);
  x.queue.lost();
  x.queue.answered(out[0], fixture::reply(0), 1); // the old gateway's
  CHECK(x.given.empty());
  auto again = x.queue.next(1, 4);
  REQUIRE(again.size() == 1);
  CHECK(again[0].seq == 0);
  CHECK(again[0].epoch != out[0].epoch);
  x.queue.failed(again[0]); // a failed request: asked again
  auto third = x.queue.next(1, 4);
  REQUIRE(third.size() == 1);
  x.queue.answered(third[0], fixture::reply(0), 1);
  CHECK(x.given.size() == 1);
}

TEST_CASE("a refused chunk hands over nothing, and requests of a round "
          "before are dropped") {
  fixture x;
  x.queue.ask(1, 144, 32, fixture::fetches(144, 32)); // chunks 9, 10
  auto out = x.queue.next(1, 4);
  REQUIRE(out.size() == 2);
  x.queue.answered(out[0], fixture::reply(9), 1); // refused
  REQUIRE(x.given.size() == 1);
  CHECK(x.given[0].second.empty()); // the trainer hears it could not be
  x.queue.answered(out[1], fixture::reply(10), 1);
  CHECK(x.given.size() == 1); // nothing more for that request
  x.queue.ask(1, 0, 16, fixture::fetches(0, 16));
  CHECK(x.queue.next(2, 4).empty()); // round 2 now: dropped
  CHECK(x.given.size() == 1);
}
