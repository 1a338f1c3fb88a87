#include "fedcaf/secagg_masking.hpp"

#include <endian.h>

#include <algorithm>
#include <array>
#include <cassert>
#include <cstdint>
#include <cstring>
#include <set>

namespace fedcaf::secagg {

namespace {

/// What a client adds: its self mask, and each pairwise mask with its sign.
std::vector<mask_term> terms_of(const client_masks& masks) {
  std::vector<mask_term> terms{{&masks.self_seed, 1}};
  for (const auto& p : masks.pairwise)
    terms.push_back({&p.seed, p.sign});
  return terms;
}

/// What the server takes off: the plan's masks with the opposite sign.
std::vector<mask_term> removal_terms(const unmask_plan& plan) {
  std::vector<mask_term> terms;
  for (const auto& seed : plan.self_seeds)
    terms.push_back({&seed, -1});
  for (const auto& p : plan.pairwise)
    terms.push_back({&p.seed, -p.sign});
  return terms;
}

} // namespace

int pair_sign(uint32_t self, uint32_t other) {
  return self < other ? 1 : -1;
}

void mask_chunk(const quantizer& q, double weight, const client_masks& masks,
                uint64_t first_element, std::span<const float> update,
                std::span<uint32_t> out) {
  std::memcpy(out.data(), update.data(), 4 * update.size());
  mask_chunk_in_place(q, weight, masks, first_element,
                      std::as_writable_bytes(out));
  for (auto& w : out)
    w = le32toh(w);
}

uint64_t mask_chunk_in_place(const quantizer& q, double weight,
                             const client_masks& masks, uint64_t first_element,
                             std::span<std::byte> values) {
  assert(values.size() % 4 == 0 &&
         reinterpret_cast<uintptr_t>(values.data()) % alignof(uint32_t) == 0);
  uint64_t clipped = 0;
  std::span<uint32_t> words{reinterpret_cast<uint32_t*>(values.data()),
                            values.size() / 4};
  // Piece by piece, while it is in cache: quantize (the floats become
  // uint32 words in place), add the masks, store little-endian.
  apply_masks(
      terms_of(masks), first_element, words,
      [&](size_t, std::span<uint32_t> piece) {
        clipped += q.quantize_in_place(std::as_writable_bytes(piece), weight);
      },
      [](size_t, std::span<uint32_t> piece) {
        for (auto& w : piece)
          w = htole32(w);
      });
  return clipped;
}

bool looks_masked(std::span<const std::byte> masked) {
  auto words = masked.size() / 4;
  if (words < 256)
    return true;
  std::array<uint64_t, 16> count{};
  for (size_t i = 0; i < words; ++i) // the top nibble: byte 3's high bits
    ++count[std::to_integer<uint8_t>(masked[4 * i + 3]) >> 4];
  double expected = static_cast<double>(words) / 16, chi2 = 0;
  for (auto c : count) {
    auto d = static_cast<double>(c) - expected;
    chi2 += d * d / expected;
  }
  return chi2 <= 150;
}

result<unmask_plan> make_unmask_plan(const std::vector<round_client>& clients,
                                     uint32_t round) {
  unmask_plan plan;
  std::set<uint32_t> known;
  for (const auto& c : clients)
    known.insert(c.index);
  for (const auto& c : clients) {
    if (!c.in_sum)
      continue;
    plan.self_seeds.push_back(c.self_seed);
    ++plan.contributors;
    plan.weight_total += c.weight;
  }
  if (plan.contributors == 0)
    return error{errc::bad_argument, "no client's update is in the sum"};
  for (const auto& dropped : clients) {
    if (dropped.in_sum)
      continue;
    for (const auto& survivor : clients) {
      if (!survivor.in_sum ||
          !std::binary_search(survivor.neighbours.begin(),
                              survivor.neighbours.end(), dropped.index))
        continue;
      auto seed =
          agree(dropped.mask_secret, survivor.mask_public, "mask", round);
      if (!seed)
        return seed.err();
      plan.pairwise.push_back(
          {*seed, pair_sign(survivor.index, dropped.index)});
    }
  }
  return plan;
}

void unmask_chunk(const quantizer& q, const unmask_plan& plan,
                  uint64_t first_element, std::span<uint32_t> sum,
                  std::span<float> out) {
  unmask_chunk_in_place(q, plan, first_element, std::as_writable_bytes(sum));
  std::memcpy(out.data(), sum.data(), 4 * sum.size());
}

uint64_t unmask_chunk_in_place(const quantizer& q, const unmask_plan& plan,
                               uint64_t first_element, std::span<std::byte> sum,
                               double factor) {
  const uint64_t limit = plan.contributors * q.levels();
  uint64_t beyond = 0;
  assert(sum.size() % 4 == 0 &&
         reinterpret_cast<uintptr_t>(sum.data()) % alignof(uint32_t) == 0);
  std::span<uint32_t> words{reinterpret_cast<uint32_t*>(sum.data()),
                            sum.size() / 4};
  apply_masks(removal_terms(plan), first_element, words, {},
              [&](size_t, std::span<uint32_t> piece) {
                for (auto w : piece)
                  beyond += w > limit;
                q.dequantize_in_place(std::as_writable_bytes(piece),
                                      plan.contributors, plan.weight_total,
                                      factor);
              });
  return beyond;
}

} // namespace fedcaf::secagg
