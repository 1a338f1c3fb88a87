#include "fedcaf/compression.hpp"

#include <cmath>
#include <cstring>
#include <random>

#include <doctest/doctest.h>

#include "fedcaf/delta_codec.hpp"

using namespace fedcaf;

namespace {

std::vector<float> normal_values(size_t n, float scale, uint64_t seed) {
  std::mt19937_64 rng{seed};
  std::normal_distribution<float> d{0.0f, scale};
  std::vector<float> x(n);
  for (auto& v : x)
    v = d(rng);
  return x;
}

compression_config with(compression_method m) {
  compression_config c;
  c.method = m;
  c.up = true;
  return c;
}

} // namespace

TEST_CASE("each method decodes what it encoded within its error, at its "
          "size") {
  // 1000 values: int8's last block is partial.
  auto x = normal_values(1000, 0.01f, 1);
  x[17] = 0.0f;
  x[300] = -0.5f; // a block's absmax
  for (auto m : {compression_method::fp16, compression_method::bf16,
                 compression_method::int8, compression_method::zfp}) {
    CAPTURE(std::string{to_string(m)});
    auto c = with(m);
    std::vector<std::byte> out(encoded_bound(c, x.size()));
    auto n = encode(c, x, out);
    CHECK(n <= out.size());
    if (fixed_size(m))
      CHECK(n == encoded_bound(c, x.size()));
    std::vector<float> y(x.size());
    REQUIRE(decode(c, std::span{out}.first(n), y));
    for (size_t i = 0; i < x.size(); ++i) {
      CAPTURE(i);
      auto err = std::fabs(y[i] - x[i]);
      switch (m) {
      case compression_method::fp16: // 11 significant bits
        CHECK(err <= std::fabs(x[i]) * 0x1p-11f + 0x1p-25f);
        break;
      case compression_method::bf16: // 8 significant bits
        CHECK(err <= std::fabs(x[i]) * 0x1p-8f);
        break;
      case compression_method::int8: { // half a step of the block's scale
        size_t b = i / int8_block * int8_block;
        float top = 0;
        for (size_t j = b; j < std::min(x.size(), b + int8_block); ++j)
          top = std::max(top, std::fabs(x[j]));
        CHECK(err <= top / 127.0f / 2 * 1.0001f);
        break;
      }
      default:
        CHECK(err <= c.zfp_tolerance);
      }
    }
    if (fixed_size(m)) // zfp keeps it within the tolerance only
      CHECK(y[17] == 0.0f);
  }
  CHECK(encoded_bound(with(compression_method::fp16), 1000) == 2000);
  CHECK(encoded_bound(with(compression_method::int8), 1000) == 1000 + 4 * 4);
}

TEST_CASE("zfp: runs of 64 values and a tail of n mod 16, at every size") {
  auto c = with(compression_method::zfp);
  for (size_t n : {1, 2, 15, 16, 17, 31, 63, 64, 65, 80, 129, 4099}) {
    CAPTURE(n);
    auto x = normal_values(n, 0.3f, n);
    std::vector<std::byte> out(encoded_bound(c, n));
    auto bytes = encode(c, x, out);
    REQUIRE(bytes > 0);
    CHECK(bytes <= out.size());
    std::vector<float> y(n, 99.0f);
    REQUIRE(decode(c, std::span{out}.first(bytes), y));
    for (size_t i = 0; i < n; ++i) {
      CAPTURE(i);
      CHECK(std::fabs(y[i] - x[i]) <= c.zfp_tolerance);
    }
  }
}

TEST_CASE("bytes that are no encoding of the values are refused") {
  std::vector<float> y(300);
  std::vector<std::byte> bytes(600);
  CHECK_FALSE(
      decode(with(compression_method::fp16), std::span{bytes}.first(598), y));
  auto c8 = with(compression_method::int8);
  std::vector<std::byte> q(encoded_bound(c8, y.size()), std::byte{1});
  float nan = std::nanf("");
  std::memcpy(q.data(), &nan, 4); // the first block's scale
  auto bad = decode(c8, q, y);
  REQUIRE_FALSE(bad);
  CHECK(bad.err().code == errc::poisoned_update);
  CHECK_FALSE(decode(c8, std::span{q}.first(q.size() - 1), y));
  // zfp: more bytes than any encoding of 300 values, and random bytes
  // (read through a padded copy: they may decode to garbage, never past).
  auto cz = with(compression_method::zfp);
  std::vector<std::byte> big(encoded_bound(cz, y.size()) + 1);
  CHECK_FALSE(decode(cz, big, y));
  std::mt19937_64 rng{7};
  for (int round = 0; round < 50; ++round) {
    std::vector<std::byte> junk(rng() % 200);
    for (auto& b : junk)
      b = static_cast<std::byte>(rng());
    (void)decode(cz, junk, y);
  }
}

TEST_CASE("error feedback: what one round's encoding lost is sent in the "
          "next, so the sum of what arrived tracks the sum of the deltas") {
  manifest m;
  m.tensors.push_back(make_tensor_info("a", dtype::float32, {300}));
  m.tensors.push_back(make_tensor_info("b", dtype::float32, {77}));
  // One value: its int8 encoding (5 bytes) is more than half its slot's,
  // so its residual is taken on arrival, not packed at upload.
  m.tensors.push_back(make_tensor_info("c", dtype::float32, {1}));
  auto plan = *chunk_plan::make(m, 256); // 64 values a chunk, tensors split
  const size_t total = 378;
  struct method_case {
    compression_method method;
    bool feedback;
  };
  for (auto [method, feedback] : {method_case{compression_method::int8, true},
                                  method_case{compression_method::int8, false},
                                  method_case{compression_method::zfp, true}}) {
    CAPTURE(std::string{to_string(method)});
    CAPTURE(feedback);
    auto c = with(method);
    c.error_feedback = feedback;
    auto enc = delta_encoder::make(c, m, plan, "");
    REQUIRE(enc);
    // The client's parameters: received into, trained, uploaded from.
    std::vector<float> model(total, 0.0f), arrived(total, 0.0f),
        sent(total, 0.0f);
    auto view = [&] {
      return split_contiguous(m, std::as_bytes(std::span{model}));
    };
    for (int round = 0; round < 20; ++round) {
      // The server's model: the initial 1.0 plus what arrived, received
      // chunk by chunk over the trained model.
      std::vector<float> global(total);
      for (size_t i = 0; i < total; ++i)
        global[i] = 1.0f + arrived[i];
      enc->begin_round();
      for (uint64_t seq = 0; seq < plan.chunk_count(); ++seq) {
        const auto& e = plan.extent(seq);
        auto g =
            std::as_bytes(std::span{global}).subspan(e.model_offset, e.bytes);
        enc->arrive(seq, g, view());
        enc->arrive(seq, g, view()); // a chunk fetched again: no change
        std::memcpy(reinterpret_cast<std::byte*>(model.data()) + e.model_offset,
                    g.data(), e.bytes);
      }
      // Training: a small step, plus one large value per block that makes
      // int8 lose the small ones.
      auto step = normal_values(total, 1e-3f, 100 + round);
      for (size_t i = 0; i < total; ++i) {
        if (i % 64 == 5)
          step[i] = 1.0f;
        model[i] += step[i];
        sent[i] += step[i];
      }
      std::vector<std::vector<std::byte>> first(plan.chunk_count());
      for (int pass = 0; pass < 2; ++pass) // sent again after a reset
        for (uint64_t seq = 0; seq < plan.chunk_count(); ++seq) {
          auto b = enc->upload(seq, view());
          std::vector<std::byte> bytes(b.begin(), b.end());
          if (pass == 0) {
            first[seq] = bytes;
            continue;
          }
          CHECK(bytes == first[seq]); // a resend carries the same bytes
          const auto& e = plan.extent(seq);
          std::vector<float> d(e.bytes / 4);
          REQUIRE(decode(c, bytes, d));
          for (size_t i = 0; i < d.size(); ++i)
            arrived[e.model_offset / 4 + i] += d[i];
        }
      enc->upload_closed();
      if (round == 7) // a client that drops its model between rounds
        enc->settle(view());
    }
    double worst = 0;
    for (size_t i = 0; i < total; ++i)
      worst = std::max(worst, double{std::fabs(arrived[i] - sent[i])});
    // With feedback, the gap is one round's loss at most (half an int8
    // step, 1 / 254; zfp's tolerance), and what bfloat16 rounded off the
    // residuals kept (2^-9 of one, each round); without, the small steps
    // were lost round after round.
    double bound =
        method == compression_method::int8 ? 1.0 / 254 : c.zfp_tolerance;
    if (feedback)
      CHECK(worst <= bound * (1 + 20 * 0x1p-9) + 1e-6);
    else
      CHECK(worst > bound * 2);
  }
}
