#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include <doctest/doctest.h>

#include "messages/codec.hpp"

using namespace fedcaf;
using namespace fedcaf::msg;

namespace {

frame chunk_frame(const chunk_header& h,
                  const std::vector<std::byte>& payload) {
  return encode_chunk(h, payload.size(), [&](std::span<std::byte> dst) {
    std::memcpy(dst.data(), payload.data(), payload.size());
  });
}

std::vector<std::byte> pattern(size_t n) {
  std::vector<std::byte> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = std::byte(i * 7 + 3);
  return v;
}

/// Returns a copy of `f` cut to `n` bytes.
frame cut(const frame& f, size_t n) {
  return frame(f.begin(), f.begin() + static_cast<long>(n));
}

} // namespace

TEST_CASE("every small message survives a round trip") {
  auto h = decode<hello>(encode(hello{"Client7", "token"}));
  REQUIRE(h);
  CHECK(h->client_id == "Client7");
  CHECK(h->token == "token");

  manifest m;
  m.tensors.push_back(make_tensor_info("conv.weight", dtype::float32, {2, 3}));
  m.tensors.push_back(make_tensor_info("bias", dtype::bfloat16, {5}));
  round_start rs{4, 9, m, 4096, 3, {3, 0.81, 0.52, true}, true, true};
  auto r = decode<round_start>(encode(rs));
  REQUIRE(r);
  CHECK(r->round == 4);
  CHECK(r->model_version == 9);
  CHECK(r->model == m);
  CHECK(r->chunk_bytes == 4096);
  CHECK(r->window == 3);
  CHECK(r->previous.test_accuracy == doctest::Approx(0.81));
  CHECK(r->resend);
  CHECK(r->evaluate_only);

  offer o{2,  "Client1", 30000, 0xabcdef, 1 << 20,
          16, 0.4,       1.5,   0,        {{"loss", 0.4}, {"top5.acc", 0.9}}};
  auto od = decode<offer>(encode(o));
  REQUIRE(od);
  CHECK(od->client_id == "Client1");
  CHECK(od->sample_count == 30000);
  CHECK(od->manifest_digest == 0xabcdef);
  CHECK(od->chunk_count == 16);
  CHECK(od->metrics == o.metrics);
  CHECK_FALSE(od->partial_sum);
  CHECK_FALSE(od->grid_sums);
  o.partial_sum = o.grid_sums = true; // a relay's int32 sums on the grid
  auto sums = decode<offer>(encode(o));
  REQUIRE(sums);
  CHECK(sums->partial_sum);
  CHECK(sums->grid_sums);
  auto ev =
      decode<evaluation>(encode(evaluation{3, 5000, {{"accuracy", 0.9}}}));
  REQUIRE(ev);
  CHECK(ev->round == 3);
  CHECK(ev->sample_count == 5000);
  CHECK(ev->metrics == named_values{{"accuracy", 0.9}});

  auto a = decode<accept>(encode(accept{5, 4}));
  REQUIRE(a);
  CHECK(a->stream_id == 5);
  CHECK(a->next_sequence == 0);
  auto resumed = decode<accept>(encode(accept{5, 4, 12, 9}));
  REQUIRE(resumed);
  CHECK(resumed->next_sequence == 12);
  CHECK(resumed->first_unacknowledged == 9);
  // Credits owed for chunks never sent are a peer's error.
  auto bogus = decode<accept>(encode(accept{5, 4, 3, 9}));
  REQUIRE_FALSE(bogus);
  CHECK(bogus.err().code == errc::bad_sequence);
  auto c = decode<credit>(encode(credit{5, 11}));
  REQUIRE(c);
  CHECK(c->sequence == 11);
  auto fe = decode<fetch>(encode(fetch{1, 2, 3}));
  REQUIRE(fe);
  CHECK(fe->sequence == 3);
  auto e = decode<end_of_stream>(encode(end_of_stream{5, 16}));
  REQUIRE(e);
  CHECK(e->chunk_count == 16);
  auto d = decode<done>(encode(done{3, {3, 0.9, 0.3, true}, ""}));
  REQUIRE(d);
  CHECK(d->rounds == 3);
  client_terms terms{5000, 30000, 60000, 30000, 16 << 20, true,
                     true, 1.5,   3,     0,     1e-3};
  auto w = decode<welcome>(encode(welcome{1, 2, "train_configs: {}", terms}));
  REQUIRE(w);
  CHECK(w->client_configs == "train_configs: {}");
  CHECK(w->terms == terms); // what a client must obey, typed
  terms.grid_sums = true;   // a relay's sums folded on the exact grid
  auto grid = decode<welcome>(encode(welcome{1, 2, "", terms}));
  REQUIRE(grid);
  CHECK(grid->terms.grid_sums);
  CHECK_FALSE(grid->terms.chunk_float_sums);
  terms.chunk_float_sums = true; // ... and Chunk.floatSums read in them
  auto floats = decode<welcome>(encode(welcome{1, 2, "", terms}));
  REQUIRE(floats);
  CHECK(floats->terms == terms);
}

TEST_CASE("figures a client reports are refused when malformed") {
  auto refused = [](named_values v, uint64_t samples = 1) {
    auto r = decode<evaluation>(encode(evaluation{1, samples, std::move(v)}));
    return !r && r.err().code == errc::malformed_frame;
  };
  CHECK_FALSE(refused({{"accuracy", 0.5}, {"loss/val", 1.0}}));
  CHECK(refused({{"", 1.0}}));
  CHECK(refused({{std::string(65, 'a'), 1.0}}));
  CHECK(refused({{"acc\nround 9", 1.0}})); // no log lines smuggled in
  CHECK(refused({{"a", 1.0}, {"a", 2.0}}));
  CHECK(refused({{"a", std::nan("")}}));
  CHECK(refused({{"a", INFINITY}}));
  CHECK(refused({{"a", 1.0001e12}})); // sums weighted by samples stay finite
  CHECK_FALSE(refused({{"a", -1e12}}));
  named_values many;
  for (int i = 0; i <= static_cast<int>(max_named_values); ++i)
    many.emplace_back("m" + std::to_string(i), i);
  CHECK(refused(many));
  CHECK(refused({}, max_evaluation_samples + 1));
  CHECK_FALSE(refused({}, max_evaluation_samples));
  auto k = kind_of(encode(evaluation{}));
  REQUIRE(k);
  CHECK(*k == frame_kind::evaluation);
}

TEST_CASE(
    "a chunk carries its bytes and header, the view points into the frame") {
  auto payload = pattern(1000);
  chunk_header h{7, 2, 5, 3, 128};
  auto f = chunk_frame(h, payload);
  auto c = decode_chunk(f, 4096);
  REQUIRE(c);
  CHECK(c->header.stream_id == 7);
  CHECK(c->header.round == 2);
  CHECK(c->header.sequence == 5);
  CHECK(c->header.tensor_index == 3);
  CHECK(c->header.byte_offset == 128);
  CHECK_FALSE(c->header.float_sums);
  h.float_sums = true; // a streaming relay's chunk of float sums
  auto floats = decode_chunk(chunk_frame(h, payload), 4096);
  REQUIRE(floats);
  CHECK(floats->header.float_sums);
  REQUIRE(c->bytes.size() == 1000);
  CHECK(std::memcmp(c->bytes.data(), payload.data(), 1000) == 0);
  auto* begin = reinterpret_cast<const std::byte*>(f.data());
  CHECK(c->bytes.data() > begin);
  CHECK(c->bytes.data() < begin + f.size());
}

TEST_CASE("a flipped payload bit fails the checksum") {
  auto payload = pattern(512);
  auto f = chunk_frame({1, 1, 0, 0, 0}, payload);
  auto at = std::search(f.begin(), f.end(),
                        reinterpret_cast<const char*>(payload.data()),
                        reinterpret_cast<const char*>(payload.data()) + 512);
  REQUIRE(at != f.end());
  *(at + 100) ^= 0x10;
  auto c = decode_chunk(f, 4096);
  REQUIRE_FALSE(c);
  CHECK(c.err().code == errc::bad_checksum);
}

TEST_CASE("every truncation of a frame is an error, never a crash") {
  auto f = chunk_frame({1, 1, 0, 0, 0}, pattern(300));
  for (size_t n = 0; n < f.size(); ++n) {
    CAPTURE(n);
    auto c = decode_chunk(cut(f, n), 4096);
    CHECK_FALSE(c);
  }
  manifest m;
  m.tensors.push_back(make_tensor_info("w", dtype::float32, {4}));
  auto rs = encode(round_start{1, 1, m, 64, 2, {}});
  for (size_t n = 0; n < rs.size(); ++n)
    CHECK_FALSE(decode<round_start>(cut(rs, n)));
}

TEST_CASE("random bytes are refused as malformed") {
  std::mt19937_64 rng{7};
  for (int i = 0; i < 2000; ++i) {
    frame f((rng() % 64 + 1) * 8);
    for (auto& b : f)
      b = static_cast<char>(rng());
    auto c = decode_chunk(f, 1 << 16);
    if (c) // a random frame that decodes must still carry a valid checksum
      CHECK(checksum(c->bytes) != 0);
    (void)decode<round_start>(f);
    (void)decode<offer>(f);
  }
}

TEST_CASE("another protocol version is refused") {
  auto f = encode(credit{1, 2});
  // Root struct data starts after the envelope, the segment table and the
  // root pointer; its first two bytes are the version.
  uint16_t v = protocol_version() + 1;
  std::memcpy(f.data() + envelope_bytes + 16, &v, 2);
  auto c = decode<credit>(f);
  REQUIRE_FALSE(c);
  CHECK(c.err().code == errc::unsupported_version);
}

TEST_CASE("a frame of another kind is an unexpected message") {
  auto c = decode<credit>(encode(hello{"x", ""}));
  REQUIRE_FALSE(c);
  CHECK(c.err().code == errc::unexpected_message);
  CHECK_FALSE(decode_chunk(encode(credit{1, 2}), 1 << 20));
}

TEST_CASE("every frame kind has the name refusals say") {
  CHECK(std::string{frame_kind_name(frame_kind::hello)} == "hello");
  CHECK(std::string{frame_kind_name(frame_kind::round_start)} == "round start");
  CHECK(std::string{frame_kind_name(frame_kind::end_of_stream)} ==
        "end of stream");
  CHECK(std::string{frame_kind_name(frame_kind::secagg_receipt)} ==
        "secagg receipt");
  CHECK(std::string{frame_kind_name(static_cast<frame_kind>(200))} ==
        "unknown");
}

TEST_CASE("an error frame decodes as the peer's error") {
  auto f = encode(error{errc::bad_sequence, "chunk 3 after 1"});
  auto c = decode<credit>(f);
  REQUIRE_FALSE(c);
  CHECK(c.err().code == errc::bad_sequence);
  CHECK(c.err().message == "chunk 3 after 1");
}

TEST_CASE("a chunk larger than allowed is refused") {
  auto f = chunk_frame({1, 1, 0, 0, 0}, pattern(2048));
  auto c = decode_chunk(f, 1024);
  REQUIRE_FALSE(c);
}

TEST_CASE("a manifest with an unknown dtype or inconsistent size is refused") {
  manifest m;
  m.tensors.push_back(make_tensor_info("w", dtype::float32, {4}));
  m.tensors[0].byte_size = 15;
  auto r = decode<round_start>(encode(round_start{1, 1, m, 64, 2, {}}));
  REQUIRE_FALSE(r);
  CHECK(r.err().code == errc::manifest_mismatch);
}

TEST_CASE("a NUL in a peer's id or token, and offer figures that are not "
          "finite, are malformed") {
  using namespace std::string_literals;
  auto h = decode<hello>(encode(hello{"Client1\0junk"s, "t"}));
  REQUIRE_FALSE(h);
  CHECK(h.err().code == errc::malformed_frame);
  CHECK_FALSE(decode<hello>(encode(hello{"Client1", "evil\0x"s})));
  CHECK(decode<hello>(encode(hello{"Client1", "t"})));
  // A client id goes into logs, reports and labels as it is: printable
  // ASCII other than space, 1 to 128 bytes.
  for (auto bad : {"Client\xff"s, "two words"s, "evil\n07:00"s, "\x1b[2J"s, ""s,
                   std::string(129, 'a')}) {
    auto r = decode<hello>(encode(hello{bad, "t"}));
    REQUIRE_FALSE(r);
    CHECK(r.err().code == errc::malformed_frame);
  }
  CHECK(decode<hello>(encode(hello{std::string(128, 'a'), "t"})));
  CHECK(decode<hello>(encode(hello{"site-3/node_7@lab.example:1", "t"})));
  offer o;
  o.client_id = "Client1";
  CHECK(decode<offer>(encode(o)));
  for (auto field :
       {&offer::train_loss, &offer::train_seconds, &offer::dp_epsilon}) {
    auto bad = o;
    bad.*field = std::numeric_limits<double>::quiet_NaN();
    auto d = decode<offer>(encode(bad));
    REQUIRE_FALSE(d);
    CHECK(d.err().code == errc::malformed_frame);
    bad.*field = std::numeric_limits<double>::infinity();
    CHECK_FALSE(decode<offer>(encode(bad)));
  }
  auto negative = o;
  negative.train_loss = -1.5; // a loss may be negative
  CHECK(decode<offer>(encode(negative)));
  negative.train_seconds = -1;
  CHECK_FALSE(decode<offer>(encode(negative)));
  auto with_nul = o;
  with_nul.client_id = "Client1\0x"s;
  CHECK_FALSE(decode<offer>(encode(with_nul)));
}

TEST_CASE("secagg frames round-trip and refuse what a round cannot hold") {
  key_bytes k1{}, k2{};
  k1.fill(1);
  k2.fill(2);
  key_bytes k3{};
  k3.fill(3);
  auto keys = decode<secagg_keys>(encode(secagg_keys{3, k1, k2, 600, k3}));
  REQUIRE(keys);
  CHECK(keys->round == 3);
  CHECK(keys->share_key == k1);
  CHECK(keys->mask_key == k2);
  CHECK(keys->sample_count == 600);
  CHECK(keys->self_seed_commitment == k3);
  CHECK(*kind_of(encode(secagg_keys{})) == frame_kind::secagg_keys);

  secagg_roster r{3, 1, 0.25, 2, 8.0, 22, {}};
  r.neighbours = {{0, "Client1", k1, k2}, {4, "Client5", k2, k1}};
  auto back = decode<secagg_roster>(encode(r));
  REQUIRE(back);
  CHECK(back->neighbours.size() == 2);
  CHECK(back->neighbours[1].client_id == "Client5");
  CHECK(back->neighbours[1].mask_key == k1);
  CHECK(back->weight == 0.25);
  auto refused = [](const secagg_roster& x, const char* why) {
    auto d = decode<secagg_roster>(encode(x));
    REQUIRE_FALSE(d);
    CHECK(d.err().code == errc::malformed_frame);
    CHECK(d.err().message.find(why) != std::string::npos);
  };
  auto unsorted = r;
  std::swap(unsorted.neighbours[0], unsorted.neighbours[1]);
  refused(unsorted, "not sorted");
  auto bits = r;
  bits.quantization_bits = 32;
  refused(bits, "quantization bits");
  auto weight = r;
  weight.weight = std::nan("");
  refused(weight, "weight");
  auto threshold = r;
  threshold.threshold = 4; // 2 neighbours + the client itself at most
  refused(threshold, "threshold");

  secagg_shares sh{3, {{4, std::vector<uint8_t>(sealed_share_bytes, 7)}}};
  auto shares = decode<secagg_shares>(encode(sh));
  REQUIRE(shares);
  CHECK(shares->shares[0].peer == 4);
  CHECK(shares->shares[0].sealed == sh.shares[0].sealed);
  sh.shares[0].sealed.pop_back();
  CHECK_FALSE(decode<secagg_shares>(encode(sh)));
  secagg_shares many{3, {}};
  for (uint32_t i = 0; i < 256; ++i)
    many.shares.push_back({i, std::vector<uint8_t>(sealed_share_bytes)});
  auto too_many = decode<secagg_shares>(encode(many));
  REQUIRE_FALSE(too_many);
  CHECK(too_many.err().message.find("at most 255") != std::string::npos);

  secagg_unmask u{3, {0, 4}, {2}, {{0, 1, k1}}, {{2, 3, k2}}};
  auto un = decode<secagg_unmask>(encode(u));
  REQUIRE(un);
  CHECK(un->in_sum == std::vector<uint32_t>{0, 4});
  CHECK(un->dropped == std::vector<uint32_t>{2});
  CHECK(un->self_seed_shares[0].y == k1);
  CHECK(un->mask_key_shares[0].x == 3);
  u.mask_key_shares[0].x = 0;
  CHECK_FALSE(decode<secagg_unmask>(encode(u)));
}

TEST_CASE("a manifest of more than max_model_tensors tensors is refused") {
  manifest m;
  for (uint64_t i = 0; i <= max_model_tensors; ++i)
    m.tensors.push_back(
        make_tensor_info("t" + std::to_string(i), dtype::float32, {1}));
  auto r = decode<round_start>(encode(round_start{1, 1, m, 64, 2, {}}));
  REQUIRE_FALSE(r);
  CHECK(r.err().code == errc::malformed_frame);
  CHECK(r.err().message == "a manifest of 65537 tensors, more than 65536");
  // One fewer passes.
  m.tensors.pop_back();
  CHECK(decode<round_start>(encode(round_start{1, 1, m, 64, 2, {}})));
  CHECK(validate(m));
}

TEST_CASE("a gathered chunk is the same frame as one filled in place") {
  for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{8}, size_t{1000},
                   size_t{1} << 20}) {
    CAPTURE(n);
    auto payload = pattern(n);
    chunk_header h{3, 9, 4, 2, 4096};
    auto whole = chunk_frame(h, payload);
    // In three pieces, the last one longer than what is left.
    auto gathered = encode_chunk_gathered(h, n, [&](const chunk_append& add) {
      auto a = n / 3, b = n / 2;
      add({payload.data(), a});
      add({payload.data() + a, b - a});
      auto tail = pattern(n + 16);
      std::memcpy(tail.data(), payload.data() + b, n - b);
      add({tail.data(), tail.size()});
    });
    CHECK(gathered == whole);
    auto c = decode_chunk(gathered, n + 64);
    REQUIRE(c);
    CHECK(c->header.sequence == 4);
    CHECK(std::equal(c->bytes.begin(), c->bytes.end(), payload.begin()));
  }
  // What gather leaves out is zero; `then` changes the payload before the
  // checksum is taken.
  auto payload = pattern(100);
  auto part = encode_chunk_gathered(
      {1, 1, 0, 0, 0}, 100,
      [&](const chunk_append& add) {
        add({payload.data(), 60});
      },
      [](std::span<std::byte> p) { p[99] = std::byte{5}; });
  auto expected = payload;
  std::fill(expected.begin() + 60, expected.end(), std::byte{0});
  expected[99] = std::byte{5};
  CHECK(part == chunk_frame({1, 1, 0, 0, 0}, expected));
  CHECK(decode_chunk(part, 1024));
}
