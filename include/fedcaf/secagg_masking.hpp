#pragma once
// One round of SecAgg+ chunk by chunk, on top of secagg.hpp: what a client
// does to each chunk of its update before it leaves (quantize, add its
// masks), and what the server does to each chunk position of the ring sum
// once the round's secrets are reconstructed (remove the masks that do not
// cancel, dequantize). Both work on one chunk at a time at its element
// offset, so neither end holds a model-sized mask.
// Thread-safety: pure functions over memory the caller owns.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "fedcaf/secagg.hpp"

namespace fedcaf::secagg {

/// A mask seed and the sign it is applied with.
struct signed_seed {
  key32 seed{};
  int sign = 1;
};

/// The sign client `self` applies to the pairwise mask it shares with
/// `other` (client indices of the round): +1 iff self < other, so that the
/// pair's two masks cancel in the sum.
int pair_sign(uint32_t self, uint32_t other);

/// A client's masks for one round: its self mask and, per neighbour that
/// completed the share phase with it, their pair's mask with its sign.
/// True unless the little-endian uint32 words of `masked` (a masked
/// chunk) are plainly not spread over Z_2^32: their top 4 bits fall in 16
/// classes, and with 256 words or more a chi-squared statistic over 150
/// (15 degrees of freedom: an honest chunk passes but with probability
/// about 1e-23) says they are not uniform (zeros, a constant, an unmasked
/// quantized update). Fewer words always pass. A liar that uploads random
/// bytes passes; the unmasked sum's range check catches that.
bool looks_masked(std::span<const std::byte> masked);

struct client_masks {
  key32 self_seed{};
  std::vector<signed_seed> pairwise;
};

/// out[i] = quantized(weight * update[i]) + self mask + sum of the signed
/// pairwise masks (mod 2^32), for model elements [first_element,
/// first_element + update.size()): mask_chunk_in_place over a copy.
/// REQUIRES: out.size() == update.size().
void mask_chunk(const quantizer& q, double weight, const client_masks& masks,
                uint64_t first_element, std::span<const float> update,
                std::span<uint32_t> out);

/// The same in place over a chunk's bytes: float32 elements (host order)
/// in, masked words (little-endian) out; no scratch copy. Returns how many
/// weighted values were clipped to the quantizer's range.
/// REQUIRES: values.size() % 4 == 0, values.data() 4-byte aligned.
uint64_t mask_chunk_in_place(const quantizer& q, double weight,
                             const client_masks& masks, uint64_t first_element,
                             std::span<std::byte> values);

/// What the server removes from the ring sum after the unmask phase: the
/// self masks of the clients in the sum, and the pairwise masks that
/// survivors applied against neighbours whose update is not in the sum
/// (dropped after sharing: their pairwise masks no longer cancel).
struct unmask_plan {
  std::vector<key32> self_seeds;
  std::vector<signed_seed> pairwise; ///< as the survivor applied it
  uint32_t contributors = 0;         ///< updates in the sum
  double weight_total = 0;           ///< their weights' sum
};

/// One client of the round as the server knows it after the unmask phase.
struct round_client {
  uint32_t index = 0;
  key32 mask_public{};              ///< its advertised mask-key public key
  std::vector<uint32_t> neighbours; ///< sorted
  double weight = 0;                ///< its normalized weight
  bool in_sum = false;              ///< its whole masked update is in the sum
  key32 self_seed{};                ///< reconstructed; iff in_sum
  key32 mask_secret{};              ///< reconstructed; iff !in_sum
};

/// The plan for `clients` (every client that completed the share phase) in
/// round `round`. Fails (bad_argument) iff a dropped client's reconstructed
/// mask secret does not agree with a survivor's public key (a low-order
/// key), or no client is in the sum.
result<unmask_plan> make_unmask_plan(const std::vector<round_client>& clients,
                                     uint32_t round);

/// out[i] = the weighted mean the sum holds once the plan's masks at
/// elements [first_element, first_element + sum.size()) are removed:
/// unmask_chunk_in_place over `sum` (consumed), then copied to `out`.
/// REQUIRES: out.size() == sum.size().
void unmask_chunk(const quantizer& q, const unmask_plan& plan,
                  uint64_t first_element, std::span<uint32_t> sum,
                  std::span<float> out);

/// The same in place over a chunk of the ring sum's storage: uint32 words
/// (host order) in, float32 means (times `factor`) out. Returns how many
/// unmasked sums lie
/// beyond what the plan's contributors can give (contributors x (2^bits -
/// 1)): none unless a client's masked update was out of range (poisoned).
/// REQUIRES: sum.size() % 4 == 0, sum.data() 4-byte aligned.
uint64_t unmask_chunk_in_place(const quantizer& q, const unmask_plan& plan,
                               uint64_t first_element, std::span<std::byte> sum,
                               double factor = 1);

} // namespace fedcaf::secagg
