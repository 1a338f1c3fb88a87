// A whole SecAgg+ round walked through with the library alone: keys, sealed
// shares relayed, masked chunks summed in the ring, a client lost after
// sharing, secrets reconstructed from the survivors' shares, masks removed
// chunk by chunk. The result must equal FedAvg of the survivors' updates
// within the quantizer's bound, whatever the chunk sizes on either side.

#include <doctest/doctest.h>

#include <endian.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <set>

#include "fedcaf/secagg_masking.hpp"

using namespace fedcaf;
using namespace fedcaf::secagg;

namespace {

constexpr uint32_t round_number = 7;

/// Associated data of a sealed share: the round and the pair, so that a
/// share relayed to another client than the one it was sealed for fails.
std::vector<uint8_t> share_context(uint32_t from, uint32_t to) {
  std::vector<uint8_t> ad(12);
  for (int i = 0; i < 4; ++i) {
    ad[i] = static_cast<uint8_t>(round_number >> (8 * i));
    ad[4 + i] = static_cast<uint8_t>(from >> (8 * i));
    ad[8 + i] = static_cast<uint8_t>(to >> (8 * i));
  }
  return ad;
}

struct sim_client {
  key_pair share_keys, mask_keys;
  key32 self_seed{};
  std::vector<float> update;
  double weight = 0;
  /// Sealed shares it received, by sender.
  std::map<uint32_t, std::vector<uint8_t>> inbox;
};

struct sim_round {
  uint32_t n = 8, k = 6, threshold = 3;
  std::vector<std::vector<uint32_t>> graph;
  std::vector<sim_client> clients;
  std::set<uint32_t> shared;   ///< completed the share phase
  std::set<uint32_t> uploaded; ///< whole masked update in the sum

  explicit sim_round(size_t elements) {
    graph = neighbour_graph(n, k, 99);
    std::mt19937_64 rng{5};
    std::uniform_real_distribution<float> value{-0.5f, 0.5f};
    std::vector<double> samples(n);
    double total = 0;
    for (uint32_t i = 0; i < n; ++i) {
      samples[i] = 1000.0 + 500.0 * i;
      total += samples[i];
    }
    clients.resize(n);
    for (uint32_t i = 0; i < n; ++i) {
      auto& c = clients[i];
      c.share_keys = generate_key_pair();
      c.mask_keys = generate_key_pair();
      c.self_seed = random_seed();
      c.weight = samples[i] / total;
      c.update.resize(elements);
      for (auto& x : c.update)
        x = value(rng);
    }
  }

  /// Client u splits its secrets among its neighbours and seals each share.
  void share(uint32_t u) {
    const auto& nb = graph[u];
    std::vector<uint8_t> xs;
    for (size_t j = 0; j < nb.size(); ++j)
      xs.push_back(static_cast<uint8_t>(j + 1));
    auto& c = clients[u];
    auto s = split(c.mask_keys.secret, threshold, xs);
    auto b = split(c.self_seed, threshold, xs);
    for (size_t j = 0; j < nb.size(); ++j) {
      share_payload p{u, nb[j], xs[j], {}, {}};
      std::copy(s[j].y.begin(), s[j].y.end(), p.mask_key_share.begin());
      std::copy(b[j].y.begin(), b[j].y.end(), p.self_seed_share.begin());
      auto key =
          agree(c.share_keys.secret, clients[nb[j]].share_keys.public_key,
                "share", round_number);
      REQUIRE(key);
      clients[nb[j]].inbox[u] = seal(*key, encode(p), share_context(u, nb[j]));
    }
    shared.insert(u);
  }

  /// u's masks against the neighbours that completed sharing.
  client_masks masks_of(uint32_t u) const {
    client_masks m{clients[u].self_seed, {}};
    for (auto v : graph[u]) {
      if (!shared.count(v))
        continue;
      auto seed = agree(clients[u].mask_keys.secret,
                        clients[v].mask_keys.public_key, "mask", round_number);
      REQUIRE(seed);
      m.pairwise.push_back({*seed, pair_sign(u, v)});
    }
    return m;
  }

  /// u's masked update, cut into chunks of `chunk_elements`, folded into the
  /// ring sum as each arrives; returns u's masked values (what the server
  /// saw of it).
  std::vector<uint32_t> upload(uint32_t u, std::vector<uint32_t>& sum,
                               const quantizer& q, size_t chunk_elements) {
    auto masks = masks_of(u);
    const auto& x = clients[u].update;
    std::vector<uint32_t> seen(x.size());
    for (size_t at = 0; at < x.size(); at += chunk_elements) {
      auto len = std::min(chunk_elements, x.size() - at);
      std::vector<uint32_t> chunk(len);
      mask_chunk(q, clients[u].weight, masks, at, std::span{x}.subspan(at, len),
                 chunk);
      for (size_t i = 0; i < len; ++i) {
        sum[at + i] += chunk[i];
        seen[at + i] = chunk[i];
      }
    }
    uploaded.insert(u);
    return seen;
  }

  /// Survivor v opens the share u sealed for it.
  result<share_payload> opened(uint32_t v, uint32_t u) const {
    auto key = agree(clients[v].share_keys.secret,
                     clients[u].share_keys.public_key, "share", round_number);
    REQUIRE(key);
    auto plain = open_sealed(*key, clients[v].inbox.at(u), share_context(u, v));
    if (!plain)
      return plain.err();
    return decode_share_payload(*plain);
  }

  /// u's self seed (in the sum) or mask secret (dropped) from the shares
  /// its surviving neighbours reveal; fails with fewer than the threshold.
  result<key32> reconstruct(uint32_t u, bool self_seed) const {
    std::vector<secagg::share> shares;
    for (auto v : graph[u]) {
      if (!uploaded.count(v) || !clients[v].inbox.count(u))
        continue;
      auto p = opened(v, u);
      REQUIRE(p);
      const auto& y = self_seed ? p->self_seed_share : p->mask_key_share;
      shares.push_back({p->x, {y.begin(), y.end()}});
    }
    auto secret = combine(shares, threshold);
    if (!secret)
      return secret.err();
    key32 out{};
    std::copy(secret->begin(), secret->end(), out.begin());
    return out;
  }

  result<unmask_plan> plan() const {
    std::vector<round_client> rc;
    for (auto u : shared) {
      round_client c{u,
                     clients[u].mask_keys.public_key,
                     graph[u],
                     clients[u].weight,
                     uploaded.count(u) > 0,
                     {},
                     {}};
      auto secret = reconstruct(u, c.in_sum);
      if (!secret)
        return secret.err();
      (c.in_sum ? c.self_seed : c.mask_secret) = *secret;
      rc.push_back(c);
    }
    return make_unmask_plan(rc, round_number);
  }

  /// FedAvg of the uploaded clients' updates, weights renormalized.
  std::vector<double> fedavg() const {
    std::vector<double> mean(clients[0].update.size());
    double total = 0;
    for (auto u : uploaded)
      total += clients[u].weight;
    for (auto u : uploaded)
      for (size_t i = 0; i < mean.size(); ++i)
        mean[i] += clients[u].weight / total * clients[u].update[i];
    return mean;
  }
};

} // namespace

TEST_CASE("secagg round: a client lost after sharing, any chunking, FedAvg "
          "of the survivors within the quantizer's bound") {
  const size_t elements = 300007; // not a multiple of any chunk size
  quantizer q{1.0, 22};
  // Upload and unmask chunks: 64 B, 4000 B (not AES-block aligned: 1000
  // elements), 1 MiB.
  for (auto [up, down] :
       {std::pair<size_t, size_t>{16, 262144}, {1000, 16}, {262144, 1000}}) {
    CAPTURE(up);
    CAPTURE(down);
    sim_round r{elements};
    for (uint32_t u = 0; u < r.n; ++u)
      if (u != 4) // client 4 is lost before sharing: nobody masks with it
        r.share(u);
    std::vector<uint32_t> sum(elements, 0);
    std::vector<uint32_t> seen;
    for (uint32_t u = 0; u < r.n; ++u)
      if (u != 4 && u != 5) { // client 5 is lost after sharing
        auto masked = r.upload(u, sum, q, up);
        if (u == 0)
          seen = std::move(masked);
      }
    // What the server saw of client 0 is not its quantized update.
    std::vector<uint32_t> plain(elements);
    q.quantize(r.clients[0].update, r.clients[0].weight, plain);
    size_t same = 0;
    for (size_t i = 0; i < elements; ++i)
      same += seen[i] == plain[i];
    CHECK(same < 10);

    auto plan = r.plan();
    if (!plan)
      FAIL(to_string(plan.err()));
    CHECK(plan->contributors == r.n - 2);
    // Client 5's pairwise masks with its surviving neighbours are removed.
    size_t neighbours_of_5 = 0;
    for (auto v : r.graph[5])
      neighbours_of_5 += r.uploaded.count(v);
    CHECK(plan->pairwise.size() == neighbours_of_5);
    CHECK(neighbours_of_5 > 0);

    std::vector<float> mean(elements);
    for (size_t at = 0; at < elements; at += down) {
      auto len = std::min(down, elements - at);
      unmask_chunk(q, *plan, at, std::span{sum}.subspan(at, len),
                   std::span{mean}.subspan(at, len));
    }
    auto exact = r.fedavg();
    auto bound = q.error_bound(plan->contributors, plan->weight_total);
    double worst = 0;
    for (size_t i = 0; i < elements; ++i)
      worst = std::max(worst, std::abs(mean[i] - exact[i]));
    CHECK(worst <= bound + 1e-7); // float32 rounding of the result
    CHECK(worst > 0);             // quantized, not a copy
    MESSAGE("worst error ", worst, ", bound ", bound);
  }
}

TEST_CASE("secagg round: without the masks' removal the sum is noise, with "
          "fewer survivors than the threshold the round cannot unmask") {
  const size_t elements = 4096;
  quantizer q{1.0, 22};
  sim_round r{elements};
  for (uint32_t u = 0; u < r.n; ++u)
    r.share(u);
  std::vector<uint32_t> sum(elements, 0);
  for (uint32_t u = 0; u < r.n; ++u)
    r.upload(u, sum, q, 1000);
  // Every client in the sum: the pairwise masks cancel, the self masks do
  // not, and the plan removes exactly those.
  auto plan = r.plan();
  REQUIRE(plan);
  CHECK(plan->pairwise.empty());
  CHECK(plan->self_seeds.size() == r.n);
  std::vector<float> noisy(elements), mean(elements);
  q.dequantize(sum, r.n, 1.0, noisy);
  unmask_chunk(q, *plan, 0, sum, mean);
  auto exact = r.fedavg();
  double worst = 0, noise = 0;
  for (size_t i = 0; i < elements; ++i) {
    worst = std::max(worst, std::abs(mean[i] - exact[i]));
    noise = std::max(noise, std::abs(noisy[i] - exact[i]));
  }
  CHECK(worst <= q.error_bound(r.n, 1.0) + 1e-7);
  CHECK(noise > 0.5);

  // Only two clients upload: each neighbour set holds at most two
  // survivors, below the threshold of 3.
  sim_round few{elements};
  for (uint32_t u = 0; u < few.n; ++u)
    few.share(u);
  std::vector<uint32_t> s2(elements, 0);
  few.upload(0, s2, q, 1000);
  few.upload(1, s2, q, 1000);
  auto failed = few.plan();
  REQUIRE_FALSE(failed);
  CHECK(failed.err().code == errc::bad_argument);
}

TEST_CASE("secagg round: a share relayed to another client than the one it "
          "was sealed for does not open") {
  sim_round r{16};
  r.share(0);
  auto to = r.graph[0][0];
  auto other = r.graph[0][1];
  CHECK(r.opened(to, 0));
  // The server hands `other` the share sealed for `to`.
  r.clients[other].inbox[0] = r.clients[to].inbox[0];
  auto wrong = r.opened(other, 0);
  REQUIRE_FALSE(wrong);
  CHECK(wrong.err().code == errc::bad_checksum);
}

TEST_CASE("secagg: masking in place over a chunk's bytes is the quantized "
          "update plus the masks, as mask_chunk's") {
  quantizer q{2.0, 20};
  client_masks masks{random_seed(), {{random_seed(), 1}, {random_seed(), -1}}};
  const uint64_t first = 12345;    // a chunk in the middle of a model
  std::vector<float> update(1001); // odd: the rounding's last single element
  std::mt19937 engine{3};
  std::uniform_real_distribution<float> value{-3.0f, 3.0f};
  for (auto& x : update)
    x = value(engine);
  std::vector<std::byte> bytes(update.size() * 4);
  std::memcpy(bytes.data(), update.data(), bytes.size());
  mask_chunk_in_place(q, 0.5, masks, first, bytes);
  std::vector<uint32_t> words(update.size());
  std::memcpy(words.data(), bytes.data(), bytes.size());
  for (auto& w : words)
    w = le32toh(w);
  // Taking the masks off leaves the quantized update: the same level as
  // mask_chunk's, or the next one (the rounding draws differ).
  apply_mask(masks.self_seed, first, words, -1);
  for (const auto& p : masks.pairwise)
    apply_mask(p.seed, first, words, -p.sign);
  std::vector<uint32_t> reference(update.size());
  mask_chunk(q, 0.5, {masks.self_seed, masks.pairwise}, first, update,
             reference);
  apply_mask(masks.self_seed, first, reference, -1);
  for (const auto& p : masks.pairwise)
    apply_mask(p.seed, first, reference, -p.sign);
  size_t off_by_one = 0;
  for (size_t i = 0; i < words.size(); ++i) {
    auto d =
        static_cast<int64_t>(words[i]) - static_cast<int64_t>(reference[i]);
    CHECK(std::abs(d) <= 1);
    off_by_one += d != 0;
  }
  CHECK(off_by_one > 0); // the rounding is stochastic, not a copy
  CHECK(off_by_one < words.size());
}

TEST_CASE("secagg: unmasking counts sums beyond what the contributors can "
          "give (an out-of-range masked update)") {
  quantizer q{1.0, 10}; // levels 1023
  client_masks a{random_seed(), {}}, b{random_seed(), {}};
  std::vector<float> x(5000, 0.25f);
  std::vector<uint32_t> ma(x.size()), mb(x.size());
  mask_chunk(q, 0.5, a, 0, x, ma);
  mask_chunk(q, 0.5, b, 0, x, mb);
  unmask_plan plan{{a.self_seed, b.self_seed}, {}, 2, 1.0};
  auto ring = [&](uint32_t poison) {
    std::vector<uint32_t> sum(x.size());
    for (size_t i = 0; i < x.size(); ++i)
      sum[i] = ma[i] + mb[i] + (i % 100 == 0 ? poison : 0);
    return sum;
  };
  auto honest = ring(0);
  CHECK(unmask_chunk_in_place(q, plan, 0,
                              std::as_writable_bytes(std::span{honest})) == 0);
  float mean = 0;
  std::memcpy(&mean, honest.data(), 4);
  CHECK(std::abs(mean - 0.25f) < 1e-2f);
  auto poisoned = ring(5000); // a client added 5000 levels at 50 elements
  CHECK(unmask_chunk_in_place(
            q, plan, 0, std::as_writable_bytes(std::span{poisoned})) == 50);
}
