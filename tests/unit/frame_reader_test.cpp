#include <doctest/doctest.h>

#include <cstring>
#include <vector>

#include "messages/codec.hpp"
#include "messages/frame_reader.hpp"

using namespace fedcaf;
using namespace fedcaf::msg;

namespace {

/// A stream of three frames of different kinds and sizes.
std::vector<frame> sample_frames() {
  std::vector<frame> out;
  out.push_back(encode(hello{"Client1", "secret"}));
  out.push_back(encode_chunk({7, 2, 3, 0, 64}, 1000, [](auto dst) {
    for (size_t i = 0; i < dst.size(); ++i)
      dst[i] = static_cast<std::byte>(i * 7);
  }));
  out.push_back(encode(credit{7, 3}));
  set_request_id(out[0], 1);
  set_request_id(out[1], 2);
  return out;
}

std::vector<char> concatenated(const std::vector<frame>& frames) {
  std::vector<char> out;
  for (const auto& f : frames)
    out.insert(out.end(), f.begin(), f.end());
  return out;
}

frame header_only(uint32_t id, uint32_t flags, uint32_t segments_minus_one,
                  uint32_t words) {
  frame f(frame_header_bytes);
  uint32_t h[4] = {id, flags, segments_minus_one, words};
  std::memcpy(f.data(), h, sizeof h);
  return f;
}

} // namespace

TEST_CASE("frames split at every point come out whole and in order") {
  auto frames = sample_frames();
  auto bytes = concatenated(frames);
  for (size_t cut = 0; cut <= bytes.size(); cut += 3) {
    frame_reader reader{1 << 20};
    std::vector<frame> got;
    auto take = [&](frame&& f) { got.push_back(std::move(f)); };
    auto all = std::span<const char>{bytes};
    REQUIRE(reader.feed(all.first(cut), take));
    REQUIRE(reader.feed(all.subspan(cut), take));
    REQUIRE(got.size() == frames.size());
    for (size_t i = 0; i < frames.size(); ++i)
      CHECK(got[i] == frames[i]);
    CHECK(reader.pending_bytes() == 0);
  }
  frame_reader reader{1 << 20};
  std::vector<frame> got;
  for (char c : bytes) // one byte at a time, through next() and commit()
  {
    auto dst = reader.next();
    REQUIRE(!dst.empty());
    dst[0] = c;
    auto r = reader.commit(1);
    REQUIRE(r);
    if (*r)
      got.push_back(std::move(**r));
  }
  REQUIRE(got.size() == 3);
  CHECK(request_id(got[0]) == 1);
  CHECK(request_id(got[1]) == 2);
  CHECK(request_id(got[2]) == 0);
  CHECK(decode<hello>(got[0])->token == "secret");
  CHECK(decode_chunk(got[1], 1 << 20)->header.sequence == 3);
  CHECK(*kind_of(got[2]) == frame_kind::credit);
}

TEST_CASE("a header past the limit is refused before its body is buffered") {
  frame_reader reader{64 << 10};
  auto h = header_only(1, 0, 0, 0xffffffffu); // about 32 GiB announced
  auto r = reader.feed(h, [](frame&&) { FAIL("no frame expected"); });
  REQUIRE_FALSE(r);
  CHECK(r.err().code == errc::frame_too_large);
  CHECK(reader.pending_bytes() == frame_header_bytes);
  // The reader stays failed.
  auto again = reader.commit(0);
  CHECK_FALSE(again);
  // Exactly at the limit is accepted.
  frame_reader exact{frame_header_bytes + 8 * 10};
  CHECK(exact.feed(header_only(1, 0, 0, 10), [](frame&&) {}));
  CHECK(exact.pending_bytes() == frame_header_bytes);
  frame_reader over{frame_header_bytes + 8 * 10 - 1};
  CHECK_FALSE(over.feed(header_only(1, 0, 0, 10), [](frame&&) {}));
}

TEST_CASE("flags, several segments and empty segments are malformed") {
  for (auto h : {header_only(1, 1, 0, 4), header_only(1, 0, 1, 4),
                 header_only(1, 0, 0, 0)}) {
    frame_reader reader{1 << 20};
    auto r = reader.feed(h, [](frame&&) {});
    REQUIRE_FALSE(r);
    CHECK(r.err().code == errc::malformed_frame);
  }
}

TEST_CASE("kind_of names every kind without decoding the body") {
  CHECK(*kind_of(encode(hello{"a", ""})) == frame_kind::hello);
  CHECK(*kind_of(encode_heartbeat()) == frame_kind::heartbeat);
  CHECK(*kind_of(encode(round_over{3})) == frame_kind::round_over);
  CHECK(decode<round_over>(encode(round_over{3}))->round == 3);
  CHECK(*kind_of(encode(error{errc::busy, "x"})) == frame_kind::error);
  CHECK(*kind_of(encode(fetch{1, 2, 3})) == frame_kind::fetch);
  frame garbage(24, 'x');
  CHECK_FALSE(kind_of(garbage));
}
