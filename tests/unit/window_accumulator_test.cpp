#include "fedcaf/window_accumulator.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include <doctest/doctest.h>

#include "fedcaf/element.hpp"
#include "fedcaf/fedavg_accumulator.hpp"

using namespace fedcaf;

namespace {

std::span<const std::byte> bytes_of(const std::vector<float>& v, size_t from,
                                    size_t count) {
  return std::as_bytes(std::span{v}.subspan(from, count));
}

} // namespace

TEST_CASE("a cut-off update counts below its cut and is not awaited above") {
  manifest m;
  m.tensors.push_back(make_tensor_info("w", dtype::float32, {48}));
  auto acc = window_accumulator::make(m, *chunk_plan::make(m, 64), 2, 3);
  REQUIRE(acc);
  std::vector<float> model(48, 100.0f);
  auto out = std::as_writable_bytes(std::span{model});
  std::vector<float> x(48, 1.0f), y(48, 4.0f), z(48, 10.0f);
  // Position 0: all three deliver.
  for (const auto* c : {&x, &y, &z})
    REQUIRE(acc->fold(0, bytes_of(*c, 0, 16), 1, out));
  REQUIRE(acc->ready());
  acc->finalize_next(out, nullptr);
  // Position 1: x and z deliver, then z is cut off at 2: y still missing.
  REQUIRE(acc->fold(1, bytes_of(x, 16, 16), 1, out));
  REQUIRE(acc->fold(1, bytes_of(z, 16, 16), 1, out));
  acc->cut(2);
  CHECK_FALSE(acc->ready());
  REQUIRE(acc->fold(1, bytes_of(y, 16, 16), 1, out));
  REQUIRE(acc->ready());
  acc->finalize_next(out, nullptr);
  // Position 2: two contributions complete it; a third is refused.
  REQUIRE(acc->fold(2, bytes_of(x, 32, 16), 1, out));
  REQUIRE(acc->fold(2, bytes_of(y, 32, 16), 3, out));
  CHECK_FALSE(acc->fold(2, bytes_of(z, 32, 16), 1, out));
  REQUIRE(acc->ready());
  acc->finalize_next(out, nullptr);
  CHECK(acc->finish_round());
  CHECK(model[0] == 5.0f);
  CHECK(model[16] == 5.0f);
  CHECK(model[32] == doctest::Approx(13.0 / 4));
}

TEST_CASE("secure aggregation: the ring sum of a complete position is stored "
          "over the model's bytes there, wrapping mod 2^32") {
  manifest m;
  m.tensors.push_back(make_tensor_info("w", dtype::float32, {48}));
  auto acc = window_accumulator::make(m, *chunk_plan::make(m, 64), 2, 2);
  REQUIRE(acc); // 3 positions of 16 elements, a window of 2
  std::vector<uint32_t> a(48), b(48);
  for (uint32_t i = 0; i < 48; ++i) {
    a[i] = 0xFFFFFFF0u + i; // wraps when added to b
    b[i] = 100 + i;
  }
  auto words = [](const std::vector<uint32_t>& v, size_t from) {
    return std::as_bytes(std::span{v}.subspan(from, 16));
  };
  std::vector<uint32_t> model(48, 7);
  auto out = std::as_writable_bytes(std::span{model});
  REQUIRE(acc->fold_ring(0, words(a, 0)));
  CHECK_FALSE(acc->ready());
  CHECK_FALSE(acc->fold_ring(2, words(a, 32))); // outside the window
  REQUIRE(acc->fold_ring(1, words(a, 16)));
  REQUIRE(acc->fold_ring(0, words(b, 0)));
  CHECK_FALSE(acc->fold_ring(0, words(b, 0))); // a third contribution
  REQUIRE(acc->ready());
  acc->store_ring_next(out);
  REQUIRE(acc->fold_ring(1, words(b, 16)));
  acc->store_ring_next(out);
  for (size_t i = 0; i < 32; ++i)
    CHECK(model[i] == a[i] + b[i]); // mod 2^32
  CHECK(model[32] == 7);            // position 2 not stored yet
  REQUIRE(acc->fold_ring(2, words(a, 32)));
  REQUIRE(acc->fold_ring(2, words(b, 32)));
  acc->store_ring_next(out);
  CHECK(model[47] == a[47] + b[47]);
  CHECK(acc->finish_round());
}

TEST_CASE("robust rules reduce each coordinate of a position, count who was "
          "dropped, and write the next model apart from the current one") {
  manifest m;
  m.tensors.push_back(make_tensor_info("w", dtype::float32, {32}));
  for (auto kind : {position_rule::trimmed_mean, position_rule::median}) {
    CAPTURE(static_cast<int>(kind));
    auto acc = window_accumulator::make(m, *chunk_plan::make(m, 64), 2, 6,
                                        {kind, 0.2});
    REQUIRE(acc); // 2 positions of 16 elements
    std::vector<float> current(32, 7.0f), next(32, 0.0f);
    // Six clients; at element i client c sends base[c] + i, except that
    // client 5 (the attacker) sends -1000 at even and +1000 at odd i.
    float base[5] = {3, 1, 4, 2, 10};
    std::vector<std::vector<float>> x(6, std::vector<float>(32));
    for (size_t c = 0; c < 6; ++c)
      for (size_t i = 0; i < 32; ++i)
        x[c][i] = c == 5 ? (i % 2 ? 1000.0f : -1000.0f)
                         : base[c] + static_cast<float>(i);
    for (uint64_t seq = 0; seq < 2; ++seq)
      for (size_t c = 0; c < 6; ++c)
        REQUIRE(acc->fold(seq, bytes_of(x[c], seq * 16, 16), 1.0, {}, 100 + c));
    CHECK_FALSE(acc->fold(0, bytes_of(x[0], 0, 16), 1.0, {}, 100)); // a 7th
    while (acc->ready())
      acc->finalize_next(std::as_bytes(std::span{current}),
                         std::as_writable_bytes(std::span{next}), nullptr);
    CHECK(acc->finish_round());
    for (size_t i = 0; i < 32; ++i) {
      CAPTURE(i);
      auto f = static_cast<float>(i);
      // Sorted values at i (+ i): even i -1000, 1, 2, 3, 4, 10; odd i
      // 1, 2, 3, 4, 10, 1000. TrimmedMean drops floor(0.2 x 6) = 1 from
      // each end: 2.5 (even), 4.75 (odd); Median the middle two: 2.5, 3.5.
      float want = i % 2 == 0                      ? 2.5f + f
                   : kind == position_rule::median ? 3.5f + f
                                                   : 4.75f + f;
      CHECK(next[i] == want);
      CHECK(current[i] == 7.0f); // untouched
    }
    auto dropped = acc->take_trimmed();
    CHECK(dropped[105] == 32); // every value of the attacker's
    CHECK(dropped[104] == (kind == position_rule::median ? 32 : 16));
    uint64_t total = 0;
    for (auto [tag, n] : dropped)
      total += n;
    CHECK(total == (kind == position_rule::median ? 4 : 2) * 32);
    CHECK(acc->take_trimmed().empty());
  }
}

TEST_CASE("robust rules: a cut-off update counts below its cut only, and a "
          "position nobody delivered keeps the model's value") {
  manifest m;
  m.tensors.push_back(make_tensor_info("w", dtype::float32, {48}));
  auto acc = window_accumulator::make(m, *chunk_plan::make(m, 64), 3, 3,
                                      {position_rule::median, 0});
  REQUIRE(acc);
  std::vector<float> model(48, 100.0f);
  auto out = std::as_writable_bytes(std::span{model});
  std::vector<float> a(48, 1.0f), b(48, 2.0f), c(48, 9.0f);
  for (const auto* v : {&a, &b, &c})
    REQUIRE(acc->fold(0, bytes_of(*v, 0, 16), 1.0, {}, 0));
  acc->finalize_next(out, nullptr); // median of 1, 2, 9
  REQUIRE(acc->fold(1, bytes_of(a, 16, 16), 1.0, {}, 0));
  REQUIRE(acc->fold(1, bytes_of(c, 16, 16), 1.0, {}, 0));
  acc->cut(1); // b stopped before position 1
  REQUIRE(acc->ready());
  acc->finalize_next(out, nullptr); // median of 1, 9: their mean
  acc->set_contributors(7);         // more than it holds: stays 3
  CHECK(acc->contributors() == 3);
  acc->cut(2);
  acc->cut(2); // a and c stopped too: nobody delivers position 2
  REQUIRE(acc->ready());
  acc->finalize_next(out, nullptr);
  CHECK(acc->finish_round());
  CHECK(model[0] == 2.0f);
  CHECK(model[16] == 5.0f);
  CHECK(model[32] == 100.0f);
}

namespace {

/// n values of `type` whose magnitudes run from 1e-3 to 1e3 (and zeros
/// every 97th: a zero-initialised run's grid), as bytes.
std::vector<std::byte> spread_global(dtype type, size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<double> unit(0, 1);
  std::vector<std::byte> g(n * dtype_bytes(type));
  for (size_t i = 0; i < n; ++i) {
    auto v = i % 97 == 0 ? 0.0
                         : (unit(rng) < 0.5 ? -1 : 1) *
                               std::pow(10.0, 6 * unit(rng) - 3);
    store_element(type, g.data(), i, static_cast<float>(v));
  }
  return g;
}

/// `count` updates near g: each value moved by 1 % of itself plus 1e-4.
std::vector<std::vector<std::byte>> moved_from(dtype type,
                                               const std::vector<std::byte>& g,
                                               size_t count,
                                               std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  auto n = g.size() / dtype_bytes(type);
  std::vector<std::vector<std::byte>> out(count, g);
  for (auto& u : out)
    for (size_t i = 0; i < n; ++i) {
      auto v = load_element(type, g.data(), i);
      store_element(type, u.data(), i,
                    v + normal(rng) * (0.01f * std::fabs(v) + 1e-4f));
    }
  return out;
}

std::span<const std::byte> part_of(const std::vector<std::byte>& v,
                                   const chunk_extent& e) {
  return std::span<const std::byte>{v}.subspan(e.model_offset, e.bytes);
}

} // namespace

TEST_CASE("a position's mean, or a relay's sum, is a model-sized sum's bit "
          "for bit in any order of arrival, and a fold refused or taken "
          "back out leaves no trace") {
  // 203 floats and a running statistic outside the distance, cut into
  // positions of 37 (lengths that are no multiples of a vector's or a
  // run's), weights that are no integers.
  manifest m;
  m.tensors.push_back(make_tensor_info("w", dtype::float32, {203}));
  m.tensors.push_back(
      make_tensor_info("bn.running_mean", dtype::float32, {16}));
  auto n = m.total_bytes() / 4;
  auto plan = *chunk_plan::make(m, 37 * sizeof(float));
  std::mt19937 rng(5);
  auto g = spread_global(dtype::float32, n, rng);
  auto near = moved_from(dtype::float32, g, 3, rng);
  const std::vector<double> weights{3, 0.1, 7.25};
  // Far: a few values 300 times their run's magnitude away (sums past
  // int32, settled in float64 as a model-sized sum's wide blocks are).
  auto far = near;
  for (size_t i : {size_t{3}, size_t{77}, size_t{150}})
    for (auto& u : far)
      store_element(dtype::float32, u.data(), i,
                    load_element(dtype::float32, u.data(), i) + 3e5f);
  for (const auto* updates_of : {&near, &far})
    for (bool sums : {false, true})
      for (float limit : {std::numeric_limits<float>::max(), 50.0f})
        for (bool reverse : {false, true}) {
          CAPTURE(sums);
          CAPTURE(limit);
          CAPTURE(reverse);
          const auto& updates = *updates_of;
          auto poisoned = updates[1];
          store_element(dtype::float32, poisoned.data(), 40,
                        std::numeric_limits<float>::infinity());
          auto ram = fedavg_accumulator::make(m, plan);
          auto acc = window_accumulator::make(m, plan, 2, 3);
          REQUIRE(ram);
          REQUIRE(acc);
          ram->set_value_limit(limit);
          acc->set_value_limit(limit);
          if (sums) {
            ram->emit_sums();
            acc->emit_sums();
          }
          auto model = g; // averaged into in place
          for (uint64_t seq = 0; seq < plan.chunk_count(); ++seq) {
            const auto& e = plan.extent(seq);
            for (size_t k = 0; k < updates.size(); ++k) {
              auto c = reverse ? updates.size() - 1 - k : k;
              auto x = part_of(updates[c], e);
              // Refused (an infinity) or taken back out: nothing changes.
              auto bad = acc->fold_measured(seq, part_of(poisoned, e),
                                            weights[c], false, model, 1e30);
              CHECK(bool(bad) ==
                    !(e.model_offset <= 160 && 160 < e.model_offset + e.bytes));
              if (bad)
                acc->unfold(seq, part_of(poisoned, e), weights[c], false,
                            model);
              else
                CHECK(bad.err().code == errc::poisoned_update);
              auto d =
                  acc->fold_measured(seq, x, weights[c], false, model, 1e30);
              auto want =
                  ram->fold_measured(seq, x, weights[c], false, g, 1e30);
              REQUIRE(d);
              REQUIRE(want);
              CHECK(*d == *want); // the same distance, to the bit
            }
            REQUIRE(acc->ready());
            acc->finalize_next(model, nullptr);
          }
          CHECK(acc->finish_round());
          CHECK((ram->wide_blocks() > 0) == (updates_of == &far));
          auto expected = ram->finalize(g, nullptr);
          REQUIRE(expected);
          CHECK(std::memcmp(model.data(), expected->data(), model.size()) == 0);
        }
}

TEST_CASE("a position's fold and settling in parts on several threads give "
          "a model-sized sum's bits, in float32 and bfloat16") {
  // 300,001 elements in positions of 262,144 (16 segments: cut into parts)
  // and a rest of 37,857 (too few to cut).
  constexpr size_t n = 300001;
  const std::vector<double> weights{3, 0.1, 7.25};
  for (auto type : {dtype::float32, dtype::bfloat16}) {
    CAPTURE(dtype_name(type));
    manifest m;
    m.tensors.push_back(make_tensor_info("w", type, {n}));
    auto plan = *chunk_plan::make(m, 262144 * dtype_bytes(type));
    REQUIRE(plan.chunk_count() == 2);
    std::mt19937 rng(777);
    auto g = spread_global(type, n, rng);
    auto updates = moved_from(type, g, weights.size(), rng);
    auto ram = fedavg_accumulator::make(m, plan);
    REQUIRE(ram);
    std::vector<double> distances;
    for (uint64_t seq = 0; seq < plan.chunk_count(); ++seq)
      for (size_t c = 0; c < updates.size(); ++c) {
        auto d = ram->fold_measured(seq, part_of(updates[c], plan.extent(seq)),
                                    weights[c], false, g);
        REQUIRE(d);
        distances.push_back(*d);
      }
    auto expected = ram->finalize(g, nullptr);
    REQUIRE(expected);
    for (unsigned threads : {1u, 2u, 3u, 5u}) {
      CAPTURE(threads);
      auto acc = window_accumulator::make(m, plan, 2, 3);
      REQUIRE(acc);
      acc->set_threads(threads);
      CHECK((acc->split().pool != nullptr) == (threads > 1));
      auto model = g;
      size_t i = 0;
      for (uint64_t seq = 0; seq < plan.chunk_count(); ++seq) {
        for (size_t c = 0; c < updates.size(); ++c) {
          auto d =
              acc->fold_measured(seq, part_of(updates[c], plan.extent(seq)),
                                 weights[c], false, model);
          REQUIRE(d);
          CHECK(*d == distances[i++]);
        }
        REQUIRE(acc->ready());
        acc->finalize_next(model, nullptr);
      }
      CHECK(acc->finish_round());
      CHECK(std::memcmp(model.data(), expected->data(), model.size()) == 0);
    }
  }
}

TEST_CASE("relays' int32 sums on the grid, folded into open positions, give "
          "the flat round's model bit for bit") {
  manifest m;
  m.tensors.push_back(make_tensor_info("w", dtype::float32, {70001}));
  std::mt19937 rng(11);
  auto g = spread_global(dtype::float32, 70001, rng);
  auto updates = moved_from(dtype::float32, g, 6, rng);
  auto root_plan = *chunk_plan::make(m, 64 << 10);
  auto settle_all = [&](window_accumulator& acc, auto&& fold_at) {
    auto model = g;
    for (uint64_t seq = 0; seq < root_plan.chunk_count(); ++seq) {
      fold_at(acc, seq, model);
      REQUIRE(acc.ready());
      acc.finalize_next(model, nullptr);
    }
    CHECK(acc.finish_round());
    return model;
  };
  auto flat = window_accumulator::make(m, root_plan, 1, 6);
  REQUIRE(flat);
  auto flat_model = settle_all(
      *flat, [&](window_accumulator& acc, uint64_t seq, const auto& model) {
        for (const auto& u : updates)
          REQUIRE(acc.fold(seq, part_of(u, root_plan.extent(seq)), 1, model));
      });
  // Two relays of three (the second cutting chunks of 256 KiB), summing
  // in ram mode.
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
        REQUIRE(relay->fold(seq, part_of(updates[c], plan.extent(seq)), 1, g));
    auto sum = relay->finalize(g, nullptr);
    REQUIRE(sum);
    REQUIRE(relay->sums_on_grid());
    sums.push_back(std::move(*sum));
  }
  auto root = window_accumulator::make(m, root_plan, 1, 2);
  REQUIRE(root);
  REQUIRE(root->takes_grid());
  auto tree_model = settle_all(
      *root, [&](window_accumulator& acc, uint64_t seq, const auto& model) {
        for (const auto& s : sums) {
          auto x = s.bytes().subspan(root_plan.extent(seq).model_offset,
                                     root_plan.extent(seq).bytes);
          // Beyond 2^46 steps per update of its weight: refused, nothing
          // changed; folded and taken back out: neither.
          std::vector<std::byte> bad(x.begin(), x.end());
          int32_t huge = INT32_MAX;
          std::memcpy(bad.data() + 8, &huge, 4);
          auto refused = acc.fold_grid(seq, bad, 1.0 / (1 << 20), model);
          REQUIRE_FALSE(refused);
          CHECK(refused.err().code == errc::poisoned_update);
          REQUIRE(acc.fold_grid(seq, bad, 3, model));
          acc.unfold_grid(seq, bad);
          REQUIRE(acc.fold_grid(seq, x, 3, model));
        }
      });
  CHECK(std::memcmp(tree_model.data(), flat_model.data(), g.size()) == 0);
}

TEST_CASE("without g (a relay's round given up) a contribution is counted "
          "and never refused, and its position still settles") {
  manifest m;
  m.tensors.push_back(make_tensor_info("w", dtype::float32, {48}));
  auto acc = window_accumulator::make(m, *chunk_plan::make(m, 64), 2, 2);
  REQUIRE(acc);
  // Values of 5000 (beyond 2^46 steps of a zero run's grid) and a relay's
  // int32 sums at the limit: a round given up refuses neither.
  std::vector<float> big(48, 5000.0f);
  std::vector<int32_t> sums(48, INT32_MAX);
  auto d = acc->fold_measured(0, bytes_of(big, 0, 16), 1, false, {});
  REQUIRE(d);
  CHECK(*d == 0);
  // Taken back out and folded again: still counted once.
  acc->unfold(0, bytes_of(big, 0, 16), 1, false, {});
  CHECK_FALSE(acc->ready());
  REQUIRE(acc->fold(0, bytes_of(big, 0, 16), 1, {}));
  REQUIRE(acc->fold_grid(0, std::as_bytes(std::span{sums}.subspan(0, 16)),
                         1.0 / 1024, {}));
  REQUIRE(acc->ready());
  std::vector<float> model(48, 1.0f);
  acc->finalize_next(std::as_writable_bytes(std::span{model}), nullptr);
  CHECK(acc->low() == 1);
  CHECK(std::isfinite(model[0]));
}

TEST_CASE("a streaming relay's position of the round's weight settles as "
          "its int32 sums on the grid (emit_grid), which a root folds into "
          "the flat round's model bit for bit, and others as floats") {
  manifest m;
  m.tensors.push_back(make_tensor_info("w", dtype::float32, {300001}));
  std::mt19937 rng(23);
  auto g = spread_global(dtype::float32, 300001, rng);
  auto updates = moved_from(dtype::float32, g, 3, rng);
  auto plan = *chunk_plan::make(m, 256 << 10); // 5 positions
  REQUIRE(plan.chunk_count() == 5);
  // Client 0's values at position 1 lie 3e5 off: sums past int32 there.
  {
    const auto& e = plan.extent(1);
    auto* x = reinterpret_cast<float*>(updates[0].data() + e.model_offset);
    for (uint64_t i = 0; i < e.bytes / 4; ++i)
      x[i] += 3e5f;
  }
  // Client 2 is cut before position 3: positions 3 and 4 weigh 2.
  auto run = [&](window_accumulator& acc, auto&& fold_at) {
    auto model = g;
    if (acc.contributors() == 3)
      acc.cut(3);
    for (uint64_t seq = 0; seq < plan.chunk_count(); ++seq) {
      fold_at(acc, seq, model);
      REQUIRE(acc.ready());
      acc.finalize_next(model, nullptr);
    }
    return model;
  };
  auto fold_clients = [&](window_accumulator& acc, uint64_t seq,
                          const std::vector<std::byte>& model) {
    for (size_t c = 0; c < 3; ++c)
      if (c < 2 || seq < 3)
        REQUIRE(acc.fold(seq, part_of(updates[c], plan.extent(seq)), 1, model));
  };
  auto flat = window_accumulator::make(m, plan, 2, 3);
  REQUIRE(flat);
  auto flat_model = run(*flat, fold_clients);

  for (unsigned threads : {1u, 3u}) {
    CAPTURE(threads);
    auto relay = window_accumulator::make(m, plan, 2, 3);
    REQUIRE(relay);
    relay->emit_sums();
    relay->emit_grid(true);
    relay->set_threads(threads);
    auto sums = run(*relay, fold_clients);
    std::vector<bool> on_grid;
    for (uint64_t seq = 0; seq < plan.chunk_count(); ++seq)
      on_grid.push_back(relay->settled_on_grid(seq));
    CHECK(on_grid == std::vector<bool>{true, false, true, false, false});
    CHECK(relay->settled_weight(3) == 2);

    // A root of one contributor: the grid positions folded as they are,
    // the others as float sums of their weight.
    auto root = window_accumulator::make(m, plan, 2, 1);
    REQUIRE(root);
    auto tree_model = run(*root, [&](window_accumulator& acc, uint64_t seq,
                                     const std::vector<std::byte>& model) {
      auto x = part_of(sums, plan.extent(seq));
      if (on_grid[seq])
        REQUIRE(acc.fold_grid(seq, x, 3, model));
      else
        REQUIRE(acc.fold_sum(seq, x, relay->settled_weight(seq), model));
    });
    for (uint64_t seq : {0, 2}) {
      const auto& e = plan.extent(seq);
      CHECK(std::memcmp(tree_model.data() + e.model_offset,
                        flat_model.data() + e.model_offset, e.bytes) == 0);
    }
    // Without emit_grid, every position settles as floats: W g + u S.
    auto floats = window_accumulator::make(m, plan, 2, 3);
    REQUIRE(floats);
    floats->emit_sums();
    auto float_sums = run(*floats, fold_clients);
    for (uint64_t seq = 0; seq < plan.chunk_count(); ++seq) {
      CHECK_FALSE(floats->settled_on_grid(seq));
      const auto& e = plan.extent(seq);
      CHECK((std::memcmp(float_sums.data() + e.model_offset,
                         sums.data() + e.model_offset, e.bytes) == 0) ==
            !on_grid[seq]);
    }
  }
}
