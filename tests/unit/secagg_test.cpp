#include "fedcaf/secagg.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>

using namespace fedcaf;
using namespace fedcaf::secagg;

namespace {

/// The 32 bytes of a 64-digit hex string.
key32 from_hex(const char* hex) {
  key32 out{};
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = static_cast<uint8_t>(
        std::stoi(std::string{hex + 2 * i, 2}, nullptr, 16));
  return out;
}

/// HKDF-SHA256 through OpenSSL's other API (EVP_PKEY_HKDF), empty salt.
key32 reference_hkdf(const key32& ikm, const std::string& info) {
  std::unique_ptr<EVP_PKEY_CTX, decltype(&EVP_PKEY_CTX_free)> ctx{
      EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, nullptr), &EVP_PKEY_CTX_free};
  key32 out{};
  size_t bytes = out.size();
  REQUIRE(ctx);
  REQUIRE(EVP_PKEY_derive_init(ctx.get()) == 1);
  REQUIRE(EVP_PKEY_CTX_set_hkdf_md(ctx.get(), EVP_sha256()) == 1);
  REQUIRE(EVP_PKEY_CTX_set1_hkdf_key(ctx.get(), ikm.data(), 32) == 1);
  REQUIRE(EVP_PKEY_CTX_add1_hkdf_info(
              ctx.get(), reinterpret_cast<const unsigned char*>(info.data()),
              static_cast<int>(info.size())) == 1);
  REQUIRE(EVP_PKEY_derive(ctx.get(), out.data(), &bytes) == 1);
  return out;
}

/// AES-256-ECB of the counter block `high || low` (big-endian u64s): one
/// block of the CTR keystream, computed without CTR mode.
std::array<uint8_t, 16> keystream_block(const key32& key, uint64_t high,
                                        uint64_t low) {
  std::array<uint8_t, 16> in{}, out{};
  for (int i = 0; i < 8; ++i) {
    in[7 - i] = static_cast<uint8_t>(high >> (8 * i));
    in[15 - i] = static_cast<uint8_t>(low >> (8 * i));
  }
  std::unique_ptr<EVP_CIPHER_CTX, decltype(&EVP_CIPHER_CTX_free)> ctx{
      EVP_CIPHER_CTX_new(), &EVP_CIPHER_CTX_free};
  int n = 0;
  std::array<uint8_t, 16> aes_key; // the seed's halves XORed
  for (size_t i = 0; i < 16; ++i)
    aes_key[i] = key[i] ^ key[16 + i];
  REQUIRE(EVP_EncryptInit_ex(ctx.get(), EVP_aes_128_ecb(), nullptr,
                             aes_key.data(), nullptr) == 1);
  REQUIRE(EVP_CIPHER_CTX_set_padding(ctx.get(), 0) == 1);
  REQUIRE(EVP_EncryptUpdate(ctx.get(), out.data(), &n, in.data(), 16) == 1);
  return out;
}

/// The little-endian word at bytes [4 i, 4 i + 4) of `block`.
uint32_t word(const std::array<uint8_t, 16>& block, int i) {
  uint32_t w = 0;
  for (int b = 3; b >= 0; --b)
    w = w << 8 | block[4 * i + b];
  return w;
}

std::vector<uint8_t> random_bytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng{seed};
  std::vector<uint8_t> out(n);
  for (auto& b : out)
    b = static_cast<uint8_t>(rng());
  return out;
}

std::vector<uint32_t> random_words(size_t n, uint64_t seed) {
  std::mt19937_64 rng{seed};
  std::vector<uint32_t> out(n);
  for (auto& w : out)
    w = static_cast<uint32_t>(rng());
  return out;
}

/// Masks `values` (elements from `first`) in chunks of `chunk` elements.
void mask_in_chunks(const key32& seed, uint64_t first,
                    std::vector<uint32_t>& values, size_t chunk, int sign) {
  for (size_t at = 0; at < values.size(); at += chunk) {
    auto n = std::min(chunk, values.size() - at);
    apply_mask(seed, first + at, std::span{values}.subspan(at, n), sign);
  }
}

/// shares[i] for i in `picks`, in that order.
std::vector<share> pick(const std::vector<share>& shares,
                        std::initializer_list<size_t> picks) {
  std::vector<share> out;
  for (auto i : picks)
    out.push_back(shares[i]);
  return out;
}

/// Pearson's statistic of the top 8 bits of `values` over 256 bins.
double chi_squared_top_byte(const std::vector<uint32_t>& values) {
  std::array<double, 256> counts{};
  for (auto v : values)
    counts[v >> 24] += 1;
  double expected = values.size() / 256.0, chi2 = 0;
  for (auto c : counts)
    chi2 += (c - expected) * (c - expected) / expected;
  return chi2;
}

/// The 0.999 quantile of chi-squared with 255 degrees of freedom.
constexpr double chi2_255_q999 = 330.5;

bool is_symmetric(const std::vector<std::vector<uint32_t>>& g) {
  for (uint32_t i = 0; i < g.size(); ++i)
    for (auto j : g[i])
      if (!std::binary_search(g[j].begin(), g[j].end(), i))
        return false;
  return true;
}

} // namespace

TEST_CASE("secagg: X25519 agreement derives one key per pair, purpose and "
          "round") {
  auto a = generate_key_pair();
  auto b = generate_key_pair();
  CHECK(a.secret != b.secret);
  CHECK(a.public_key != b.public_key);
  auto ab = agree(a.secret, b.public_key, "mask", 7);
  auto ba = agree(b.secret, a.public_key, "mask", 7);
  REQUIRE(ab);
  REQUIRE(ba);
  CHECK(*ab == *ba);
  CHECK(*agree(a.secret, b.public_key, "share", 7) != *ab);
  CHECK(*agree(a.secret, b.public_key, "mask", 8) != *ab);
  auto c = generate_key_pair();
  CHECK(*agree(a.secret, c.public_key, "mask", 7) != *ab);

  SUBCASE("RFC 7748's vector, then HKDF-SHA256 with the documented info") {
    auto alice = from_hex(
        "77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a");
    auto bob_public = from_hex(
        "de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f");
    auto shared = from_hex(
        "4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742");
    auto k = agree(alice, bob_public, "share", 42);
    REQUIRE(k);
    CHECK(*k == reference_hkdf(shared, "fedcaf secagg share round 42"));
  }
  SUBCASE("a low-order peer key is refused") {
    key32 zero{}, one{};
    one[0] = 1;
    for (const auto& peer : {zero, one}) {
      auto k = agree(a.secret, peer, "mask", 7);
      REQUIRE_FALSE(k);
      CHECK(k.err().code == errc::bad_argument);
    }
  }
}

TEST_CASE("secagg: seal and open round trip, and any change is refused") {
  auto key = random_seed();
  auto text = random_bytes(100, 1);
  auto ad = random_bytes(9, 2);
  auto sealed = seal(key, text, ad);
  REQUIRE(sealed.size() == 12 + text.size() + 16);
  auto opened = open_sealed(key, sealed, ad);
  REQUIRE(opened);
  CHECK(*opened == text);
  CHECK(seal(key, text, ad) != sealed); // a fresh nonce each time
  CHECK(!std::equal(text.begin(), text.end(), sealed.begin() + 12));

  for (size_t at : {size_t{0}, size_t{11}, size_t{12}, size_t{60},
                    sealed.size() - 16, sealed.size() - 1}) {
    CAPTURE(at);
    auto changed = sealed;
    changed[at] ^= 0x01;
    auto r = open_sealed(key, changed, ad);
    REQUIRE_FALSE(r);
    CHECK(r.err().code == errc::bad_checksum);
  }
  auto other_key = key;
  other_key[5] ^= 0x80;
  CHECK_FALSE(open_sealed(other_key, sealed, ad));
  auto other_ad = ad;
  other_ad[0] ^= 1;
  CHECK_FALSE(open_sealed(key, sealed, other_ad));
  CHECK_FALSE(open_sealed(key, sealed, {}));
  auto shorter = std::span{sealed}.first(sealed.size() - 1);
  CHECK_FALSE(open_sealed(key, shorter, ad));
  for (size_t n : {0, 1, 27}) {
    auto r = open_sealed(key, std::span{sealed}.first(n), ad);
    REQUIRE_FALSE(r);
    CHECK(r.err().code == errc::bad_checksum);
  }

  SUBCASE("empty plaintext and associated data") {
    auto s = seal(key, {}, {});
    CHECK(s.size() == 28);
    auto r = open_sealed(key, s, {});
    REQUIRE(r);
    CHECK(r->empty());
    s[20] ^= 4;
    CHECK_FALSE(open_sealed(key, s, {}));
  }
}

TEST_CASE("secagg: Shamir shares give the secret back from any threshold") {
  auto secret = random_bytes(32, 3);
  std::vector<uint8_t> xs = {1, 2, 3, 4, 5};
  auto shares = split(secret, 3, xs);
  REQUIRE(shares.size() == 5);
  for (size_t i = 0; i < 5; ++i) {
    CHECK(shares[i].x == xs[i]);
    CHECK(shares[i].y.size() == 32);
    CHECK(shares[i].y != secret);
  }
  for (auto subset : {pick(shares, {0, 1, 2}), pick(shares, {4, 2, 0}),
                      pick(shares, {1, 3, 4}), pick(shares, {3, 4, 1, 0})}) {
    auto r = combine(subset, 3);
    REQUIRE(r);
    CHECK(*r == secret);
  }
  // Interpolating t - 1 shares as if they were all: not the secret.
  auto guess = combine(pick(shares, {0, 1}), 2);
  REQUIRE(guess);
  CHECK(*guess != secret);
  // Splitting again draws new polynomials.
  CHECK(split(secret, 3, xs)[0].y != shares[0].y);

  SUBCASE("refusals") {
    auto expect_refused = [](const std::vector<share>& s, uint32_t t) {
      auto r = combine(s, t);
      REQUIRE_FALSE(r);
      CHECK(r.err().code == errc::bad_argument);
    };
    expect_refused(pick(shares, {0, 1}), 3);
    expect_refused({}, 1);
    expect_refused(pick(shares, {0, 1, 2}), 0);
    expect_refused(pick(shares, {0, 1, 0}), 3);
    auto zero_x = pick(shares, {0, 1, 2});
    zero_x[1].x = 0;
    expect_refused(zero_x, 3);
    auto short_y = pick(shares, {0, 1, 2});
    short_y[2].y.pop_back();
    expect_refused(short_y, 3);
  }
  SUBCASE("threshold 1: every share is the secret") {
    for (const auto& s : split(secret, 1, xs)) {
      CHECK(s.y == secret);
      CHECK(*combine(std::vector<share>{s}, 1) == secret);
    }
  }
  SUBCASE("threshold 255 of 255") {
    std::vector<uint8_t> all(255);
    for (size_t i = 0; i < all.size(); ++i)
      all[i] = static_cast<uint8_t>(255 - i);
    auto many = split(secret, 255, all);
    std::reverse(many.begin(), many.end());
    auto r = combine(many, 255);
    REQUIRE(r);
    CHECK(*r == secret);
    many.pop_back();
    CHECK_FALSE(combine(many, 255));
    CHECK(*combine(many, 254) != secret);
  }
}

TEST_CASE("secagg: a mask is the AES-128-CTR keystream, whatever the "
          "chunking") {
  auto seed = from_hex(
      "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f");
  SUBCASE("element i is keystream bytes [4i, 4i + 4), little-endian") {
    std::vector<uint32_t> v(8, 0);
    apply_mask(seed, 0, v, +1);
    auto b0 = keystream_block(seed, 0, 0), b1 = keystream_block(seed, 0, 1);
    for (int i = 0; i < 4; ++i) {
      CHECK(v[i] == word(b0, i));
      CHECK(v[4 + i] == word(b1, i));
    }
    // Across the 2^32 block boundary, from the middle of a block.
    std::vector<uint32_t> w(4, 0);
    apply_mask(seed, 4 * uint64_t{0xFFFFFFFF} + 2, w, +1);
    auto last = keystream_block(seed, 0, 0xFFFFFFFF);
    auto next = keystream_block(seed, 0, uint64_t{1} << 32);
    CHECK(w[0] == word(last, 2));
    CHECK(w[1] == word(last, 3));
    CHECK(w[2] == word(next, 0));
    CHECK(w[3] == word(next, 1));
    // Subtracting from zero gives the negated mask.
    std::vector<uint32_t> neg(1, 0);
    apply_mask(seed, 1, neg, -1);
    CHECK(neg[0] == 0u - word(b0, 1));
  }
  SUBCASE("chunks and offsets") {
    auto values = random_words(1'000'003, 4);
    auto whole = values;
    apply_mask(seed, 0, whole, +1);
    CHECK(whole != values);
    for (size_t chunk : {16, 1000, 1001, 262144}) {
      CAPTURE(chunk);
      auto chunked = values;
      mask_in_chunks(seed, 0, chunked, chunk, +1);
      CHECK(chunked == whole);
    }
    // Starting at an offset: the tail of the whole vector's mask.
    for (uint64_t first : {1, 2, 3, 4, 5, 777, 262147}) {
      CAPTURE(first);
      std::vector<uint32_t> tail(values.begin() + first, values.end());
      mask_in_chunks(seed, first, tail, 999, +1);
      CHECK(std::equal(tail.begin(), tail.end(), whole.begin() + first));
    }
    // Uneven chunks of 1..5000 elements.
    std::mt19937_64 rng{5};
    auto uneven = values;
    for (size_t at = 0; at < uneven.size();) {
      auto n = std::min<size_t>(1 + rng() % 5000, uneven.size() - at);
      apply_mask(seed, at, std::span{uneven}.subspan(at, n), +1);
      at += n;
    }
    CHECK(uneven == whole);
    auto restored = whole;
    mask_in_chunks(seed, 0, restored, 1000, -1);
    CHECK(restored == values);
    auto other = values;
    auto other_seed = seed;
    other_seed[31] ^= 1;
    apply_mask(other_seed, 0, other, +1);
    size_t same = 0;
    for (size_t i = 0; i < other.size(); ++i)
      same += other[i] == whole[i];
    CHECK(same < 10);
  }
}

TEST_CASE("secagg: pairwise masks cancel in the sum of five clients") {
  constexpr size_t clients = 5, elements = 10'007;
  constexpr uint64_t first = 123'457;
  constexpr uint32_t round = 3;
  quantizer q{1.0, 20};
  std::vector<key_pair> keys(clients);
  std::vector<key32> self_seeds(clients);
  for (size_t u = 0; u < clients; ++u) {
    keys[u] = generate_key_pair();
    self_seeds[u] = random_seed();
  }
  std::vector<uint32_t> plain_sum(elements, 0), masked_sum(elements, 0);
  for (size_t u = 0; u < clients; ++u) {
    std::vector<float> update(elements);
    std::mt19937_64 rng{u};
    for (auto& x : update)
      x = std::uniform_real_distribution<float>{-1, 1}(rng);
    std::vector<uint32_t> mine(elements);
    q.quantize(update, 1.0 / clients, mine);
    for (size_t i = 0; i < elements; ++i)
      plain_sum[i] += mine[i];
    apply_mask(self_seeds[u], first, mine, +1);
    for (size_t v = 0; v < clients; ++v) {
      if (v == u)
        continue;
      auto s = agree(keys[u].secret, keys[v].public_key, "mask", round);
      REQUIRE(s);
      apply_mask(*s, first, mine, v > u ? +1 : -1);
    }
    for (size_t i = 0; i < elements; ++i)
      masked_sum[i] += mine[i];
  }
  CHECK(masked_sum != plain_sum);
  for (size_t u = 0; u < clients; ++u)
    apply_mask(self_seeds[u], first, masked_sum, -1);
  CHECK(masked_sum == plain_sum);
}

TEST_CASE("secagg: a masked update looks uniform, the quantized one not") {
  constexpr size_t elements = size_t{1} << 18;
  quantizer q{1.0, 16};
  std::vector<float> update(elements, 0.25f);
  std::vector<uint32_t> quantized(elements);
  q.quantize(update, 1.0, quantized);
  auto masked = quantized;
  // Fixed seeds: a deterministic test (a random one would fail 1 run in
  // 1000 by the quantile's definition).
  auto self_seed = from_hex(
      "5ec7e7a5eed0000000000000000000000000000000000000000000000000000a");
  auto pair_seed = from_hex(
      "9a1b2c3d4e5f60718293a4b5c6d7e8f90112233445566778899aabbccddeeff0");
  apply_mask(self_seed, 0, masked, +1);
  apply_mask(pair_seed, 0, masked, -1);
  CHECK(chi_squared_top_byte(masked) < chi2_255_q999);
  CHECK(chi_squared_top_byte(quantized) > 100 * chi2_255_q999);
  size_t same = 0;
  for (size_t i = 0; i < elements; ++i)
    same += masked[i] == quantized[i];
  CHECK(same < 4);
}

TEST_CASE("secagg: the quantizer's sum dequantizes to the weighted mean") {
  constexpr size_t clients = 8, elements = 4096;
  constexpr double clip = 0.5;
  quantizer q{clip, 20};
  REQUIRE(q.max_contributors() >= clients);
  std::mt19937_64 rng{6};
  std::vector<double> weights(clients);
  double total = 0;
  for (auto& w : weights)
    total += w = std::uniform_real_distribution<double>{0.1, 1}(rng);
  for (auto& w : weights)
    w /= total;
  std::vector<double> exact(elements, 0);
  std::vector<uint32_t> sum(elements, 0), mine(elements);
  std::vector<float> update(elements);
  for (size_t u = 0; u < clients; ++u) {
    for (size_t i = 0; i < elements; ++i) {
      update[i] = std::uniform_real_distribution<float>{-0.5, 0.5}(rng);
      exact[i] += weights[u] * update[i];
    }
    q.quantize(update, weights[u], mine);
    for (size_t i = 0; i < elements; ++i)
      sum[i] += mine[i];
  }
  std::vector<float> mean(elements);
  q.dequantize(sum, clients, 1.0, mean);
  auto bound = q.error_bound(clients, 1.0);
  CHECK(bound == doctest::Approx(clients * 2 * clip / ((1 << 20) - 1)));
  double worst = 0;
  for (size_t i = 0; i < elements; ++i)
    worst = std::max(worst, std::abs(mean[i] - exact[i]));
  CHECK(worst <= bound + 1e-7); // + float's rounding of the result
  CHECK(worst > bound / 100);   // the check above is not vacuous

  SUBCASE("a weight total other than 1") {
    q.dequantize(sum, clients, 0.5, mean);
    for (size_t i = 0; i < elements; i += 97)
      CHECK(std::abs(mean[i] - 2 * exact[i]) <=
            q.error_bound(clients, 0.5) + 1e-7);
  }
}

TEST_CASE("secagg: stochastic rounding is unbiased, values beyond clip are "
          "clipped") {
  quantizer q{1.0, 8}; // scale 127.5: 0.3 lies at 165.75
  constexpr size_t n = 200'000;
  std::vector<float> in(n, 0.3f), out(n);
  std::vector<uint32_t> levels(n);
  q.quantize(in, 1.0, levels);
  auto [lo, hi] = std::minmax_element(levels.begin(), levels.end());
  CHECK(*lo == 165);
  CHECK(*hi == 166);
  q.dequantize(levels, 1, 1.0, out);
  double mean = 0;
  for (auto x : out)
    mean += x;
  mean /= n;
  // Standard error sqrt(0.75 * 0.25) / 127.5 / sqrt(n) = 7.6e-6; rounding
  // always down would be 0.0059 off.
  CHECK(std::abs(mean - 0.3) < 5e-5);
  // In place over bytes, an odd count: the same two levels, as often.
  std::vector<std::byte> bytes((n + 1) * 4);
  for (size_t i = 0; i <= n; ++i)
    std::memcpy(bytes.data() + 4 * i, &in[0], 4);
  q.quantize_in_place(bytes, 1.0);
  uint64_t ups = 0;
  for (size_t i = 0; i <= n; ++i) {
    uint32_t level = 0;
    std::memcpy(&level, bytes.data() + 4 * i, 4);
    CHECK((level == 165 || level == 166));
    ups += level == 166;
  }
  CHECK(std::abs(static_cast<double>(ups) / (n + 1) - 0.75) < 0.01);
  // It counts what it clipped: 5, -5 and infinity; not +-1 (the range's
  // ends) nor a NaN (counted as 0).
  std::vector<float> edge = {5.0f, -5.0f, 1.0f, -1.0f, INFINITY, NAN, 0.5f};
  std::vector<std::byte> edge_bytes(edge.size() * 4);
  std::memcpy(edge_bytes.data(), edge.data(), edge_bytes.size());
  CHECK(q.quantize_in_place(edge_bytes, 1.0) == 3);

  std::vector<float> wide = {5.0f, -5.0f, 1.0f, -1.0f, INFINITY, NAN};
  std::vector<uint32_t> wide_levels(wide.size());
  q.quantize(wide, 1.0, wide_levels);
  CHECK(std::vector(wide_levels.begin(), wide_levels.begin() + 5) ==
        std::vector<uint32_t>{255, 0, 255, 0, 255});
  CHECK((wide_levels[5] == 127 || wide_levels[5] == 128)); // NaN counts as 0
  // A weight applies before the clip.
  std::vector<uint32_t> halved(1);
  q.quantize(std::vector<float>{1.5f}, 0.5, halved);
  CHECK((halved[0] == 223 || halved[0] == 224)); // 1.75 * 127.5 = 223.125
}

TEST_CASE("secagg: max_contributors keeps a sum from wrapping") {
  CHECK(quantizer{1.0, 22}.max_contributors() == 1024);
  CHECK(quantizer{3.7, 22}.max_contributors() == 1024);
  CHECK(quantizer{1.0, 31}.max_contributors() == 2);
  CHECK(quantizer{1.0, 16}.max_contributors() == 65537);
  CHECK(quantizer{1e-3, 1}.max_contributors() == 0xFFFFFFFFu);
}

TEST_CASE("secagg: the neighbour graph is a Harary graph over a "
          "permutation") {
  auto g = neighbour_graph(20, 6, 11);
  REQUIRE(g.size() == 20);
  for (uint32_t i = 0; i < g.size(); ++i) {
    CAPTURE(i);
    CHECK(g[i].size() == 6);
    CHECK(std::is_sorted(g[i].begin(), g[i].end()));
    CHECK(std::adjacent_find(g[i].begin(), g[i].end()) == g[i].end());
    CHECK_FALSE(std::binary_search(g[i].begin(), g[i].end(), i));
    CHECK(g[i].back() < 20);
  }
  CHECK(is_symmetric(g));
  CHECK(neighbour_graph(20, 6, 11) == g);
  CHECK(neighbour_graph(20, 6, 12) != g);
  CHECK(neighbour_graph(20, 5, 11) == g); // k rounds up to even

  for (auto [n, k, degree] : {std::tuple{8u, 6u, 6u},
                              {7u, 6u, 6u},
                              {7u, 5u, 6u},
                              {20u, 19u, 19u},
                              {20u, 100u, 19u},
                              {20u, 0u, 0u},
                              {9u, 1u, 2u},
                              {2u, 1u, 1u}}) {
    CAPTURE(n);
    CAPTURE(k);
    auto h = neighbour_graph(n, k, 5);
    REQUIRE(h.size() == n);
    CHECK(is_symmetric(h));
    for (uint32_t i = 0; i < n; ++i) {
      CHECK(h[i].size() == degree);
      CHECK_FALSE(std::binary_search(h[i].begin(), h[i].end(), i));
    }
  }
  CHECK(neighbour_graph(0, 4, 1).empty());
  CHECK(neighbour_graph(1, 4, 1) == std::vector<std::vector<uint32_t>>{{}});
  CHECK(neighbour_graph(3, 0xFFFFFFFF, 1)[0].size() == 2);
}

TEST_CASE("secagg: a share payload is 73 bytes and decodes back") {
  share_payload p;
  p.from = 0x01020304;
  p.to = 77;
  p.x = 9;
  p.mask_key_share = random_seed();
  p.self_seed_share = random_seed();
  auto bytes = encode(p);
  REQUIRE(bytes.size() == 73);
  CHECK(bytes[0] == 0x04);
  CHECK(bytes[3] == 0x01);
  CHECK(bytes[4] == 77);
  CHECK(bytes[8] == 9);
  CHECK(std::equal(p.mask_key_share.begin(), p.mask_key_share.end(),
                   bytes.begin() + 9));
  auto back = decode_share_payload(bytes);
  REQUIRE(back);
  CHECK(back->from == p.from);
  CHECK(back->to == p.to);
  CHECK(back->x == p.x);
  CHECK(back->mask_key_share == p.mask_key_share);
  CHECK(back->self_seed_share == p.self_seed_share);
  for (size_t n : {0, 72}) {
    auto r = decode_share_payload(std::span{bytes}.first(n));
    REQUIRE_FALSE(r);
    CHECK(r.err().code == errc::malformed_frame);
  }
  bytes.push_back(0);
  CHECK_FALSE(decode_share_payload(bytes));
}
