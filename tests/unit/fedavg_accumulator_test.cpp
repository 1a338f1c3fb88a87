#include "fedcaf/element.hpp"
#include "fedcaf/fedavg_accumulator.hpp"
#include "fedcaf/update_check.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <optional>
#include <random>

#include <doctest/doctest.h>

using namespace fedcaf;

namespace {

manifest floats(uint64_t n) {
  manifest m;
  m.tensors.push_back(make_tensor_info("w", dtype::float32, {n}));
  return m;
}

/// An accumulator over n floats cut into chunks of `chunk_floats`.
fedavg_accumulator make_acc(uint64_t n, uint64_t chunk_floats) {
  auto m = floats(n);
  auto acc =
      fedavg_accumulator::make(m, *chunk_plan::make(m, chunk_floats * 4));
  REQUIRE(acc);
  return std::move(*acc);
}

std::span<const std::byte> bytes_of(const std::vector<float>& v, size_t from,
                                    size_t count) {
  return std::as_bytes(std::span{v}.subspan(from, count));
}

/// A current global model of `n` floats: 100, 101, ...
std::vector<std::byte> model_of(size_t n) {
  std::vector<std::byte> out(n * 4);
  for (size_t i = 0; i < n; ++i)
    store_element(dtype::float32, out.data(), i, 100.0f + i);
  return out;
}

std::vector<float> floats_of(const byte_buffer& b) {
  std::vector<float> v(b.size() / sizeof(float));
  std::memcpy(v.data(), b.data(), b.size());
  return v;
}

} // namespace

TEST_CASE("weighted chunks average to the weighted mean, in any order") {
  auto acc = make_acc(32, 16);
  auto global = model_of(32);
  std::vector<float> x(32), y(32);
  for (size_t i = 0; i < 32; ++i) {
    x[i] = static_cast<float>(i);
    y[i] = static_cast<float>(i) + 4;
  }
  CHECK(acc.fold(1, bytes_of(y, 16, 16), 3, global)); // y's second chunk first
  CHECK(acc.fold(0, bytes_of(x, 0, 16), 1, global));
  CHECK(acc.fold(1, bytes_of(x, 16, 16), 1, global));
  CHECK(acc.fold(0, bytes_of(y, 0, 16), 3, global));
  auto out = acc.finalize(global, nullptr);
  REQUIRE(out);
  auto v = floats_of(*out);
  for (size_t i = 0; i < 32; ++i)
    CHECK(v[i] == static_cast<float>(i) + 3);
}

TEST_CASE("a recycled buffer's old content never leaks into the sum") {
  auto acc = make_acc(32, 16);
  auto old = byte_buffer::uninitialized(128);
  std::memset(old.data(), 0x7f, old.size()); // garbage
  acc.recycle(std::move(old));
  auto global = model_of(32);
  std::vector<float> x(32, 2.0f);
  CHECK(acc.fold(0, bytes_of(x, 0, 16), 2, global));
  CHECK(acc.fold(1, bytes_of(x, 16, 16), 2, global));
  auto out = acc.finalize(global, nullptr);
  REQUIRE(out);
  CHECK(floats_of(*out) == std::vector<float>(32, 2.0f));
  // The next round starts over.
  std::vector<float> z(32, 5.0f);
  CHECK(acc.fold(0, bytes_of(z, 0, 16), 1, global));
  auto second = acc.finalize(global, nullptr);
  REQUIRE(second);
  auto v = floats_of(*second);
  CHECK(v[0] == 5.0f);
  CHECK(v[31] == 131.0f); // chunk 1 was never folded: the global's value
}

TEST_CASE("each chunk is divided by the weights that reached it") {
  // A client cut off after its first chunk counts there and nowhere else
  // (partial_updates: keep).
  auto acc = make_acc(48, 16);
  auto global = model_of(48);
  std::vector<float> x(48, 1.0f), y(48, 4.0f), z(48, 10.0f);
  for (uint64_t s = 0; s < 3; ++s) {
    CHECK(acc.fold(s, bytes_of(x, s * 16, 16), 1, global));
    CHECK(acc.fold(s, bytes_of(y, s * 16, 16), 2, global));
  }
  CHECK(acc.fold(0, bytes_of(z, 0, 16), 3, global)); // z stops after chunk 0
  CHECK(acc.weight_sum(0) == 6);
  CHECK(acc.weight_sum(2) == 3);
  auto out = acc.finalize(global, nullptr);
  REQUIRE(out);
  auto v = floats_of(*out);
  CHECK(v[0] == doctest::Approx((1.0 + 8 + 30) / 6));
  CHECK(v[16] == 3.0f);
  CHECK(v[47] == 3.0f);
}

TEST_CASE("a chunk outside the plan or of the wrong size changes nothing") {
  auto acc = make_acc(32, 16);
  auto global = model_of(32);
  std::vector<float> x(32, 1.0f);
  CHECK(acc.fold(1, bytes_of(x, 16, 16), 1, global));
  auto outside = acc.fold(2, bytes_of(x, 0, 16), 1, global);
  REQUIRE_FALSE(outside);
  CHECK(outside.err().code == errc::out_of_range);
  CHECK_FALSE(acc.fold(0, bytes_of(x, 0, 15), 1, global));
  CHECK_FALSE(acc.fold(0, bytes_of(x, 0, 17), 1, global));
  auto out = acc.finalize(global, nullptr);
  REQUIRE(out);
  auto v = floats_of(*out);
  CHECK(v[0] == 100.0f); // nothing folded at chunk 0
  CHECK(v[16] == 1.0f);
}

TEST_CASE("integer or mixed-dtype models are refused with the tensor's name") {
  manifest m;
  m.tensors.push_back(make_tensor_info("w", dtype::float32, {4}));
  m.tensors.push_back(make_tensor_info("h", dtype::bfloat16, {4}));
  auto acc = fedavg_accumulator::make(m, *chunk_plan::make(m, 64));
  REQUIRE_FALSE(acc);
  CHECK(acc.err().code == errc::unsupported_dtype);
  CHECK(acc.err().message.find("'h'") != std::string::npos);
  manifest ints;
  ints.tensors.push_back(make_tensor_info("steps", dtype::int64, {1}));
  CHECK_FALSE(fedavg_accumulator::make(ints, *chunk_plan::make(ints, 64)));
}

TEST_CASE("16-bit models are summed in float and rounded once at the end") {
  for (auto type : {dtype::bfloat16, dtype::float16}) {
    CAPTURE(dtype_name(type));
    manifest m;
    m.tensors.push_back(make_tensor_info("w", type, {64}));
    auto acc = fedavg_accumulator::make(m, *chunk_plan::make(m, 64));
    REQUIRE(acc);
    std::vector<std::byte> global(128);
    // Three clients: 1 + 1/256 is not representable in bf16, the mean of
    // three such values is; summing in 16 bits would lose it.
    std::vector<std::byte> x(128);
    for (size_t i = 0; i < 64; ++i)
      store_element(type, x.data(), i, 1.0f + static_cast<float>(i) / 64);
    for (int k = 0; k < 3; ++k) {
      for (uint64_t s = 0; s < acc->plan().chunk_count(); ++s) {
        const auto& e = acc->plan().extent(s);
        REQUIRE(acc->fold(s, std::span{x}.subspan(e.model_offset, e.bytes), 1,
                          global));
      }
    }
    auto out = acc->finalize(global, nullptr);
    REQUIRE(out);
    REQUIRE(out->size() == 128);
    for (size_t i = 0; i < 64; ++i)
      CHECK(load_element(type, out->data(), i) ==
            1.0f + static_cast<float>(i) / 64);
  }
}

TEST_CASE("finalize without any weight is our bug, reported as internal") {
  auto acc = make_acc(16, 16);
  auto global = model_of(16);
  auto out = acc.finalize(global, nullptr);
  REQUIRE_FALSE(out);
  CHECK(out.err().code == errc::internal);
}

TEST_CASE("a published value never becomes infinite: it saturates") {
  // float16: FedAvgM at learning rate 2 from 30000 towards an average of
  // 60000 steps to 90000, past the largest half; float32: past the limit
  // the aggregator sets. Both are clamped, not stored as infinity.
  for (auto type : {dtype::float16, dtype::float32}) {
    CAPTURE(dtype_name(type));
    manifest m;
    m.tensors.push_back(make_tensor_info("w", type, {16}));
    auto acc = fedavg_accumulator::make(m, *chunk_plan::make(m, 1 << 10));
    REQUIRE(acc);
    acc->set_value_limit(1e30f);
    rule_config cfg;
    cfg.server_learning_rate = 2;
    auto opt = server_optimizer::make(server_rule::fedavgm, cfg, type, 16, "");
    REQUIRE(opt);
    auto width = dtype_bytes(type);
    std::vector<std::byte> global(16 * width), x(16 * width);
    // From half of it (an update beyond 2^19 times the model's magnitude
    // would be refused: the exact sum's range), towards it at rate 2.
    float value = type == dtype::float16 ? 60000.0f : 9e29f;
    for (size_t i = 0; i < 16; ++i) {
      store_element(type, x.data(), i, value);
      store_element(type, global.data(), i, value / 2);
    }
    REQUIRE(acc->fold(0, x, 1, global));
    auto out = acc->finalize(global, opt->get());
    REQUIRE(out);
    auto limit = type == dtype::float16 ? 65504.0f : 1e30f;
    for (size_t i = 0; i < 16; ++i)
      CHECK(load_element(type, out->data(), i) == limit);
  }
}

namespace {

/// Folds the chunks of `updates` (weights `w`) into a fresh accumulator in
/// the order `order` gives (pairs of update, chunk), against `global`;
/// returns the finalized model's bytes.
std::vector<std::byte>
fold_in_order(const manifest& m, uint64_t chunk_bytes,
              const std::vector<std::vector<float>>& updates,
              const std::vector<double>& w,
              const std::vector<std::pair<size_t, uint64_t>>& order,
              const std::vector<std::byte>& global, size_t* wide = nullptr,
              unsigned threads = 1) {
  auto acc = fedavg_accumulator::make(m, *chunk_plan::make(m, chunk_bytes));
  REQUIRE(acc);
  acc->set_threads(threads);
  acc->set_fold_threads(threads);
  for (auto [u, s] : order) {
    const auto& e = acc->plan().extent(s);
    REQUIRE(acc->fold(
        s,
        std::as_bytes(std::span{updates[u]}).subspan(e.model_offset, e.bytes),
        w[u], global));
  }
  if (wide)
    *wide = acc->wide_blocks();
  auto out = acc->finalize(global, nullptr);
  REQUIRE(out);
  return {out->data(), out->data() + out->size()};
}

} // namespace

TEST_CASE("the sum does not depend on the order chunks arrive in, to the bit") {
  // Five clients' updates near a global model, three chunks of 3000 floats
  // (blocks of 1024 cut at chunk ends), folded in many orders: every order
  // gives the same bytes, within float rounding of the float64 mean. A
  // float32 sum in arrival order differs in the last bits between orders.
  const size_t n = 9000;
  auto m = floats(n);
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<std::byte> global(n * 4);
  std::vector<float> g(n);
  for (size_t i = 0; i < n; ++i) {
    g[i] = normal(rng) * (i % 97 == 0 ? 10.0f : 0.05f);
    store_element(dtype::float32, global.data(), i, g[i]);
  }
  std::vector<std::vector<float>> updates(5, std::vector<float>(n));
  for (auto& u : updates)
    for (size_t i = 0; i < n; ++i)
      u[i] = g[i] + normal(rng) * 0.01f;
  for (auto weights : {std::vector<double>{1, 1, 1, 1, 1},
                       std::vector<double>{600, 59999, 3, 1 << 20, 77}}) {
    std::vector<std::pair<size_t, uint64_t>> order;
    for (uint64_t s = 0; s < 3; ++s)
      for (size_t u = 0; u < 5; ++u)
        order.emplace_back(u, s);
    auto first = fold_in_order(m, 12000, updates, weights, order, global);
    // Finalized on 1 thread or on 3 (a chunk each): the same bits.
    CHECK(fold_in_order(m, 4000, updates, weights, order, global, nullptr, 3) ==
          fold_in_order(m, 4000, updates, weights, order, global, nullptr, 1));
    bool float_sums_differ = false;
    for (int trial = 0; trial < 20; ++trial) {
      std::shuffle(order.begin(), order.end(), rng);
      CHECK(fold_in_order(m, 12000, updates, weights, order, global) == first);
      // The same orders summed in float32 as they come, for contrast.
      std::vector<float> a(n, 0.0f), b(n, 0.0f);
      for (auto [u, s] : order)
        for (size_t i = s * 3000; i < (s + 1) * 3000; ++i)
          a[i] += static_cast<float>(weights[u]) * updates[u][i];
      for (size_t u = 0; u < 5; ++u)
        for (size_t i = 0; i < n; ++i)
          b[i] += static_cast<float>(weights[u]) * updates[u][i];
      float_sums_differ = float_sums_differ || a != b;
    }
    CHECK(float_sums_differ);
    double total = 0;
    for (double w : weights)
      total += w;
    for (size_t i = 0; i < n; ++i) {
      double mean = 0;
      for (size_t u = 0; u < 5; ++u)
        mean += weights[u] * updates[u][i];
      mean /= total;
      // Within a float32 ulp of the mean (the mean is made in float32),
      // plus a grid step: 2^-27 of the largest |g| of its run of 64.
      // (runs start at each chunk's first element)
      size_t chunk = i / 3000 * 3000, from = chunk + (i - chunk) / 64 * 64;
      float run = 0;
      for (size_t j = from; j < std::min(from + 64, chunk + 3000); ++j)
        run = std::max(run, std::fabs(g[j]));
      float got = load_element(dtype::float32, first.data(), i);
      CHECK(std::fabs(got - mean) <= std::fabs(mean) * 0x1p-23 + run * 0x1p-27);
    }
  }
}

TEST_CASE("sums that outgrow int32 move to int64 and stay exact") {
  // A zero global model (its blocks' grid is 2^-33) and updates of order 1:
  // every block goes wide, and the mean is still the same in any order.
  const size_t n = 4096;
  auto m = floats(n);
  std::vector<std::byte> global(n * 4);
  std::vector<std::vector<float>> updates(3, std::vector<float>(n));
  for (size_t u = 0; u < 3; ++u)
    for (size_t i = 0; i < n; ++i)
      updates[u][i] = 1.0f + static_cast<float>((i * (u + 3)) % 1000) / 7.0f;
  std::vector<std::pair<size_t, uint64_t>> order;
  for (uint64_t s = 0; s < 2; ++s)
    for (size_t u = 0; u < 3; ++u)
      order.emplace_back(u, s);
  size_t wide = 0;
  auto first = fold_in_order(m, 8192, updates, {1, 2, 3}, order, global, &wide);
  CHECK(wide == 4);
  std::reverse(order.begin(), order.end());
  CHECK(fold_in_order(m, 8192, updates, {1, 2, 3}, order, global) == first);
  for (size_t i = 0; i < n; ++i) {
    double mean =
        (updates[0][i] + 2.0 * updates[1][i] + 3.0 * updates[2][i]) / 6;
    // Each weighted delta is a float32 product (its rounding one update's
    // own), the mean made in float32: within two ulps of the mean.
    CHECK(std::fabs(load_element(dtype::float32, first.data(), i) - mean) <=
          std::fabs(mean) * 0x1p-22);
  }
}

TEST_CASE("a fold taken back out leaves the sum as it was, to the bit") {
  const size_t n = 2048;
  auto m = floats(n);
  auto global = model_of(n);
  std::vector<float> x(n), y(n), z(n);
  for (size_t i = 0; i < n; ++i) {
    x[i] = 100.5f + static_cast<float>(i) * 1.001f;
    y[i] = 99.25f + static_cast<float>(i) * 0.999f;
    z[i] = 1e6f * static_cast<float>(i % 3) - 7.0f; // far away
  }
  auto make = [&] {
    auto acc = fedavg_accumulator::make(m, *chunk_plan::make(m, n * 4));
    REQUIRE(acc);
    return std::move(*acc);
  };
  auto bytes = [](const std::vector<float>& v) {
    return std::as_bytes(std::span{v});
  };
  auto plain = make();
  REQUIRE(plain.fold(0, bytes(x), 1, global));
  REQUIRE(plain.fold(0, bytes(y), 2, global));
  auto expected = plain.finalize(global, nullptr);
  REQUIRE(expected);
  // z is measured, refused and taken out: first after x and y, then as
  // the first fold of the position (written, then forgotten).
  auto after = make();
  REQUIRE(after.fold(0, bytes(x), 1, global));
  REQUIRE(after.fold(0, bytes(y), 2, global));
  auto d = after.fold_measured(0, bytes(z), 5, false, global);
  REQUIRE(d);
  CHECK(*d ==
        doctest::Approx(squared_distance(m, after.plan(), 0, bytes(z), global))
            .epsilon(1e-5));
  after.unfold(0, bytes(z), 5, false, global);
  CHECK(after.weight_sum(0) == 3);
  auto got = after.finalize(global, nullptr);
  REQUIRE(got);
  CHECK(std::memcmp(got->data(), expected->data(), expected->size()) == 0);
  // A value beyond the exact sum's range (2^19 times the magnitude of the
  // model around it) is refused, in the middle of the chunk: what the fold
  // added before it is taken back out, nothing changes.
  auto far = y;
  far[1500] = 1e37f;
  auto refused = make();
  REQUIRE(refused.fold(0, bytes(x), 1, global));
  REQUIRE(refused.fold(0, bytes(y), 2, global));
  auto beyond = refused.fold_measured(0, bytes(far), 1, false, global);
  REQUIRE_FALSE(beyond);
  CHECK(beyond.err().code == errc::poisoned_update);
  CHECK(refused.weight_sum(0) == 3);
  auto kept = refused.finalize(global, nullptr);
  REQUIRE(kept);
  CHECK(std::memcmp(kept->data(), expected->data(), expected->size()) == 0);
  auto before = make();
  REQUIRE(before.fold_measured(0, bytes(z), 5, false, global));
  before.unfold(0, bytes(z), 5, false, global);
  CHECK(before.weight_sum(0) == 0);
  REQUIRE(before.fold(0, bytes(x), 1, global));
  REQUIRE(before.fold(0, bytes(y), 2, global));
  auto again = before.finalize(global, nullptr);
  REQUIRE(again);
  CHECK(std::memcmp(again->data(), expected->data(), expected->size()) == 0);
}

TEST_CASE("a relay's partial sums fold to the same model as their updates") {
  // Two relays' sums (emit_sums) folded at the root equal the flat sum of
  // the four updates to within the float rounding of each partial sum;
  // where the partial sums are exact in float32 they are equal bit for bit.
  const size_t n = 1024;
  auto m = floats(n);
  auto global = model_of(n);
  std::vector<std::vector<float>> u(4, std::vector<float>(n));
  for (size_t k = 0; k < 4; ++k)
    for (size_t i = 0; i < n; ++i)
      u[k][i] = 100.0f + static_cast<float>(i) + 0.25f * static_cast<float>(k);
  auto make = [&] {
    auto acc = fedavg_accumulator::make(m, *chunk_plan::make(m, n * 4));
    REQUIRE(acc);
    return std::move(*acc);
  };
  auto flat = make();
  for (const auto& x : u)
    REQUIRE(flat.fold(0, std::as_bytes(std::span{x}), 1, global));
  auto expected = flat.finalize(global, nullptr);
  REQUIRE(expected);
  auto root = make();
  for (size_t r = 0; r < 2; ++r) {
    auto relay = make();
    relay.emit_sums();
    for (size_t k = 2 * r; k < 2 * r + 2; ++k)
      REQUIRE(relay.fold(0, std::as_bytes(std::span{u[k]}), 1, global));
    auto sum = relay.finalize(global, nullptr);
    REQUIRE(sum);
    REQUIRE(root.fold_sum(0, sum->bytes(), 2, global));
  }
  auto tree = root.finalize(global, nullptr);
  REQUIRE(tree);
  CHECK(std::memcmp(tree->data(), expected->data(), expected->size()) == 0);
}

namespace {

/// Two tensors, of which the second lies outside the distance (its blocks
/// split where it begins), 4004 floats: lengths that leave tails.
manifest split_model() {
  manifest m;
  m.tensors.push_back(make_tensor_info("w", dtype::float32, {3001}));
  m.tensors.push_back(
      make_tensor_info("bn.running_mean", dtype::float32, {1003}));
  return m;
}

/// `count` updates near `global`: each element plus N(0, sigma).
/// A float32 global model of n values, N(0, 1) times `scale` each, but
/// zero where i % period < zeros (runs whose sums go wide).
std::vector<std::byte> normal_global(size_t n, std::mt19937& rng,
                                     float scale = 1, size_t period = 1,
                                     size_t zeros = 0) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<std::byte> global(n * 4);
  for (size_t i = 0; i < n; ++i)
    store_element(dtype::float32, global.data(), i,
                  i % period < zeros ? 0.0f : normal(rng) * scale);
  return global;
}

std::vector<std::vector<float>> updates_near(const std::vector<std::byte>& g,
                                             size_t count, float sigma,
                                             std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, sigma);
  std::vector<std::vector<float>> out(count, std::vector<float>(g.size() / 4));
  for (auto& u : out)
    for (size_t i = 0; i < u.size(); ++i)
      u[i] = load_element(dtype::float32, g.data(), i) + normal(rng);
  return out;
}

/// What folding every update into every chunk (update u at weight 1 + u,
/// measured) leaves, in one pass or two, on `threads` threads, with the
/// values' bounds tested at `max_abs` or not: the finalized model's bytes,
/// each fold's distance (-1: refused) and the blocks gone wide. Update
/// `taken_back` is unfolded after each of its folds.
struct folded {
  std::vector<std::byte> model;
  std::vector<double> distances;
  size_t wide = 0;
};

folded fold_each(const manifest& m, uint64_t chunk_floats,
                 const std::vector<std::byte>& global,
                 const std::vector<std::vector<float>>& updates, bool fused,
                 size_t taken_back = SIZE_MAX, unsigned threads = 1,
                 std::optional<double> max_abs = std::nullopt) {
  auto acc =
      fedavg_accumulator::make(m, *chunk_plan::make(m, chunk_floats * 4));
  REQUIRE(acc);
  acc->set_fused_fold(fused);
  acc->set_threads(threads);
  acc->set_fold_threads(threads);
  folded out;
  for (uint64_t seq = 0; seq < acc->plan().chunk_count(); ++seq) {
    const auto& e = acc->plan().extent(seq);
    for (size_t u = 0; u < updates.size(); ++u) {
      auto x =
          std::as_bytes(std::span{updates[u]}).subspan(e.model_offset, e.bytes);
      auto d = acc->fold_measured(seq, x, 1.0 + u, false, global, max_abs);
      out.distances.push_back(d ? *d : -1.0);
      if (d && u == taken_back)
        acc->unfold(seq, x, 1.0 + u, false, global);
    }
  }
  out.wide = acc->wide_blocks();
  auto model = acc->finalize(global, nullptr);
  REQUIRE(model);
  out.model.assign(model->data(), model->data() + model->size());
  return out;
}

} // namespace

TEST_CASE("a fold adds the same bits in one pass as in two, and measures "
          "the same distance") {
  // A global model with zero runs (their sums go wide), updates of which
  // one is refused for a value beyond the exact range in its second block
  // and one taken back out after its fold.
  auto m = split_model();
  std::mt19937 rng(11);
  auto global = normal_global(4004, rng, 0.1f, 1500, 200);
  auto updates = updates_near(global, 4, 0.05f, rng);
  updates[2][1800] = 1e37f; // beyond: refused, what it added taken out
  auto one = fold_each(m, 2500, global, updates, true, 3);
  auto two = fold_each(m, 2500, global, updates, false, 3);
  CHECK(one.wide > 0); // the zero runs' sums went wide
  CHECK(one.model == two.model);
  CHECK(one.distances == two.distances);
  CHECK(one.wide == two.wide);
  CHECK(std::count(one.distances.begin(), one.distances.end(), -1.0) ==
        1); // the refused one
}

TEST_CASE("a fold's values past int32 at a run's tail are taken back out as "
          "they were added, in one pass as in two") {
  // Element 3000 is the scalar tail of its block's first run (the block
  // splits where bn.running_mean begins) but would be a vector lane of the
  // whole block: a delta there past int32 (the block goes wide) or past
  // the exact range (refused) must leave the sums as two passes do.
  auto m = split_model();
  std::mt19937 rng(11);
  auto global = normal_global(4004, rng, 0.1f);
  auto updates = updates_near(global, 2, 0.01f, rng);
  for (float delta : {5.0f, 1e37f}) {
    CAPTURE(delta);
    auto x = updates;
    x[1][3000] += delta;
    auto one = fold_each(m, 4004, global, x, true);
    auto two = fold_each(m, 4004, global, x, false);
    CHECK(one.model == two.model);
    CHECK(one.distances == two.distances);
    CHECK(one.wide == two.wide);
    CHECK((one.distances[1] < 0) == (delta > 1e30f)); // refused past range
  }
}

TEST_CASE("a fold that tests the values' bounds refuses what check_finite "
          "refuses, in any block, and leaves the sum as it was") {
  auto m = split_model();
  std::mt19937 rng(5);
  auto global = normal_global(4004, rng);
  auto updates = updates_near(global, 3, 0.05f, rng);
  const double limit = 50;
  const uint64_t chunk_floats = 2500; // two chunks, blocks of 1024 in each
  auto plan = *chunk_plan::make(m, chunk_floats * 4);
  // Folds updates 0 and 1 (weights 1, 2) around `bad` (weight 3) at every
  // chunk, bad first where `bad_first`; unfolds what of `bad` was taken.
  // Returns the model, and per chunk whether `bad` was refused.
  auto run = [&](const std::vector<float>& bad, bool fused, bool bad_first) {
    auto acc = fedavg_accumulator::make(m, plan);
    REQUIRE(acc);
    acc->set_fused_fold(fused);
    std::vector<bool> refused;
    for (uint64_t seq = 0; seq < plan.chunk_count(); ++seq) {
      const auto& e = plan.extent(seq);
      auto part = [&](const std::vector<float>& v) {
        return std::as_bytes(std::span{v}).subspan(e.model_offset, e.bytes);
      };
      auto fold_bad = [&] {
        auto d = acc->fold_measured(seq, part(bad), 3, false, global, limit);
        refused.push_back(!d);
        if (d)
          acc->unfold(seq, part(bad), 3, false, global);
        else
          CHECK(d.err().code == errc::poisoned_update);
        auto checked = check_finite(m, plan, seq, part(bad), limit);
        CHECK(bool(checked) == bool(d)); // check_finite's verdict
      };
      if (bad_first)
        fold_bad();
      for (size_t u = 0; u < 2; ++u)
        REQUIRE(acc->fold_measured(seq, part(updates[u]), 1.0 + u, false,
                                   global, limit));
      if (!bad_first)
        fold_bad();
    }
    auto model = acc->finalize(global, nullptr);
    REQUIRE(model);
    return std::pair{
        std::vector<std::byte>(model->data(), model->data() + model->size()),
        refused};
  };
  auto [expected, none] = run(updates[2], true, false);
  CHECK(none == std::vector<bool>{false, false}); // in bounds: taken, unfolded
  const float inf = std::numeric_limits<float>::infinity();
  for (size_t at : {0, 7, 8, 1023, 1024, 2047, 2048, 2499, 2500, 3000, 3001,
                    3524, 3525, 4003})
    for (float value : {std::nanf(""), inf, -inf, 50.001f, -1e30f, 50.0f}) {
      CAPTURE(at);
      CAPTURE(value);
      auto bad = updates[2];
      bad[at] = value;
      bool above = !(std::fabs(value) <= limit);
      for (bool fused : {true, false})
        for (bool first : {false, true}) {
          CAPTURE(fused);
          CAPTURE(first);
          auto [model, refused] = run(bad, fused, first);
          CHECK(refused[0] == (above && at < chunk_floats));
          CHECK(refused[1] == (above && at >= chunk_floats));
          CHECK(model == expected);
        }
    }
}

TEST_CASE("a fold taken back out after it sent a block's sums to int64 "
          "leaves the model's bits as they were") {
  // The taken-back update's large value sends its block wide; the sums
  // are the same integers, and settle to the same floats (a wide block's
  // sums that fit in int32 settle as an int32 block's).
  auto m = split_model();
  std::mt19937 rng(9);
  auto global = normal_global(4004, rng);
  auto updates = updates_near(global, 3, 0.05f, rng);
  auto kept = fold_each(m, 2500, global, {updates[0], updates[1]}, true);
  updates[2][0] = 50.0f; // about 2^31 grid steps of its run
  auto taken = fold_each(m, 2500, global, updates, true, 2);
  CHECK(kept.wide == 0);
  CHECK(taken.wide > 0);
  CHECK(taken.model == kept.model);
}

TEST_CASE("a chunk folded in parts on several threads gives the sums and "
          "distances of one thread, to the bit, where a part leaves the plain "
          "path too") {
  // 153,003 floats (9 segments of 16,384, tails, a tensor outside the
  // distance between), in one chunk and in chunks of 70,000. The global
  // model has zero runs (their sums go wide); of the updates one holds a
  // value beyond the exact range (refused), one a value that sends its
  // block to int64 in the middle of a part, one a NaN (refused by the
  // bounds), and one is taken back out after each fold.
  manifest m;
  m.tensors.push_back(make_tensor_info("a", dtype::float32, {100000}));
  m.tensors.push_back(
      make_tensor_info("bn.running_mean", dtype::float32, {3000}));
  m.tensors.push_back(make_tensor_info("b", dtype::float32, {50003}));
  std::mt19937 rng(17);
  auto global = normal_global(153003, rng, 1, 40000, 300);
  auto updates = updates_near(global, 6, 0.05f, rng);
  updates[1][90000] = 1e37f;          // beyond: refused
  updates[2][40000 + 5000] += 50.0f;  // its block goes wide
  updates[3][140000] = std::nanf(""); // out of bounds
  for (uint64_t chunk : {153003, 70000}) {
    CAPTURE(chunk);
    auto one = fold_each(m, chunk, global, updates, true, 4, 1, 1e30);
    CHECK(std::count(one.distances.begin(), one.distances.end(), -1.0) == 2);
    CHECK(one.wide > 0);
    for (unsigned threads : {2, 3, 5}) {
      CAPTURE(threads);
      auto many = fold_each(m, chunk, global, updates, true, 4, threads, 1e30);
      CHECK(many.model == one.model);
      CHECK(many.distances == one.distances);
    }
  }
  // Plain chunks only: every part goes through.
  auto honest = updates_near(global, 3, 0.01f, rng);
  auto one = fold_each(m, 153003, global, honest, true, SIZE_MAX, 1);
  auto four = fold_each(m, 153003, global, honest, true, SIZE_MAX, 4);
  CHECK(four.model == one.model);
  CHECK(four.distances == one.distances);
  CHECK(one.distances[0] > 0);
}

TEST_CASE("an update refused or taken back out leaves no trace in when a "
          "block's sums go to int64, on one thread or several") {
  // g = 1: a delta of 7 is 7 x 2^26 grid steps, so four such updates fit
  // a block's int32 sums (bound 4 x 7 x 2^26 < 2^31) and a fifth would
  // not. Two are folded, one taken back out, one refused after its first
  // block was folded (a value beyond the exact range in its last block),
  // then two more: four counted, no block wide.
  manifest m;
  m.tensors.push_back(make_tensor_info("w", dtype::float32, {65536}));
  std::vector<std::byte> global(65536 * 4);
  for (size_t i = 0; i < 65536; ++i)
    store_element(dtype::float32, global.data(), i, 1.0f);
  std::vector<float> near(65536, 1.0f);
  near[0] = 8.0f;
  auto refused = near;
  refused[65000] = 1e37f;
  auto bytes = [](const std::vector<float>& v) {
    return std::as_bytes(std::span{v});
  };
  for (unsigned threads : {1u, 2u}) {
    CAPTURE(threads);
    auto acc = fedavg_accumulator::make(m, *chunk_plan::make(m, 65536 * 4));
    REQUIRE(acc);
    acc->set_fold_threads(threads);
    REQUIRE(acc->fold_measured(0, bytes(near), 1, false, global));
    REQUIRE(acc->fold_measured(0, bytes(near), 1, false, global));
    REQUIRE(acc->fold_measured(0, bytes(near), 1, false, global));
    acc->unfold(0, bytes(near), 1, false, global);
    CHECK_FALSE(acc->fold_measured(0, bytes(refused), 1, false, global));
    REQUIRE(acc->fold_measured(0, bytes(near), 1, false, global));
    REQUIRE(acc->fold_measured(0, bytes(near), 1, false, global));
    CHECK(acc->wide_blocks() == 0);
    CHECK(acc->weight_sum(0) == 4);
    auto model = acc->finalize(global, nullptr);
    REQUIRE(model);
    CHECK(load_element(dtype::float32, model->data(), 0) == 8.0f);
  }
}

TEST_CASE("relays' int32 sums on the grid, folded at the root, give flat "
          "FedAvg's model bit for bit, whatever chunks each cuts") {
  // 70,001 floats and a running statistic outside the distance; updates
  // near g (sums in int32), then with a few deltas of 32 or 256 times
  // their run's magnitude (int64 blocks whose sums still fit in int32 at
  // the relay, and once beyond it: float sums then).
  manifest m;
  m.tensors.push_back(make_tensor_info("w", dtype::float32, {70001}));
  m.tensors.push_back(
      make_tensor_info("bn.running_mean", dtype::float32, {64}));
  auto n = m.total_bytes() / 4;
  std::mt19937 rng(11);
  auto global = normal_global(n, rng, 0.5f);
  for (size_t i = 70001; i < n; ++i) // the statistic: large, and moved by 1
    store_element(dtype::float32, global.data(), i, 1000.0f);
  for (int wide : {0, 1, 2}) {
    CAPTURE(wide);
    auto updates = updates_near(global, 6, 0.01f, rng);
    for (auto& u : updates)
      for (size_t i = 70001; i < n; ++i)
        u[i] += 1.0f;
    // Group A's: +-32 in two updates (int64 blocks, sums near 0), or 256
    // in all three (sums past int32).
    for (size_t i : {size_t{5}, size_t{40000}})
      for (size_t c = 0; c < 3 && wide > 0; ++c)
        updates[c][i] +=
            wide == 2 ? 256.0f : std::array{32.0f, -32.0f, 0.0f}[c];
    auto bytes = [&](size_t c, const chunk_extent& e) {
      return bytes_of(updates[c], e.model_offset / 4, e.bytes / 4);
    };
    auto root_plan = *chunk_plan::make(m, 64 << 10);
    auto flat = fedavg_accumulator::make(m, root_plan);
    REQUIRE(flat);
    for (size_t c = 0; c < updates.size(); ++c)
      for (uint64_t seq = 0; seq < root_plan.chunk_count(); ++seq)
        REQUIRE(flat->fold(seq, bytes(c, root_plan.extent(seq)), 1, global));
    auto flat_model = flat->finalize(global, nullptr);
    REQUIRE(flat_model);
    // Two relays of three, the second in chunks of another size.
    std::vector<byte_buffer> sums;
    for (uint64_t relay_chunk : {uint64_t{64} << 10, uint64_t{256} << 10}) {
      auto plan = *chunk_plan::make(m, relay_chunk);
      auto relay = fedavg_accumulator::make(m, plan);
      REQUIRE(relay);
      relay->emit_sums();
      relay->grid_sums_of(3);
      auto first = sums.size() * 3;
      for (size_t c = first; c < first + 3; ++c)
        for (uint64_t seq = 0; seq < plan.chunk_count(); ++seq)
          REQUIRE(relay->fold(seq, bytes(c, plan.extent(seq)), 1, global));
      CHECK((relay->wide_blocks() > 0) == (wide > 0 && sums.empty()));
      auto sum = relay->finalize(global, nullptr);
      REQUIRE(sum);
      CHECK(relay->sums_on_grid() == (wide < 2 || !sums.empty()));
      sums.push_back(std::move(*sum));
    }
    if (wide == 2) // group A's sums passed int32: floats, as ever
      continue;
    auto root = fedavg_accumulator::make(m, root_plan);
    REQUIRE(root);
    // Each group's distance from 3 g, over the elements the distance
    // counts (not the statistic's, which would dominate it).
    double expected = 0, measured = 0;
    for (size_t first : {size_t{0}, size_t{3}})
      for (size_t i = 0; i < 70001; ++i) {
        double d = 0;
        for (auto c = first; c < first + 3; ++c)
          d += static_cast<double>(updates[c][i]) -
               load_element(dtype::float32, global.data(), i);
        expected += d * d;
      }
    for (uint64_t seq = 0; seq < root_plan.chunk_count(); ++seq)
      for (const auto& s : sums) {
        const auto& e = root_plan.extent(seq);
        auto x = s.bytes().subspan(e.model_offset, e.bytes);
        // A sum refused (beyond 2^46 steps per update) changes nothing;
        // one taken back out neither.
        auto bad = std::vector<std::byte>(x.begin(), x.end());
        int32_t huge = INT32_MAX;
        std::memcpy(bad.data() + 8, &huge, 4);
        auto refused = root->fold_grid(seq, bad, 1.0 / (1 << 20), global);
        REQUIRE_FALSE(refused);
        CHECK(refused.err().code == errc::poisoned_update);
        REQUIRE(root->fold_grid(seq, bad, 3, global));
        root->unfold_grid(seq, bad);
        auto d = root->fold_grid(seq, x, 3, global);
        REQUIRE(d);
        measured += *d;
      }
    CHECK(measured == doctest::Approx(expected).epsilon(1e-4));
    auto tree_model = root->finalize(global, nullptr);
    REQUIRE(tree_model);
    CHECK(std::memcmp(tree_model->data(), flat_model->data(),
                      flat_model->size()) == 0);
  }
}
