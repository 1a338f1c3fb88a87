#include "fedcaf/update_check.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include <doctest/doctest.h>

#include "fedcaf/element.hpp"

using namespace fedcaf;

namespace {

/// float32, bfloat16, float16, float64 and int64 tensors back to back.
manifest every_kind() {
  manifest m;
  m.tensors.push_back(make_tensor_info("f32", dtype::float32, {40}));
  m.tensors.push_back(make_tensor_info("bf16", dtype::bfloat16, {24}));
  m.tensors.push_back(make_tensor_info("f16", dtype::float16, {24}));
  m.tensors.push_back(make_tensor_info("f64", dtype::float64, {12}));
  m.tensors.push_back(make_tensor_info("i64", dtype::int64, {8}));
  return m;
}

/// A model of m where every floating element is `v`, integers all ones.
std::vector<std::byte> filled(const manifest& m, float v) {
  std::vector<std::byte> out(m.total_bytes());
  uint64_t at = 0;
  for (const auto& t : m.tensors) {
    auto n = t.byte_size / dtype_bytes(t.type);
    for (uint64_t i = 0; i < n; ++i) {
      auto* p = out.data() + at;
      if (t.type == dtype::float64) {
        double d = v;
        std::memcpy(p + i * 8, &d, 8);
      } else if (t.type == dtype::int64) {
        int64_t x = -1; // all bits set: must not look like a NaN
        std::memcpy(p + i * 8, &x, 8);
      } else {
        store_element(t.type, p, i, v);
      }
    }
    at += t.byte_size;
  }
  return out;
}

/// A model of m whose floating elements are random, of both signs over
/// `decades` decades (from 0.005), drawn in order from an LCG at `state`;
/// integers all ones.
std::vector<std::byte> random_floats(const manifest& m, uint64_t& state,
                                     int decades) {
  auto next = [&state, decades] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    auto mantissa = static_cast<double>(state >> 40) / double(1 << 24);
    return static_cast<float>((mantissa - 0.5) *
                              std::pow(10.0, double(state % decades) - 2));
  };
  auto out = filled(m, 0.0f);
  uint64_t at = 0;
  for (const auto& t : m.tensors) {
    auto n = t.byte_size / dtype_bytes(t.type);
    for (uint64_t i = 0; t.type != dtype::int64 && i < n; ++i) {
      if (t.type == dtype::float64) {
        double d = next();
        std::memcpy(out.data() + at + i * 8, &d, 8);
      } else {
        store_element(t.type, out.data() + at, i, next());
      }
    }
    at += t.byte_size;
  }
  return out;
}

/// Returns the chunks of `plan` whose payload of `model` fails
/// check_finite. Each chunk's checked_distance (the check and the distance
/// in one pass) must agree: the same error, else squared_distance's sum to
/// the bit.
std::vector<uint64_t>
refused_chunks(const manifest& m, const chunk_plan& plan,
               const std::vector<std::byte>& model,
               double max_abs = std::numeric_limits<double>::infinity()) {
  std::vector<uint64_t> out;
  auto global = filled(m, 0.375f);
  for (uint64_t seq = 0; seq < plan.chunk_count(); ++seq) {
    const auto& e = plan.extent(seq);
    auto bytes =
        std::span<const std::byte>{model}.subspan(e.model_offset, e.bytes);
    auto ok = check_finite(m, plan, seq, bytes, max_abs);
    auto fused = checked_distance(m, plan, seq, bytes, global, max_abs, 0.75);
    REQUIRE(bool(fused) == bool(ok));
    if (!ok) {
      CHECK(ok.err().code == errc::poisoned_update);
      CHECK(fused.err().code == errc::poisoned_update);
      CHECK(fused.err().message == ok.err().message);
      out.push_back(seq);
    } else {
      CHECK(*fused == squared_distance(m, plan, seq, bytes, global, 0.75));
    }
  }
  return out;
}

} // namespace

TEST_CASE("finite updates pass, and one NaN or infinity anywhere is found") {
  auto m = every_kind();
  for (uint64_t chunk : {64, 96, 1000}) {
    CAPTURE(chunk);
    auto plan = *chunk_plan::make(m, chunk);
    auto clean = filled(m, 1.5f);
    CHECK(refused_chunks(m, plan, clean).empty());
    // A non-finite value in each floating tensor, at its last element: the
    // chunk holding it, and only that one, is refused.
    uint64_t at = 0;
    for (const auto& t : m.tensors) {
      auto last = at + t.byte_size - dtype_bytes(t.type);
      at += t.byte_size;
      if (t.type == dtype::int64)
        continue;
      for (float bad : {std::nanf(""), std::numeric_limits<float>::infinity(),
                        -std::numeric_limits<float>::infinity()}) {
        auto model = clean;
        if (t.type == dtype::float64) {
          double d = bad;
          std::memcpy(model.data() + last, &d, 8);
        } else {
          store_element(t.type, model.data() + last, 0, bad);
        }
        auto refused = refused_chunks(m, plan, model);
        REQUIRE(refused.size() == 1);
        const auto& e = plan.extent(refused[0]);
        CHECK(e.model_offset <= last);
        CHECK(last < e.model_offset + e.bytes);
      }
    }
  }
}

TEST_CASE("the squared distance from the global model adds up over chunks") {
  auto m = every_kind();
  auto global = filled(m, 1.0f);
  auto update = filled(m, 3.0f);
  uint64_t floats = 40 + 24 + 24 + 12; // every floating element moved by 2
  for (uint64_t chunk : {64, 200, 4096}) {
    auto plan = *chunk_plan::make(m, chunk);
    double sum = 0;
    for (uint64_t seq = 0; seq < plan.chunk_count(); ++seq) {
      const auto& e = plan.extent(seq);
      sum += squared_distance(
          m, plan, seq,
          std::span<const std::byte>{update}.subspan(e.model_offset, e.bytes),
          global);
    }
    CHECK(sum == doctest::Approx(4.0 * static_cast<double>(floats)));
  }
}

TEST_CASE("a finite value beyond the bound is refused in every float type") {
  // The aggregator's bound keeps a round's weighted float32 sum finite: a
  // finite 3e38 from one client would otherwise overflow it.
  auto m = every_kind();
  auto plan = *chunk_plan::make(m, 1 << 20); // one chunk
  CHECK(refused_chunks(m, plan, filled(m, 1000.0f), 1000.0).empty());
  CHECK(refused_chunks(m, plan, filled(m, -1000.0f), 1000.0).empty());
  CHECK(refused_chunks(m, plan, filled(m, 60000.0f)).empty()); // no bound
  uint64_t at = 0;
  for (const auto& t : m.tensors) {
    CAPTURE(t.name);
    auto model = filled(m, 10.0f);
    auto* p = model.data() + at;
    if (t.type == dtype::float64) {
      double d = -1500.0;
      std::memcpy(p, &d, 8);
    } else if (t.type != dtype::int64) {
      store_element(t.type, p, 0, -1500.0f);
    }
    auto refused = refused_chunks(m, plan, model, 1000.0).size();
    CHECK(refused == (t.type == dtype::int64 ? 0u : 1u));
    // The largest finite half is within any bound from 65504 up.
    if (t.type == dtype::float16) {
      store_element(t.type, p, 0, 65504.0f);
      CHECK(refused_chunks(m, plan, model, 1e30).empty());
    }
    at += t.byte_size;
  }
}

TEST_CASE("the bound holds exactly at every position of long tensors") {
  // Vectorized scans handle the ends of a run apart: put the value at the
  // bound, and the next one above it, at each position of a tensor of 1003
  // elements (whatever the vector width, some in a tail), in either sign.
  struct kind {
    dtype type;
    uint64_t at_bound; ///< the bits of 1000 in this type
  };
  float f = 1000.0f;
  double d = 1000.0;
  uint32_t f32;
  uint64_t f64;
  std::memcpy(&f32, &f, 4);
  std::memcpy(&f64, &d, 8);
  for (auto k : {kind{dtype::float32, f32}, kind{dtype::float64, f64},
                 kind{dtype::float16, float_to_f16(f)},
                 kind{dtype::bfloat16, f32 >> 16}}) {
    auto type_name = std::string{dtype_name(k.type)};
    CAPTURE(type_name);
    manifest m;
    m.tensors.push_back(make_tensor_info("t", k.type, {1003}));
    auto plan = *chunk_plan::make(m, 1 << 20);
    auto width = dtype_bytes(k.type);
    auto sign = uint64_t{1} << (8 * width - 1);
    auto clean = filled(m, 1.0f);
    for (uint64_t i : {0, 1, 7, 8, 15, 16, 31, 32, 500, 991, 992, 999, 1002})
      for (uint64_t s : {uint64_t{0}, sign}) {
        CAPTURE(i);
        CAPTURE(s);
        auto model = clean;
        auto put = [&](uint64_t bits) {
          std::memcpy(model.data() + i * width, &bits, width); // little end
        };
        put(k.at_bound | s);
        CHECK(refused_chunks(m, plan, model, 1000.0).empty());
        put((k.at_bound + 1) | s);
        CHECK(refused_chunks(m, plan, model, 1000.0).size() == 1);
        put((sign - 1) | s); // the NaN of the largest payload
        CHECK(refused_chunks(m, plan, model).size() == 1);
        put(s); // zero, under the bound 0
        CHECK(refused_chunks(m, plan, model, 0.0).size() == 1); // the ones
        CHECK(refused_chunks(m, plan, filled(m, 0.0f), 0.0).empty());
      }
  }
}

TEST_CASE("checked_distance measures to the bit what squared_distance does, "
          "with the bounds checked in the same pass") {
  manifest m;
  m.tensors.push_back(make_tensor_info("w", dtype::float32, {1003}));
  m.tensors.push_back(
      make_tensor_info("bn.running_mean", dtype::float32, {64}));
  m.tensors.push_back(make_tensor_info("h", dtype::bfloat16, {517}));
  m.tensors.push_back(make_tensor_info("f16", dtype::float16, {33}));
  m.tensors.push_back(make_tensor_info("f64", dtype::float64, {9}));
  m.tensors.push_back(make_tensor_info("i64", dtype::int64, {5}));
  uint64_t state = 12345;
  auto random_model = [&] { return random_floats(m, state, 6); };
  auto global = random_model();
  auto update = random_model();
  for (uint64_t chunk : {64, 200, 1000, 4096, 1 << 20})
    for (double k : {1.0, 2.5}) {
      CAPTURE(chunk);
      CAPTURE(k);
      auto plan = *chunk_plan::make(m, chunk);
      double fused_sum = 0, sum = 0;
      for (uint64_t seq = 0; seq < plan.chunk_count(); ++seq) {
        const auto& e = plan.extent(seq);
        auto bytes =
            std::span<const std::byte>{update}.subspan(e.model_offset, e.bytes);
        auto fused = checked_distance(m, plan, seq, bytes, global, 1e6, k);
        REQUIRE(fused);
        auto alone = squared_distance(m, plan, seq, bytes, global, k);
        CHECK(*fused == alone);
        fused_sum += *fused;
        sum += alone;
      }
      CHECK(fused_sum > 0);
      CHECK(fused_sum == sum);
      // A value of the update above the bound, where the vectors run: the
      // check refuses it as check_finite does.
      auto plan_whole = *chunk_plan::make(m, 1 << 20);
      auto bad = update;
      store_element(dtype::float32, bad.data(), 517, 2e6f);
      auto refused = checked_distance(m, plan_whole, 0, bad, global, 1e6, k);
      REQUIRE_FALSE(refused);
      CHECK(refused.err().message.find("tensor 'w'") != std::string::npos);
    }
}

TEST_CASE("a chunk's checks and distance split over threads give one "
          "thread's verdict and bits, every element counted once") {
  // Tensors of odd lengths and mixed widths, so that elements straddle the
  // 64 KiB segments' edges (a float32 tensor starting 2 bytes past one).
  manifest m;
  m.tensors.push_back(make_tensor_info("h16", dtype::float16, {33333}));
  m.tensors.push_back(make_tensor_info("w", dtype::float32, {70001}));
  m.tensors.push_back(make_tensor_info("b", dtype::bfloat16, {40001}));
  m.tensors.push_back(
      make_tensor_info("bn.running_var", dtype::float32, {5000}));
  m.tensors.push_back(make_tensor_info("d", dtype::float64, {9001}));
  m.tensors.push_back(make_tensor_info("i", dtype::int64, {7}));
  m.tensors.push_back(make_tensor_info("v", dtype::float32, {100003}));
  uint64_t state = 99;
  auto random_model = [&] { return random_floats(m, state, 5); };
  auto global = random_model();
  auto update = random_model();
  // Every counted element's (u - k g)^2, summed plainly: the segments
  // count each element once.
  auto plain = [&](double k) {
    double sum = 0;
    uint64_t at = 0;
    for (const auto& t : m.tensors) {
      auto n = t.byte_size / dtype_bytes(t.type);
      bool counted = !outside_distance(t) && t.type != dtype::int64;
      for (uint64_t i = 0; counted && i < n; ++i) {
        double u, g;
        if (t.type == dtype::float64) {
          std::memcpy(&u, update.data() + at + i * 8, 8);
          std::memcpy(&g, global.data() + at + i * 8, 8);
        } else {
          u = load_element(t.type, update.data() + at, i);
          g = load_element(t.type, global.data() + at, i);
        }
        sum += (u - k * g) * (u - k * g);
      }
      at += t.byte_size;
    }
    return sum;
  };
  std::vector<std::unique_ptr<work_pool>> pools;
  for (unsigned t : {2u, 3u, 5u})
    pools.push_back(std::make_unique<work_pool>(t));
  for (uint64_t chunk : {uint64_t{1} << 20, uint64_t{300000}, uint64_t{65544}})
    for (double k : {1.0, 2.5}) {
      CAPTURE(chunk);
      CAPTURE(k);
      auto plan = *chunk_plan::make(m, chunk);
      double total = 0;
      for (uint64_t seq = 0; seq < plan.chunk_count(); ++seq) {
        CAPTURE(seq);
        const auto& e = plan.extent(seq);
        auto bytes =
            std::span<const std::byte>{update}.subspan(e.model_offset, e.bytes);
        auto one = checked_distance(m, plan, seq, bytes, global, 1e6, k);
        REQUIRE(one);
        CHECK(*one == squared_distance(m, plan, seq, bytes, global, k));
        for (const auto& pool : pools) {
          work_split split{pool.get(), pool->threads()};
          auto many =
              checked_distance(m, plan, seq, bytes, global, 1e6, k, split);
          REQUIRE(many);
          CHECK(*many == *one);
          CHECK(squared_distance(m, plan, seq, bytes, global, k, split) ==
                *one);
        }
        total += *one;
      }
      CHECK(total == doctest::Approx(plain(k)).epsilon(1e-12));
    }
  // Two values out of bounds in different tensors and segments of one
  // chunk: the first in the chunk's order is named, on any threads, also
  // where a later part finds its own first.
  auto plan = *chunk_plan::make(m, 1 << 20);
  auto bad = update;
  uint64_t v_at = m.total_bytes() - 100003 * 4;
  store_element(dtype::float32, bad.data() + v_at, 90000, 2e6f); // last part
  auto w_at = uint64_t{33333} * 2;
  for (uint64_t i : {uint64_t{0}, uint64_t{16383}, uint64_t{70000}}) {
    CAPTURE(i);
    auto worse = bad;
    float nan = std::numeric_limits<float>::quiet_NaN();
    std::memcpy(worse.data() + w_at + i * 4, &nan, 4);
    for (auto* pool :
         {static_cast<work_pool*>(nullptr), pools[0].get(), pools[2].get()}) {
      work_split split{pool, pool ? pool->threads() : 1};
      auto refused = checked_distance(m, plan, 0, worse, global, 1e6, 1, split);
      REQUIRE_FALSE(refused);
      CHECK(refused.err().message.find("tensor 'w'") != std::string::npos);
      auto later = checked_distance(m, plan, 0, bad, global, 1e6, 1, split);
      REQUIRE_FALSE(later);
      CHECK(later.err().message.find("tensor 'v'") != std::string::npos);
    }
  }
}
