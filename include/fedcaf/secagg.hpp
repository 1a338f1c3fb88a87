#pragma once
// The arithmetic and cryptography of secure aggregation (SecAgg+, Bell et
// al. 2020, on Bonawitz et al. 2017), chunk by chunk: key agreement, the
// shares of a client's secrets, the masks positioned by element offset, and
// the fixed-point quantization in Z_2^32. No actor, no frame: the client
// and the aggregator compose these. Every secret comes from OpenSSL's
// RAND_bytes; X25519, HKDF-SHA256, AES-256-GCM and AES-128-CTR are
// OpenSSL's libcrypto.
// Thread-safety: pure functions over memory the caller owns, except
// quantizer, whose rounding draws random numbers (one per thread).
// Failures of the system itself (RAND_bytes or an OpenSSL call that cannot
// fail on a working system) throw std::runtime_error; every failure a peer's
// input can cause is returned as an error.

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string_view>
#include <vector>

#include "fedcaf/error.hpp"

namespace fedcaf::secagg {

/// A 32-byte value: an X25519 key, a derived key or a mask seed.
using key32 = std::array<uint8_t, 32>;

/// An X25519 key pair.
struct key_pair {
  key32 secret{};
  key32 public_key{};
};

/// Returns a fresh key pair.
key_pair generate_key_pair();

/// The X25519 public key of `secret` (to check a reconstructed secret
/// against the key its owner advertised).
key32 public_key_of(const key32& secret);

/// SHA-256 of `seed`: what a client commits to its self-mask seed with.
key32 commitment_of(const key32& seed);

/// Returns 32 random bytes (a self-mask seed).
key32 random_seed();

/// X25519(secret, peer_public), then HKDF-SHA256 with info "fedcaf secagg
/// <purpose> round <round>": the key both ends of a pair derive alike
/// (purpose "share": the key their shares are sealed with; "mask": the seed
/// of their pairwise mask). Fails (bad_argument) iff the peer's key is of
/// low order (the shared secret is all zero).
result<key32> agree(const key32& secret, const key32& peer_public,
                    std::string_view purpose, uint32_t round);

/// AES-256-GCM: returns nonce (12 random bytes) || ciphertext || tag (16).
std::vector<uint8_t> seal(const key32& key, std::span<const uint8_t> plaintext,
                          std::span<const uint8_t> associated);

/// Inverts seal. Fails (bad_checksum) iff `sealed` is shorter than 28
/// bytes, or was not sealed with `key` and `associated` (a changed byte).
result<std::vector<uint8_t>> open_sealed(const key32& key,
                                         std::span<const uint8_t> sealed,
                                         std::span<const uint8_t> associated);

/// One Shamir share of a secret: the point x (1..255) and, per byte of the
/// secret, the value of that byte's polynomial at x over GF(2^8).
struct share {
  uint8_t x = 0;
  std::vector<uint8_t> y;
};

/// Splits `secret` into one share per x in `xs` (distinct, 1..255); any
/// `threshold` of them give the secret back, fewer reveal nothing of it.
/// REQUIRES: 1 <= threshold <= xs.size().
std::vector<share> split(std::span<const uint8_t> secret, uint32_t threshold,
                         std::span<const uint8_t> xs);

/// The secret from shares of one split. Fails (bad_argument) iff fewer
/// than `threshold` shares are given, two have the same x, an x is 0, or
/// their lengths differ. Uses the first `threshold` shares.
result<std::vector<uint8_t>> combine(std::span<const share> shares,
                                     uint32_t threshold);

/// The mask of `seed` at model elements [first_element, first_element +
/// values.size()) added (sign +1) or subtracted (sign -1) to values, mod
/// 2^32: element i's mask is bytes [4i, 4i + 4) (little-endian) of the
/// AES-128-CTR keystream from counter 0 under the key seed[0..16) XOR
/// seed[16..32), so a chunk's mask is the same whatever the chunking, and
/// no model-sized mask exists.
void apply_mask(const key32& seed, uint64_t first_element,
                std::span<uint32_t> values, int sign);

/// sum[i] (+)= x[i] mod 2^32 over uint32 words: `sum` in host order, `x`
/// little-endian (as masked chunks travel); assigns instead of adding iff
/// `assign` (the first contribution: no zeroing pass). REQUIRES: equal
/// sizes, a multiple of 4.
void add_ring(std::span<std::byte> sum, std::span<const std::byte> x,
              bool assign);

/// One mask of apply_masks: its seed (not owned) and sign (+1 or -1).
struct mask_term {
  const key32* seed = nullptr;
  int sign = 1;
};

/// Work on one piece of the values (its offset in them, its words), run by
/// apply_masks while the piece is in cache.
using piece_hook = std::function<void(size_t, std::span<uint32_t>)>;

/// apply_mask for every term at once, a keystream piece at a time (the
/// values are read and written once per piece, not once per mask), with
/// `before` and `after` (if any) run on each piece around its masks.
void apply_masks(std::span<const mask_term> terms, uint64_t first_element,
                 std::span<uint32_t> values, const piece_hook& before = {},
                 const piece_hook& after = {});

/// Fixed point in Z_2^32: a value y is clipped to [-clip, clip] and maps to
/// (y + clip) * scale rounded stochastically (up with the probability of
/// its fraction), scale = (2^bits - 1) / (2 clip), so each client's value
/// lies in [0, 2^bits - 1] and a sum of n of them (n (2^bits - 1) < 2^32)
/// does not wrap. The sum of n values dequantizes to the sum of the
/// clipped y within n / scale per element. The clip applies to the weighted
/// value: weights are normalized (a client's share of the round's total),
/// not raw sample counts.
class quantizer {
public:
  /// REQUIRES: clip > 0, 1 <= bits <= 31.
  quantizer(double clip, uint32_t bits);

  /// out[i] = quantized(weight * in[i]).
  void quantize(std::span<const float> in, double weight,
                std::span<uint32_t> out) const;

  /// The same in place: `values` holds float32 elements (host order) and
  /// receives their quantized uint32 words (host order). Returns how many
  /// weighted values lay beyond [-clip, clip] and were clipped (a NaN
  /// counts as 0, not clipped).
  /// REQUIRES: values.size() % 4 == 0.
  uint64_t quantize_in_place(std::span<std::byte> values, double weight) const;

  /// out[i] = (sum[i] / scale - contributors * clip) / weight_total: the
  /// weighted mean of `contributors` values.
  void dequantize(std::span<const uint32_t> sum, uint32_t contributors,
                  double weight_total, std::span<float> out) const;

  /// The same in place: `values` holds the sum's uint32 words (host order)
  /// and receives float32 means, times `factor`. REQUIRES: values.size() %
  /// 4 == 0.
  void dequantize_in_place(std::span<std::byte> values, uint32_t contributors,
                           double weight_total, double factor = 1) const;

  /// The most a dequantized weighted mean of `contributors` unclipped
  /// values can differ from the exact one: contributors / (scale *
  /// weight_total).
  double error_bound(uint32_t contributors, double weight_total) const;

  /// The largest quantized value, 2^bits - 1.
  uint64_t levels() const;

  /// The most clients whose sum cannot wrap: floor((2^32 - 1) / (2^bits -
  /// 1)).
  uint64_t max_contributors() const;

private:
  double clip_;
  double scale_;
};

/// SecAgg+'s graph: client i (0..n-1) has neighbours[i], the clients it
/// shares its secrets with and masks against. Each has min(k, n - 1)
/// neighbours (k rounded up to even), the relation is symmetric, and the
/// graph is a Harary graph over a permutation of the clients drawn from
/// `seed`. k >= n - 1: every client neighbours every other. std::shuffle
/// differs between standard libraries: the server draws the graph and sends
/// each client its neighbours; clients never compute it.
std::vector<std::vector<uint32_t>> neighbour_graph(uint32_t n, uint32_t k,
                                                   uint64_t seed);

/// What one sealed share carries from client `from` to client `to`: the
/// shares of from's mask-key secret and of its self-mask seed at x =
/// to's place among from's neighbours + 1.
struct share_payload {
  uint32_t from = 0; ///< client index in the round
  uint32_t to = 0;
  uint8_t x = 0;
  key32 mask_key_share{};
  key32 self_seed_share{};
};

/// 73 bytes: from, to (little-endian u32), x, the two shares.
std::vector<uint8_t> encode(const share_payload& p);
/// Fails (malformed_frame) iff `bytes` is not 73 bytes long.
result<share_payload> decode_share_payload(std::span<const uint8_t> bytes);

} // namespace fedcaf::secagg
