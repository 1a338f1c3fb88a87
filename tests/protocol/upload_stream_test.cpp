// A client's upload driven by hand with the server's answers made as the
// server makes them: the accept and its window, chunks as frames, credits
// in order, a resumed stream and the chunks it sends again, a reset, a
// restart, and the hooks (an encoder's bytes sent as they are, masking in
// place on aligned memory with its clipped values counted).

#include <doctest/doctest.h>

#include <cstring>
#include <vector>

#include "protocol/upload_stream.hpp"
#include "tests/protocol/small_model.hpp"

using namespace fedcaf;

namespace {

using testing::small_model;

struct fixture {
  manifest layout = small_model();
  std::shared_ptr<const chunk_plan> plan{
      std::make_shared<const chunk_plan>(*chunk_plan::make(layout, 64))};
  std::vector<std::byte> bytes = std::vector<std::byte>(212);
  const_model_view model;

  fixture() {
    for (size_t i = 0; i < bytes.size(); ++i)
      bytes[i] = static_cast<std::byte>(i);
    model = split_contiguous(layout, std::span<const std::byte>{bytes});
  }

  static msg::frame accept(uint32_t window, uint64_t first = 0,
                           uint64_t next = 0) {
    return msg::encode(msg::accept{77, window, next, first});
  }
  static msg::frame credit(uint64_t seq) {
    return msg::encode(msg::credit{77, seq});
  }
};

} // namespace

TEST_CASE("an accepted upload sends the model's chunks under the window and "
          "completes with the last credit") {
  fixture x;
  upload_stream u{x.plan, 5, 3, {}};
  CHECK_FALSE(u.can_send()); // nothing before the accept
  auto a = u.on_accept(fixture::accept(8));
  REQUIRE(a);
  CHECK_FALSE(a->sit_out);
  CHECK(a->first_owed == a->next_owed);
  std::vector<uint64_t> sent;
  while (u.can_send()) {
    auto out = u.take_chunk(x.model);
    auto c = msg::decode_chunk(out.frame, 64);
    REQUIRE(c);
    const auto& e = x.plan->extent(out.seq);
    CHECK(c->header.stream_id == 77);
    CHECK(c->header.round == 5);
    CHECK(c->header.sequence == out.seq);
    CHECK(c->header.tensor_index == e.tensor_index);
    CHECK(c->header.byte_offset == e.tensor_offset);
    CHECK(out.payload_bytes == e.bytes);
    CHECK_FALSE(out.resent);
    CHECK(std::memcmp(c->bytes.data(), x.bytes.data() + e.model_offset,
                      e.bytes) == 0);
    sent.push_back(out.seq);
  }
  CHECK(sent == std::vector<uint64_t>{0, 1, 2}); // the round's window: 3
  CHECK(u.peak_in_flight() == 3);
  auto c0 = u.on_credit(fixture::credit(0));
  REQUIRE(c0);
  CHECK(*c0 == upload_stream::credit_outcome::more);
  CHECK(u.take_chunk(x.model).seq == 3);
  CHECK_FALSE(u.on_credit(fixture::credit(2))); // out of order
}

TEST_CASE("the last credit completes the stream, its end names the chunks") {
  fixture x;
  upload_stream u{x.plan, 5, 8, {}};
  REQUIRE(u.on_accept(fixture::accept(8)));
  while (u.can_send())
    u.take_chunk(x.model);
  for (uint64_t seq = 0; seq < 3; ++seq)
    CHECK(*u.on_credit(fixture::credit(seq)) ==
          upload_stream::credit_outcome::more);
  CHECK(*u.on_credit(fixture::credit(3)) ==
        upload_stream::credit_outcome::complete);
  CHECK(u.complete());
  CHECK(u.end().stream_id == 77);
  CHECK(u.end().chunk_count == 4);
}

TEST_CASE("a client not in the round sits out, a reset is not an error") {
  fixture x;
  upload_stream u{x.plan, 5, 8, {}};
  auto a = u.on_accept(msg::encode(error{errc::not_in_round, "too late"}));
  REQUIRE(a);
  REQUIRE(a->sit_out);
  CHECK(*a->sit_out == "too late");
  // The round closed as the offer went out: it waits for the next one.
  auto closed = u.on_accept(msg::encode(error{errc::wrong_round, "over"}));
  REQUIRE(closed);
  REQUIRE(closed->sit_out);
  auto broken = u.on_accept(msg::encode(error{errc::manifest_mismatch, "?"}));
  REQUIRE_FALSE(broken);
  REQUIRE(u.on_accept(fixture::accept(2)));
  auto reset = u.on_credit(msg::encode(error{errc::stream_reset, "again"}));
  REQUIRE(reset);
  CHECK(*reset == upload_stream::credit_outcome::reset);
  auto other = u.on_credit(msg::encode(error{errc::bad_checksum, "no"}));
  REQUIRE_FALSE(other);
  CHECK(other.err().code == errc::bad_checksum);
}

TEST_CASE("a resumed upload is owed the credits in flight, goes on where "
          "the server's stream stands, and counts chunks sent again") {
  fixture x;
  upload_stream u{x.plan, 5, 4, {}};
  REQUIRE(u.on_accept(fixture::accept(4)));
  u.take_chunk(x.model);
  u.take_chunk(x.model);
  u.take_chunk(x.model); // 0..2 sent; then the connection is lost
  auto resumed = u.on_accept(fixture::accept(4, 1, 2));
  REQUIRE(resumed);
  CHECK(resumed->first_owed == 1);
  CHECK(resumed->next_owed == 2);
  CHECK(u.credit_request(1).stream_id == 77);
  auto again = u.take_chunk(x.model);
  CHECK(again.seq == 2);
  CHECK(again.resent);
  auto fresh = u.take_chunk(x.model);
  CHECK(fresh.seq == 3);
  CHECK_FALSE(fresh.resent);
  CHECK_FALSE(u.on_accept(fixture::accept(4, 0, 5))); // past the last chunk
  // Acknowledged beyond what it says was sent: the codec refuses the frame,
  // so the window cannot run backwards.
  CHECK_FALSE(u.on_accept(fixture::accept(4, 3, 2)));
}

TEST_CASE("a restart counts what was acknowledged and sends from chunk 0") {
  fixture x;
  upload_stream u{x.plan, 5, 4, {}};
  CHECK(u.restart() == 0); // never accepted
  REQUIRE(u.on_accept(fixture::accept(4)));
  u.take_chunk(x.model);
  u.take_chunk(x.model);
  REQUIRE(u.on_credit(fixture::credit(0)));
  REQUIRE(u.on_credit(fixture::credit(1)));
  CHECK(u.restart() == 2 * x.plan->chunk_bytes());
  CHECK_FALSE(u.can_send());
  REQUIRE(u.on_accept(fixture::accept(4)));
  auto first = u.take_chunk(x.model);
  CHECK(first.seq == 0);
  CHECK_FALSE(first.resent); // counted by restart, not twice
}

TEST_CASE("an encoder's bytes are sent as they are") {
  fixture x;
  std::vector<std::byte> encoded(5, std::byte{0x5a});
  upload_stream::hooks how;
  how.encode = [&encoded](uint64_t seq, const const_model_view&) {
    encoded[0] = static_cast<std::byte>(seq);
    return std::span<const std::byte>{encoded};
  };
  upload_stream u{x.plan, 5, 4, how};
  REQUIRE(u.on_accept(fixture::accept(4)));
  u.take_chunk(x.model);
  auto out = u.take_chunk(x.model);
  CHECK(out.payload_bytes == 5);
  auto c = msg::decode_chunk(out.frame, 64);
  REQUIRE(c);
  CHECK(c->bytes.size() == 5);
  CHECK(c->bytes[0] == std::byte{1});
  CHECK(c->bytes[4] == std::byte{0x5a});
}

TEST_CASE("masking sees aligned values in place and its clipped values are "
          "counted until taken") {
  fixture x;
  std::vector<uint64_t> firsts;
  upload_stream::hooks how;
  how.mask = [&firsts](uint64_t first, std::span<std::byte> values) {
    CHECK(reinterpret_cast<uintptr_t>(values.data()) % 4 == 0);
    firsts.push_back(first);
    std::memset(values.data(), 0xff, values.size());
    return uint64_t{2};
  };
  upload_stream u{x.plan, 5, 4, how};
  REQUIRE(u.on_accept(fixture::accept(4)));
  while (u.can_send()) {
    auto out = u.take_chunk(x.model);
    auto c = msg::decode_chunk(out.frame, 64);
    REQUIRE(c); // the checksum covers the masked bytes
    for (auto b : c->bytes)
      CHECK(b == std::byte{0xff});
  }
  CHECK(firsts == std::vector<uint64_t>{0, 16, 32, 48});
  CHECK(u.take_clipped() == 8);
  CHECK(u.take_clipped() == 0);
}
