#include "fedcaf/secagg.hpp"

// Every OpenSSL object lives in a unique_ptr with its free function. A
// failure of RAND_bytes, or of an OpenSSL call that cannot fail on valid
// input (an allocation, AES on a fixed-size key), means a broken system:
// it throws std::runtime_error rather than returning an error value.

#include <endian.h>

#include <algorithm>
#include <bit>
#include <cassert>
#include <climits>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/params.h>
#include <openssl/rand.h>

namespace fedcaf::secagg {
namespace {

// -- OpenSSL plumbing -----------------------------------------------------

/// Frees an OpenSSL object with its own free function.
template <class T, void (*Free)(T*)> struct openssl_free {
  void operator()(T* p) const { Free(p); }
};

using pkey_ptr =
    std::unique_ptr<EVP_PKEY, openssl_free<EVP_PKEY, EVP_PKEY_free>>;
using pkey_ctx_ptr =
    std::unique_ptr<EVP_PKEY_CTX,
                    openssl_free<EVP_PKEY_CTX, EVP_PKEY_CTX_free>>;
using cipher_ctx_ptr =
    std::unique_ptr<EVP_CIPHER_CTX,
                    openssl_free<EVP_CIPHER_CTX, EVP_CIPHER_CTX_free>>;
using kdf_ptr = std::unique_ptr<EVP_KDF, openssl_free<EVP_KDF, EVP_KDF_free>>;
using kdf_ctx_ptr =
    std::unique_ptr<EVP_KDF_CTX, openssl_free<EVP_KDF_CTX, EVP_KDF_CTX_free>>;

constexpr size_t nonce_bytes = 12;
constexpr size_t tag_bytes = 16;

/// Throws: the system cannot do what never fails on a working one.
[[noreturn]] void broken(const char* what) {
  throw std::runtime_error(std::string{"fedcaf secagg: "} + what);
}

/// Fills `out` from RAND_bytes; throws iff RAND_bytes fails.
void fill_random(std::span<uint8_t> out) {
  if (out.empty())
    return;
  if (RAND_bytes(out.data(), static_cast<int>(out.size())) != 1)
    broken("RAND_bytes failed");
}

/// Returns a new cipher context; throws iff out of memory.
cipher_ctx_ptr new_cipher_ctx() {
  cipher_ctx_ptr ctx{EVP_CIPHER_CTX_new()};
  if (!ctx)
    broken("EVP_CIPHER_CTX_new failed");
  return ctx;
}

/// Clears a secret key32 when it goes out of scope.
struct cleansed_key {
  key32 bytes{};
  ~cleansed_key() { OPENSSL_cleanse(bytes.data(), bytes.size()); }
};

// -- X25519 and HKDF ------------------------------------------------------

/// The X25519 private key of `secret`; throws iff OpenSSL cannot build one.
pkey_ptr private_key(const key32& secret) {
  pkey_ptr key{EVP_PKEY_new_raw_private_key(EVP_PKEY_X25519, nullptr,
                                            secret.data(), secret.size())};
  if (!key)
    broken("EVP_PKEY_new_raw_private_key failed");
  return key;
}

/// X25519(secret, peer_public) into `out`; false iff the peer's key is
/// unusable or the shared secret is all zero (a low-order point).
bool x25519(const key32& secret, const key32& peer_public, key32& out) {
  auto mine = private_key(secret);
  pkey_ptr peer{EVP_PKEY_new_raw_public_key(
      EVP_PKEY_X25519, nullptr, peer_public.data(), peer_public.size())};
  pkey_ctx_ptr ctx{EVP_PKEY_CTX_new(mine.get(), nullptr)};
  if (!peer || !ctx)
    broken("X25519 key set-up failed");
  size_t out_bytes = out.size();
  // OpenSSL itself refuses an all-zero result; the check below does not
  // rely on it.
  if (EVP_PKEY_derive_init(ctx.get()) != 1 ||
      EVP_PKEY_derive_set_peer(ctx.get(), peer.get()) != 1 ||
      EVP_PKEY_derive(ctx.get(), out.data(), &out_bytes) != 1 ||
      out_bytes != out.size())
    return false;
  uint8_t any = 0;
  for (auto b : out)
    any |= b; // no early exit: constant time
  return any != 0;
}

/// HKDF-SHA256 of `ikm` with an empty salt and `info`.
key32 hkdf_sha256(std::span<const uint8_t> ikm, const std::string& info) {
  kdf_ptr kdf{EVP_KDF_fetch(nullptr, "HKDF", nullptr)};
  kdf_ctx_ptr ctx{kdf ? EVP_KDF_CTX_new(kdf.get()) : nullptr};
  if (!ctx)
    broken("HKDF is not available");
  char digest[] = "SHA256";
  OSSL_PARAM params[] = {
      OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, digest, 0),
      OSSL_PARAM_construct_octet_string(
          OSSL_KDF_PARAM_KEY, const_cast<uint8_t*>(ikm.data()), ikm.size()),
      OSSL_PARAM_construct_octet_string(
          OSSL_KDF_PARAM_INFO, const_cast<char*>(info.data()), info.size()),
      OSSL_PARAM_construct_end()};
  key32 out{};
  if (EVP_KDF_derive(ctx.get(), out.data(), out.size(), params) != 1)
    broken("EVP_KDF_derive failed");
  return out;
}

// -- AES ------------------------------------------------------------------

/// Runs `in` through the cipher into `out` (same size), in pieces that fit
/// OpenSSL's int lengths. Returns false iff OpenSSL refuses.
bool cipher_update(EVP_CIPHER_CTX* ctx, const uint8_t* in, uint8_t* out,
                   size_t bytes) {
  constexpr size_t piece_bytes = size_t{1} << 30;
  while (bytes > 0) {
    auto n = std::min(bytes, piece_bytes);
    int written = 0;
    if (EVP_CipherUpdate(ctx, out, &written, in, static_cast<int>(n)) != 1 ||
        static_cast<size_t>(written) != n)
      return false;
    in += n, out += n, bytes -= n;
  }
  return true;
}

/// Feeds associated data to a GCM context. Returns false iff OpenSSL
/// refuses.
bool gcm_associate(EVP_CIPHER_CTX* ctx, std::span<const uint8_t> associated) {
  if (associated.empty())
    return true;
  int written = 0;
  return associated.size() <= INT_MAX &&
         EVP_CipherUpdate(ctx, nullptr, &written, associated.data(),
                          static_cast<int>(associated.size())) == 1;
}

/// The AES-CTR initial counter block of keystream block `block`.
std::array<uint8_t, 16> counter_block(uint64_t block) {
  std::array<uint8_t, 16> iv{};
  for (int i = 0; i < 8; ++i)
    iv[15 - i] = static_cast<uint8_t>(block >> (8 * i));
  return iv;
}

/// The keystream is made and used this many bytes at a time.
constexpr size_t keystream_piece_bytes = 16 * 1024;

/// What is encrypted to make the keystream.
alignas(64) constexpr uint8_t zero_piece[keystream_piece_bytes] = {};

/// An AES-128-CTR context of `seed` (key: the seed's two halves XORed, so
/// every byte counts) whose next keystream bytes are those of model element
/// `first_element`: element e is bytes [4e, 4e + 4), in block e / 4 at
/// offset 4 (e % 4) (no 4 e, which could overflow). AES-128 rather than
/// AES-256: 10.4 against 7.5 GB/s here, and the masks are most of what
/// secure aggregation costs a client.
cipher_ctx_ptr keystream_at(const key32& seed, uint64_t first_element) {
  std::array<uint8_t, 16> key;
  for (size_t i = 0; i < key.size(); ++i)
    key[i] = seed[i] ^ seed[16 + i];
  auto iv = counter_block(first_element / 4);
  auto skip_bytes = static_cast<int>(4 * (first_element % 4));
  std::array<uint8_t, 16> skipped;
  int written = 0;
  auto ctx = new_cipher_ctx();
  bool ok =
      EVP_EncryptInit_ex(ctx.get(), EVP_aes_128_ctr(), nullptr, key.data(),
                         iv.data()) == 1 &&
      (skip_bytes == 0 || EVP_EncryptUpdate(ctx.get(), skipped.data(), &written,
                                            zero_piece, skip_bytes) == 1);
  OPENSSL_cleanse(key.data(), key.size());
  OPENSSL_cleanse(skipped.data(), skipped.size());
  if (!ok)
    broken("AES-128-CTR set-up failed");
  return ctx;
}

/// The little-endian 32-bit word at p.
uint32_t load_le32(const uint8_t* p) {
  uint32_t w;
  std::memcpy(&w, p, 4);
  if constexpr (std::endian::native == std::endian::big)
    w = __builtin_bswap32(w);
  return w;
}

/// values[i] += or -= the words of `keystream` (4 bytes per value).
void add_words(std::span<uint32_t> values, const uint8_t* keystream, int sign) {
  if (sign >= 0) {
    for (size_t i = 0; i < values.size(); ++i)
      values[i] += load_le32(keystream + 4 * i);
  } else {
    for (size_t i = 0; i < values.size(); ++i)
      values[i] -= load_le32(keystream + 4 * i);
  }
}

// -- GF(2^8) --------------------------------------------------------------
// Arithmetic modulo the AES polynomial x^8 + x^4 + x^3 + x + 1 (0x11B),
// through log and exp tables of the generator 3. Not constant time: the
// table look-ups depend on the secret bytes (a cache-timing side channel
// for a local attacker on the same core).

struct gf_tables {
  std::array<uint8_t, 510> exp{}; ///< doubled: no reduction mod 255
  std::array<uint8_t, 256> log{};
};

/// x * 3 modulo 0x11B.
constexpr uint8_t gf_times3(uint8_t x) {
  auto doubled = static_cast<uint8_t>((x << 1) ^ ((x & 0x80) ? 0x1B : 0));
  return static_cast<uint8_t>(doubled ^ x);
}

constexpr gf_tables make_gf_tables() {
  gf_tables t;
  uint8_t x = 1;
  for (int i = 0; i < 255; ++i) {
    t.exp[i] = x;
    t.exp[i + 255] = x;
    t.log[x] = static_cast<uint8_t>(i);
    x = gf_times3(x);
  }
  return t;
}

constexpr gf_tables gf = make_gf_tables();
static_assert(gf.exp[1] == 3 && gf.exp[255] == 1 && gf.log[3] == 1);

constexpr uint8_t gf_mul(uint8_t a, uint8_t b) {
  if (a == 0 || b == 0)
    return 0;
  return gf.exp[gf.log[a] + gf.log[b]];
}

/// REQUIRES: a != 0.
constexpr uint8_t gf_inverse(uint8_t a) {
  return gf.exp[255 - gf.log[a]];
}

static_assert(gf_mul(0x57, 0x83) == 0xC1); // FIPS 197, section 4.2
static_assert(gf_mul(0x53, gf_inverse(0x53)) == 1);

/// The polynomial coeffs[0] + coeffs[1] x + ... at x (Horner).
uint8_t gf_evaluate(std::span<const uint8_t> coeffs, uint8_t x) {
  uint8_t y = 0;
  for (size_t j = coeffs.size(); j-- > 0;)
    y = static_cast<uint8_t>(gf_mul(y, x) ^ coeffs[j]);
  return y;
}

/// The Lagrange basis polynomial of xs[j] over `xs`, at 0.
/// REQUIRES: the xs are distinct and non-zero.
uint8_t lagrange_at_zero(std::span<const uint8_t> xs, size_t j) {
  uint8_t num = 1, den = 1;
  for (size_t m = 0; m < xs.size(); ++m) {
    if (m == j)
      continue;
    num = gf_mul(num, xs[m]);
    den = gf_mul(den, static_cast<uint8_t>(xs[m] ^ xs[j]));
  }
  return gf_mul(num, gf_inverse(den));
}

/// Fails iff combine's checks on `shares` fail (see the header).
result<void> check_shares(std::span<const share> shares, uint32_t threshold) {
  FEDCAF_REQUIRE(threshold >= 1 && shares.size() >= threshold,
                 errc::bad_argument, shares.size(), threshold);
  std::array<bool, 256> seen{};
  for (const auto& s : shares) {
    FEDCAF_REQUIRE(s.x != 0, errc::bad_argument, unsigned{s.x});
    FEDCAF_REQUIRE(!seen[s.x], errc::bad_argument, unsigned{s.x});
    FEDCAF_REQUIRE(s.y.size() == shares[0].y.size(), errc::bad_argument,
                   s.y.size(), shares[0].y.size());
    seen[s.x] = true;
  }
  return {};
}

// -- quantizer ------------------------------------------------------------

/// This thread's stream of random words for stochastic rounding: the
/// AES-128-CTR keystream of a key drawn from RAND_bytes, made a piece at a
/// time (AES-NI: about 5 GiB/s; SplitMix64 per element ran at a fifth of
/// that and kept the loop from vectorizing). Rounding needs unbiased bits,
/// not secret ones: the masks hide the values.
EVP_CIPHER_CTX* rounding_stream() {
  thread_local cipher_ctx_ptr ctx = [] {
    auto key = random_seed();
    return keystream_at(key, 0);
  }();
  return ctx.get();
}

// -- neighbour graph ------------------------------------------------------

/// 0..n-1 but `self`, sorted.
std::vector<uint32_t> all_but(uint32_t n, uint32_t self) {
  std::vector<uint32_t> out;
  out.reserve(n - 1);
  for (uint32_t c = 0; c < n; ++c)
    if (c != self)
      out.push_back(c);
  return out;
}

/// The clients at ring positions p +- 1..half (mod ring.size()), sorted.
/// REQUIRES: 2 half < ring.size() - 1 (no position twice).
std::vector<uint32_t> ring_neighbours(const std::vector<uint32_t>& ring,
                                      uint64_t p, uint64_t half) {
  uint64_t n = ring.size();
  std::vector<uint32_t> out;
  out.reserve(2 * half);
  for (uint64_t d = 1; d <= half; ++d) {
    out.push_back(ring[(p + d) % n]);
    out.push_back(ring[(p + n - d) % n]);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// -- share payload --------------------------------------------------------

constexpr size_t payload_bytes = 4 + 4 + 1 + 32 + 32;

void put_le32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i)
    p[i] = static_cast<uint8_t>(v >> (8 * i));
}

uint32_t get_le32(const uint8_t* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 |
         uint32_t{p[3]} << 24;
}

} // namespace

// -- keys -----------------------------------------------------------------

key32 public_key_of(const key32& secret) {
  auto key = private_key(secret);
  key32 pub{};
  size_t bytes = pub.size();
  if (EVP_PKEY_get_raw_public_key(key.get(), pub.data(), &bytes) != 1 ||
      bytes != pub.size())
    broken("EVP_PKEY_get_raw_public_key failed");
  return pub;
}

key_pair generate_key_pair() {
  key_pair pair;
  fill_random(pair.secret);
  pair.public_key = public_key_of(pair.secret);
  return pair;
}

key32 commitment_of(const key32& seed) {
  key32 out{};
  unsigned int size = 0;
  if (EVP_Digest(seed.data(), seed.size(), out.data(), &size, EVP_sha256(),
                 nullptr) != 1 ||
      size != out.size())
    broken("SHA-256 failed");
  return out;
}

key32 random_seed() {
  key32 seed;
  fill_random(seed);
  return seed;
}

result<key32> agree(const key32& secret, const key32& peer_public,
                    std::string_view purpose, uint32_t round) {
  cleansed_key shared;
  if (!x25519(secret, peer_public, shared.bytes))
    return error{errc::bad_argument,
                 "the peer's X25519 public key is of low order"};
  auto info = "fedcaf secagg " + std::string{purpose} + " round " +
              std::to_string(round);
  return hkdf_sha256(shared.bytes, info);
}

// -- AES-256-GCM ----------------------------------------------------------

std::vector<uint8_t> seal(const key32& key, std::span<const uint8_t> plaintext,
                          std::span<const uint8_t> associated) {
  std::vector<uint8_t> out(nonce_bytes + plaintext.size() + tag_bytes);
  auto* nonce = out.data();
  auto* body = nonce + nonce_bytes;
  auto* tag = body + plaintext.size();
  fill_random({nonce, nonce_bytes});
  auto ctx = new_cipher_ctx();
  int written = 0;
  if (EVP_EncryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, key.data(),
                         nonce) != 1 ||
      !gcm_associate(ctx.get(), associated) ||
      !cipher_update(ctx.get(), plaintext.data(), body, plaintext.size()) ||
      EVP_EncryptFinal_ex(ctx.get(), tag, &written) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG,
                          static_cast<int>(tag_bytes), tag) != 1)
    broken("AES-256-GCM encryption failed");
  return out;
}

result<std::vector<uint8_t>> open_sealed(const key32& key,
                                         std::span<const uint8_t> sealed,
                                         std::span<const uint8_t> associated) {
  FEDCAF_REQUIRE(sealed.size() >= nonce_bytes + tag_bytes, errc::bad_checksum,
                 sealed.size());
  auto body =
      sealed.subspan(nonce_bytes, sealed.size() - nonce_bytes - tag_bytes);
  std::array<uint8_t, tag_bytes> tag;
  std::memcpy(tag.data(), sealed.data() + nonce_bytes + body.size(), tag_bytes);
  std::vector<uint8_t> out(body.size());
  auto ctx = new_cipher_ctx();
  int written = 0;
  bool ok =
      EVP_DecryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, key.data(),
                         sealed.data()) == 1 &&
      gcm_associate(ctx.get(), associated) &&
      cipher_update(ctx.get(), body.data(), out.data(), body.size()) &&
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG,
                          static_cast<int>(tag_bytes), tag.data()) == 1 &&
      EVP_DecryptFinal_ex(ctx.get(), out.data() + out.size(), &written) == 1;
  if (ok)
    return out;
  OPENSSL_cleanse(out.data(), out.size());
  return error{errc::bad_checksum,
               "sealed bytes fail authentication (wrong key, associated "
               "data, or a changed byte)"};
}

// -- Shamir over GF(2^8) --------------------------------------------------

std::vector<share> split(std::span<const uint8_t> secret, uint32_t threshold,
                         std::span<const uint8_t> xs) {
  assert(threshold >= 1 && threshold <= xs.size());
  // Per secret byte: its coefficients, the byte itself first.
  std::vector<uint8_t> coeffs(secret.size() * threshold);
  fill_random(coeffs);
  for (size_t b = 0; b < secret.size(); ++b)
    coeffs[b * threshold] = secret[b];
  std::vector<share> shares(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) {
    assert(xs[i] != 0 && std::count(xs.begin(), xs.end(), xs[i]) == 1);
    shares[i].x = xs[i];
    shares[i].y.resize(secret.size());
    for (size_t b = 0; b < secret.size(); ++b)
      shares[i].y[b] = gf_evaluate(
          std::span<const uint8_t>{coeffs}.subspan(b * threshold, threshold),
          xs[i]);
  }
  OPENSSL_cleanse(coeffs.data(), coeffs.size());
  return shares;
}

result<std::vector<uint8_t>> combine(std::span<const share> shares,
                                     uint32_t threshold) {
  if (auto ok = check_shares(shares, threshold); !ok)
    return ok.err();
  auto used = shares.first(threshold);
  std::vector<uint8_t> xs(threshold);
  for (size_t j = 0; j < threshold; ++j)
    xs[j] = used[j].x;
  std::vector<uint8_t> secret(used[0].y.size());
  for (size_t j = 0; j < threshold; ++j) {
    auto basis = lagrange_at_zero(xs, j);
    for (size_t b = 0; b < secret.size(); ++b)
      secret[b] ^= gf_mul(used[j].y[b], basis);
  }
  return secret;
}

// -- masks ----------------------------------------------------------------

void apply_masks(std::span<const mask_term> terms, uint64_t first_element,
                 std::span<uint32_t> values, const piece_hook& before,
                 const piece_hook& after) {
  if (values.empty())
    return;
  std::vector<cipher_ctx_ptr> streams;
  streams.reserve(terms.size());
  for (const auto& t : terms) {
    assert(t.sign == 1 || t.sign == -1);
    streams.push_back(keystream_at(*t.seed, first_element));
  }
  // Piece by piece, every mask: the piece and its keystream stay in L1.
  alignas(64) uint8_t keystream[keystream_piece_bytes];
  int written = 0, used_bytes = 0;
  for (size_t at = 0; at < values.size(); at += keystream_piece_bytes / 4) {
    auto piece = values.subspan(
        at, std::min(keystream_piece_bytes / 4, values.size() - at));
    auto bytes = static_cast<int>(4 * piece.size());
    if (before)
      before(at, piece);
    for (size_t k = 0; k < terms.size(); ++k) {
      if (EVP_EncryptUpdate(streams[k].get(), keystream, &written, zero_piece,
                            bytes) != 1)
        broken("AES-128-CTR failed");
      add_words(piece, keystream, terms[k].sign);
    }
    if (after)
      after(at, piece);
    used_bytes = std::max(used_bytes, bytes);
  }
  OPENSSL_cleanse(keystream, static_cast<size_t>(used_bytes));
}

void add_ring(std::span<std::byte> sum, std::span<const std::byte> x,
              bool assign) {
  assert(sum.size() == x.size() && x.size() % 4 == 0);
  for (size_t i = 0; i < x.size(); i += 4) {
    uint32_t v, acc = 0;
    std::memcpy(&v, x.data() + i, 4);
    if (!assign)
      std::memcpy(&acc, sum.data() + i, 4);
    acc += le32toh(v);
    std::memcpy(sum.data() + i, &acc, 4);
  }
}

void apply_mask(const key32& seed, uint64_t first_element,
                std::span<uint32_t> values, int sign) {
  const mask_term term{&seed, sign};
  apply_masks({&term, 1}, first_element, values);
}

// -- quantizer ------------------------------------------------------------

quantizer::quantizer(double clip, uint32_t bits)
    : clip_(clip),
      scale_((std::ldexp(1.0, static_cast<int>(bits)) - 1) / (2 * clip)) {
  assert(clip > 0 && bits >= 1 && bits <= 31);
}

// Stochastic rounding: v = (y + c) scale lies in [0, 2^b - 1]; adding a
// uniform u in [0, 1) and truncating gives floor(v) + 1 with probability
// frac(v), so E[q] = v (u has 16 random bits: a bias below 2^-16 of one
// step, far inside the quantizer's bound); v + u < 2^31 for b <= 31, so the
// conversion to int32 is always in range. Written without branches (a NaN
// element is turned into 0 by its bits, the clip is min/max) so that the
// compiler vectorizes it: about 4x the scalar loop, and 2.5x more where
// the CPU has AVX2 or AVX-512 (target_clones: the best version is picked
// when the program loads; the default one runs anywhere).
namespace {

__attribute__((target_clones("avx512f", "avx2", "default"))) void
quantize_piece(std::byte* p, const uint16_t* random, size_t m, double weight,
               double clip, double scale, int32_t top, uint64_t& clipped) {
  const double lo = -clip;
  uint32_t outside = 0;
  for (size_t i = 0; i < m; ++i) {
    uint32_t bits;
    std::memcpy(&bits, p + 4 * i, 4);
    bits &= -static_cast<uint32_t>((bits & 0x7fffffffu) <= 0x7f800000u);
    float x;
    std::memcpy(&x, &bits, 4); // NaN: 0
    double wx = weight * x;
    double y = std::max(wx, lo);
    y = std::min(y, clip);
    outside += y != wx;
    double v = (y + clip) * scale + static_cast<int32_t>(random[i]) * 0x1.0p-16;
    int32_t q = static_cast<int32_t>(v);
    q = std::min(q, top);
    q = std::max(q, 0);
    uint32_t word = static_cast<uint32_t>(q);
    std::memcpy(p + 4 * i, &word, 4);
  }
  clipped += outside;
}

/// p[i] = float(word_i a - b) over n uint32 words, in place.
__attribute__((target_clones("avx512f", "avx2", "default"))) void
dequantize_piece(std::byte* p, size_t n, double a, double b) {
  for (size_t i = 0; i < n; ++i) {
    uint32_t word;
    std::memcpy(&word, p + 4 * i, 4);
    // As two int32 halves: their conversions vectorize, a uint32's not.
    double x = static_cast<int32_t>(word >> 16) * 65536.0 +
               static_cast<int32_t>(word & 0xFFFFu);
    float mean = static_cast<float>(x * a - b);
    std::memcpy(p + 4 * i, &mean, 4);
  }
}

} // namespace

uint64_t quantizer::quantize_in_place(std::span<std::byte> values,
                                      double weight) const {
  assert(values.size() % 4 == 0);
  const auto top = static_cast<int32_t>(std::llround(2 * clip_ * scale_));
  alignas(64) uint16_t random[keystream_piece_bytes / 2];
  auto* stream = rounding_stream();
  uint64_t clipped = 0;
  const size_t n = values.size() / 4;
  for (size_t at = 0; at < n; at += keystream_piece_bytes / 2) {
    const size_t m = std::min(keystream_piece_bytes / 2, n - at);
    int written = 0;
    if (EVP_EncryptUpdate(stream, reinterpret_cast<uint8_t*>(random), &written,
                          zero_piece, static_cast<int>(2 * m)) != 1)
      broken("AES-128-CTR failed");
    quantize_piece(values.data() + 4 * at, random, m, weight, clip_, scale_,
                   top, clipped);
  }
  // Not cleansed: rounding bits are not secrets (the masks hide the values).
  return clipped;
}

void quantizer::quantize(std::span<const float> in, double weight,
                         std::span<uint32_t> out) const {
  assert(out.size() == in.size());
  std::memcpy(out.data(), in.data(), 4 * in.size());
  quantize_in_place(std::as_writable_bytes(out), weight);
}

void quantizer::dequantize(std::span<const uint32_t> sum, uint32_t contributors,
                           double weight_total, std::span<float> out) const {
  assert(out.size() == sum.size());
  std::memcpy(out.data(), sum.data(), 4 * sum.size());
  dequantize_in_place(std::as_writable_bytes(out), contributors, weight_total);
}

void quantizer::dequantize_in_place(std::span<std::byte> values,
                                    uint32_t contributors, double weight_total,
                                    double factor) const {
  assert(values.size() % 4 == 0);
  const double a = factor / (scale_ * weight_total);
  const double b = factor * contributors * clip_ / weight_total;
  dequantize_piece(values.data(), values.size() / 4, a, b);
}

double quantizer::error_bound(uint32_t contributors,
                              double weight_total) const {
  return contributors / (scale_ * weight_total);
}

uint64_t quantizer::levels() const {
  return static_cast<uint64_t>(std::llround(2 * clip_ * scale_));
}

uint64_t quantizer::max_contributors() const {
  auto levels = static_cast<uint64_t>(std::llround(2 * clip_ * scale_));
  return uint64_t{0xFFFFFFFF} / levels;
}

// -- neighbour graph ------------------------------------------------------

std::vector<std::vector<uint32_t>> neighbour_graph(uint32_t n, uint32_t k,
                                                   uint64_t seed) {
  std::vector<uint32_t> ring(n); // ring[p]: the client at position p
  std::iota(ring.begin(), ring.end(), 0u);
  std::mt19937_64 engine{seed};
  std::shuffle(ring.begin(), ring.end(), engine);
  auto even_k = uint64_t{k} + (k & 1u);
  bool complete = n == 0 || even_k >= n - 1;
  std::vector<std::vector<uint32_t>> out(n);
  for (uint32_t p = 0; p < n; ++p)
    out[ring[p]] =
        complete ? all_but(n, ring[p]) : ring_neighbours(ring, p, even_k / 2);
  return out;
}

// -- share payload --------------------------------------------------------

std::vector<uint8_t> encode(const share_payload& p) {
  std::vector<uint8_t> out(payload_bytes);
  put_le32(out.data(), p.from);
  put_le32(out.data() + 4, p.to);
  out[8] = p.x;
  std::memcpy(out.data() + 9, p.mask_key_share.data(), 32);
  std::memcpy(out.data() + 41, p.self_seed_share.data(), 32);
  return out;
}

result<share_payload> decode_share_payload(std::span<const uint8_t> bytes) {
  FEDCAF_REQUIRE(bytes.size() == payload_bytes, errc::malformed_frame,
                 bytes.size());
  share_payload p;
  p.from = get_le32(bytes.data());
  p.to = get_le32(bytes.data() + 4);
  p.x = bytes[8];
  std::memcpy(p.mask_key_share.data(), bytes.data() + 9, 32);
  std::memcpy(p.self_seed_share.data(), bytes.data() + 41, 32);
  return p;
}

} // namespace fedcaf::secagg
