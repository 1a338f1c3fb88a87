// The per-chunk work secure aggregation adds, against the plain path, in
// one run (ratios hold on a noisy machine; absolute times drift):
//   client: quantize + self mask + k pairwise masks per chunk, against
//           copying the chunk out of the model (what a plain upload does);
//   server: folding a masked chunk into the ring sum, against folding a
//           float chunk into the FedAvg sum; unmasking a position (n self
//           masks + d pairwise masks of lost clients, then dequantizing).
// Usage: secagg_bench [--mib 256] [--chunk-kib 1024] [--neighbours 8]
//                     [--clients 8] [--dropped 1]

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "fedcaf/secagg_masking.hpp"

using namespace fedcaf::secagg;
using clock_type = std::chrono::steady_clock;

namespace {

double seconds_since(clock_type::time_point t) {
  return std::chrono::duration<double>(clock_type::now() - t).count();
}

/// Runs `per_chunk(offset, length)` over every chunk; returns the seconds.
template <class F> double over_chunks(size_t elements, size_t chunk, F&& f) {
  auto t = clock_type::now();
  for (size_t at = 0; at < elements; at += chunk)
    f(at, std::min(chunk, elements - at));
  return seconds_since(t);
}

} // namespace

int main(int argc, char** argv) {
  size_t mib = 256, chunk_kib = 1024, neighbours = 8, clients = 8, dropped = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    size_t v = std::strtoull(argv[i + 1], nullptr, 10);
    (a == "--mib"          ? mib
     : a == "--chunk-kib"  ? chunk_kib
     : a == "--neighbours" ? neighbours
     : a == "--clients"    ? clients
                           : dropped) = v;
  }
  size_t elements = (mib << 20) / 4, chunk = (chunk_kib << 10) / 4;
  std::vector<float> model(elements, 0.25f), floats(chunk), sum_f(elements);
  std::vector<uint32_t> out(chunk), ring(elements);
  quantizer q{1.0, 22};
  client_masks masks{random_seed(), {}};
  for (size_t k = 0; k < neighbours; ++k)
    masks.pairwise.push_back({random_seed(), k % 2 ? 1 : -1});
  unmask_plan plan;
  for (size_t c = 0; c < clients; ++c)
    plan.self_seeds.push_back(random_seed());
  for (size_t d = 0; d < dropped * neighbours; ++d)
    plan.pairwise.push_back({random_seed(), 1});
  plan.contributors = static_cast<uint32_t>(clients);
  plan.weight_total = 1.0;

  auto copy_s = over_chunks(elements, chunk, [&](size_t at, size_t n) {
    std::memcpy(floats.data(), model.data() + at, n * 4);
  });
  auto mask_s = over_chunks(elements, chunk, [&](size_t at, size_t n) {
    mask_chunk(q, 0.125, masks, at, std::span{model}.subspan(at, n),
               std::span{out}.first(n));
  });
  auto fold_f = over_chunks(elements, chunk, [&](size_t at, size_t n) {
    for (size_t i = 0; i < n; ++i)
      sum_f[at + i] += 0.125f * model[at + i];
  });
  auto fold_r = over_chunks(elements, chunk, [&](size_t at, size_t n) {
    for (size_t i = 0; i < n; ++i)
      ring[at + i] += out[i];
  });
  auto unmask_s = over_chunks(elements, chunk, [&](size_t at, size_t n) {
    unmask_chunk(q, plan, at, std::span{ring}.subspan(at, n),
                 std::span{sum_f}.subspan(at, n));
  });
  auto gbps = [&](double s) { return (mib / 1024.0) / s; };
  std::printf("secagg_bench: %zu MiB float32 model, %zu KiB chunks, %zu "
              "neighbours, %zu clients, %zu lost after sharing\n",
              mib, chunk_kib, neighbours, clients, dropped);
  std::printf("client  copy a chunk out (plain)      %7.2f GiB/s\n",
              gbps(copy_s));
  std::printf("client  quantize + %2zu+1 masks       %7.2f GiB/s  "
              "(%.1fx the copy's time)\n",
              neighbours, gbps(mask_s), mask_s / copy_s);
  std::printf("server  fold float chunk (FedAvg)   %7.2f GiB/s\n",
              gbps(fold_f));
  std::printf("server  fold masked chunk (ring)    %7.2f GiB/s  "
              "(%.2fx FedAvg's time)\n",
              gbps(fold_r), fold_r / fold_f);
  std::printf("server  unmask + dequantize, once   %7.2f GiB/s  (%zu masks "
              "per element; %.1fx one FedAvg fold)\n",
              gbps(unmask_s), plan.self_seeds.size() + plan.pairwise.size(),
              unmask_s / fold_f);
  return 0;
}
