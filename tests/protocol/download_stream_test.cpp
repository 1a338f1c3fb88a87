// A client's download driven by hand against chunk frames made as the
// server makes them: the window of fetches, each chunk written into the
// model, chunks refused (another fetch, another slot of the plan, a bad
// checksum, out of order), a lost connection that fetches again, and
// compressed downloads decoded with the encoder's hook seeing the values
// before they overwrite the model.

#include <doctest/doctest.h>

#include <cstring>
#include <vector>

#include "protocol/download_stream.hpp"
#include "tests/protocol/small_model.hpp"

using namespace fedcaf;

namespace {

using testing::small_model;

/// A model's bytes, each float32 value i set to `base + i / 4`.
std::vector<std::byte> model_bytes(const manifest& m, float base) {
  std::vector<float> values(m.total_bytes() / 4);
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = base + static_cast<float>(i) / 4;
  std::vector<std::byte> out(m.total_bytes());
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

struct fixture {
  manifest layout = small_model();
  std::shared_ptr<const chunk_plan> plan{
      std::make_shared<const chunk_plan>(*chunk_plan::make(layout, 64))};
  std::vector<std::byte> server = model_bytes(layout, 1.0f);
  std::vector<std::byte> client = model_bytes(layout, -7.0f);
  model_view view = split_contiguous(layout, std::span{client});

  msg::round_start announced(uint32_t window) const {
    msg::round_start rs;
    rs.round = 3;
    rs.model_version = 9;
    rs.model = layout;
    rs.chunk_bytes = 64;
    rs.window = window;
    return rs;
  }

  /// Chunk `seq` as the server sends it (header fields overridable).
  msg::frame chunk(uint64_t seq, uint64_t tensor_offset_delta = 0) const {
    const auto& e = plan->extent(seq);
    msg::chunk_header h{0, 3, seq, e.tensor_index,
                        e.tensor_offset + tensor_offset_delta};
    return msg::encode_chunk(h, e.bytes, [this, &e](std::span<std::byte> d) {
      std::memcpy(d.data(), server.data() + e.model_offset, d.size());
    });
  }

  bool chunk_arrived(uint64_t seq) const {
    const auto& e = plan->extent(seq);
    return std::memcmp(client.data() + e.model_offset,
                       server.data() + e.model_offset, e.bytes) == 0;
  }
};

} // namespace

TEST_CASE("a download keeps at most `window` fetches unanswered and writes "
          "each chunk into the model") {
  fixture x;
  REQUIRE(x.plan->chunk_count() == 4);
  download_stream d{x.plan, x.announced(2), {}};
  auto first = d.take_fetch();
  CHECK(first.round == 3);
  CHECK(first.model_version == 9);
  CHECK(first.sequence == 0);
  CHECK(d.take_fetch().sequence == 1);
  CHECK_FALSE(d.can_fetch());
  for (uint64_t seq = 0; seq < 4; ++seq) {
    auto got = d.receive(seq, x.chunk(seq), x.view);
    REQUIRE(got);
    CHECK(got->wire_bytes == x.plan->extent(seq).bytes);
    CHECK(got->extent.model_offset == x.plan->extent(seq).model_offset);
    CHECK(x.chunk_arrived(seq));
    CHECK_FALSE(d.complete());
    REQUIRE(d.ack(seq));
    if (d.can_fetch())
      CHECK(d.take_fetch().sequence == seq + 2);
  }
  CHECK(d.complete());
  CHECK(d.peak_in_flight() == 2);
  CHECK(x.client == x.server);
}

TEST_CASE("a window of 0 counts as 1") {
  fixture x;
  download_stream d{x.plan, x.announced(0), {}};
  REQUIRE(d.can_fetch());
  d.take_fetch();
  CHECK_FALSE(d.can_fetch());
}

TEST_CASE("a chunk that is not the one fetched, or not where the plan puts "
          "it, is refused and the model is left as it was") {
  fixture x;
  download_stream d{x.plan, x.announced(4), {}};
  d.take_fetch();
  d.take_fetch();
  auto before = x.client;
  auto other = d.receive(1, x.chunk(0), x.view);
  REQUIRE_FALSE(other);
  CHECK(other.err().code == errc::bad_sequence);
  auto shifted = d.receive(0, x.chunk(0, 4), x.view);
  REQUIRE_FALSE(shifted);
  auto broken = x.chunk(0);
  auto view = msg::decode_chunk(broken, 64);
  REQUIRE(view);
  auto at = reinterpret_cast<const char*>(view->bytes.data()) - broken.data();
  broken[at] = static_cast<char>(broken[at] ^ 1); // a payload byte
  CHECK_FALSE(d.receive(0, broken, x.view));
  CHECK(x.client == before);
}

TEST_CASE("answers out of order are refused at the ack") {
  fixture x;
  download_stream d{x.plan, x.announced(4), {}};
  d.take_fetch();
  d.take_fetch();
  REQUIRE(d.receive(1, x.chunk(1), x.view));
  CHECK_FALSE(d.ack(1));
}

TEST_CASE("after a lost connection the fetches in flight go again") {
  fixture x;
  download_stream d{x.plan, x.announced(3), {}};
  for (int i = 0; i < 3; ++i)
    d.take_fetch();
  REQUIRE(d.receive(0, x.chunk(0), x.view));
  REQUIRE(d.ack(0));
  // chunks 1 and 2 are lost with the connection
  CHECK(d.rewind() == 2 * x.plan->chunk_bytes());
  CHECK(d.take_fetch().sequence == 1);
  CHECK(d.take_fetch().sequence == 2);
  CHECK(d.take_fetch().sequence == 3);
  for (uint64_t seq = 1; seq < 4; ++seq) {
    REQUIRE(d.receive(seq, x.chunk(seq), x.view));
    REQUIRE(d.ack(seq));
  }
  CHECK(d.complete());
  CHECK(x.client == x.server);
}

TEST_CASE("compressed downloads are decoded, the hook sees each chunk's "
          "values while the model still holds the old ones") {
  fixture x;
  compression_config z;
  z.method = compression_method::bf16;
  z.down = true;
  std::vector<uint64_t> seen;
  auto hook = [&x, &seen](uint64_t seq, std::span<const std::byte> values) {
    CHECK_FALSE(x.chunk_arrived(seq)); // not yet written
    CHECK(values.size() == x.plan->extent(seq).bytes);
    seen.push_back(seq);
  };
  download_stream d{x.plan, x.announced(4), z, hook};
  CHECK(d.max_payload_bytes() >= x.plan->chunk_bytes());
  for (uint64_t seq = 0; seq < 4; ++seq) {
    d.take_fetch();
    const auto& e = x.plan->extent(seq);
    std::vector<float> values(e.bytes / 4);
    std::memcpy(values.data(), x.server.data() + e.model_offset, e.bytes);
    msg::chunk_header h{0, 3, seq, e.tensor_index, e.tensor_offset};
    auto f = msg::encode_chunk(
        h, encoded_bound(z, values.size()),
        [&z, &values](std::span<std::byte> dst) { encode(z, values, dst); });
    auto got = d.receive(seq, f, x.view);
    REQUIRE(got);
    CHECK(got->wire_bytes == e.bytes / 2);
    REQUIRE(d.ack(seq));
  }
  CHECK(seen == std::vector<uint64_t>{0, 1, 2, 3});
  CHECK(x.client == x.server); // quarter steps are exact in bfloat16
}
