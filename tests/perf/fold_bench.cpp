// What folding costs the server, per byte of update: the window
// accumulator's fold (on the exact grid, measuring, as ram mode's) and
// finalize, the update check (the values' bounds
// and the distance from the global model, in two passes and in one), and
// ram mode's exact sum (fedavg_accumulator: its fold, which tests the
// bounds and measures the distance in the same pass, and its finalize),
// over a synthetic float32 model, each as a ratio of a memcpy of the same
// bytes timed in the same run (1.00: the fold goes as fast as the memory
// moves; shared machines drift, ratios hold). Also the machine's read
// bandwidth (a sum over the update) and, for contrast, a float32 fold in
// arrival order (out += w x: what ram mode did before its sums became
// exact).
//
//   fold_bench [--mib 256] [--clients 4] [--repeat 3]

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "fedcaf/chunk_plan.hpp"
#include "fedcaf/dummy_trainer.hpp"
#include "fedcaf/fedavg_accumulator.hpp"
#include "fedcaf/update_check.hpp"
#include "fedcaf/window_accumulator.hpp"

using namespace fedcaf;
using clock_type = std::chrono::steady_clock;

namespace {

double seconds_since(clock_type::time_point t) {
  return std::chrono::duration<double>(clock_type::now() - t).count();
}

uint64_t flag(int argc, char** argv, const std::string& name, uint64_t dflt) {
  for (int i = 1; i + 1 < argc; ++i)
    if (argv[i] == name)
      return std::strtoull(argv[i + 1], nullptr, 10);
  return dflt;
}

struct figures {
  double copy = 1e9, fold = 1e9, finalize = 1e9, distance = 1e9;
  double read = 1e9, float_fold = 1e9, exact_fold = 1e9, exact_finalize = 1e9;
  double exact_finalize_mt = 1e9, exact_two_pass = 1e9, checked = 1e9;
  double exact_apart = 1e9, exact_fold_mt = 1e9;
  double fold_mt = 1e9, finalize_mt = 1e9;
};

} // namespace

int main(int argc, char** argv) {
  auto mib = flag(argc, argv, "--mib", 256);
  auto clients = static_cast<uint32_t>(flag(argc, argv, "--clients", 4));
  auto repeat = flag(argc, argv, "--repeat", 3);
  auto layout = synthetic_layout(16, mib << 20);
  auto plan = chunk_plan::make(layout, 4 << 20);
  if (!plan) {
    std::fprintf(stderr, "%s\n", plan.err().message.c_str());
    return 1;
  }
  auto global = synthetic_model(layout, 1);
  std::vector<model_snapshot> updates;
  for (uint32_t c = 0; c < clients; ++c)
    updates.push_back(synthetic_model(layout, 2 + c));
  auto next = byte_buffer::zeroed(layout.total_bytes());
  auto scratch = byte_buffer::zeroed(layout.total_bytes());
  figures best; // the fastest of `repeat` runs of each
  double sink = 0;
  auto exact = fedavg_accumulator::make(layout, *plan);
  exact->recycle(byte_buffer::zeroed(layout.total_bytes()));
  // The same sums finalized on every core of this host.
  auto cores = std::max(1u, std::thread::hardware_concurrency());
  auto exact_mt = fedavg_accumulator::make(layout, *plan);
  exact_mt->recycle(byte_buffer::zeroed(layout.total_bytes()));
  exact_mt->set_threads(cores);
  exact_mt->set_fold_threads(cores);
  // The fold in two passes (the values made, then added): the same bits.
  auto exact_two = fedavg_accumulator::make(layout, *plan);
  exact_two->recycle(byte_buffer::zeroed(layout.total_bytes()));
  exact_two->set_fused_fold(false);
  // The fold with the values' bounds tested in a pass of their own before.
  auto exact_apart = fedavg_accumulator::make(layout, *plan);
  exact_apart->recycle(byte_buffer::zeroed(layout.total_bytes()));
  bool same_bits = true, same_two_pass = true, same_check = true;
  bool same_window = true, same_ram = true;
  for (uint64_t r = 0; r < repeat; ++r) {
    auto t = clock_type::now();
    for (const auto& u : updates)
      std::memcpy(scratch.data(), u.bytes.data(), u.bytes.size());
    best.copy = std::min(best.copy, seconds_since(t));

    // The update check of window and disk modes, chunk by chunk: the
    // bounds, then the distance (two passes over the chunk), and both in
    // one (checked_distance): the same distances.
    double two_checks = 0, one_check = 0;
    for (int fused = 0; fused < 2; ++fused) {
      t = clock_type::now();
      double distances = 0;
      for (const auto& u : updates)
        for (uint64_t seq = 0; seq < plan->chunk_count(); ++seq) {
          const auto& e = plan->extent(seq);
          auto x = u.bytes.bytes().subspan(e.model_offset, e.bytes);
          auto g = global.bytes.bytes();
          if (fused) {
            auto d = checked_distance(layout, *plan, seq, x, g, 1e30);
            distances += d ? *d : -1e300;
          } else if (check_finite(layout, *plan, seq, x, 1e30)) {
            distances += squared_distance(layout, *plan, seq, x, g);
          } else {
            distances -= 1e300;
          }
        }
      (fused ? best.checked : best.distance) =
          std::min(fused ? best.checked : best.distance, seconds_since(t));
      (fused ? one_check : two_checks) = distances;
    }
    same_check = same_check && one_check == two_checks && one_check > 0;
    sink += one_check;

    // Window and disk modes' fold (measuring, the values' bounds tested in
    // the same pass, as the server folds) and settling, position by
    // position, on this thread, then on all cores: the same distances and
    // model, and ram mode's (compared below).
    double window_distances = 0;
    for (unsigned threads : {1u, cores}) {
      auto acc = window_accumulator::make(layout, *plan, 1, clients);
      acc->set_threads(threads);
      auto* into = threads == 1 ? &next : &scratch;
      double fold = 0, finalize = 0, distances = 0;
      for (uint64_t seq = 0; seq < plan->chunk_count(); ++seq) {
        const auto& e = plan->extent(seq);
        t = clock_type::now();
        for (const auto& u : updates) {
          auto d = acc->fold_measured(
              seq, u.bytes.bytes().subspan(e.model_offset, e.bytes), 1.0, false,
              global.bytes.bytes(), 1e30);
          if (!d)
            return 1;
          distances += *d;
        }
        fold += seconds_since(t);
        t = clock_type::now();
        acc->finalize_next(global.bytes.bytes(), into->bytes(), nullptr);
        finalize += seconds_since(t);
      }
      if (threads == 1) {
        best.fold = std::min(best.fold, fold);
        best.finalize = std::min(best.finalize, finalize);
        window_distances = distances;
        continue;
      }
      best.fold_mt = std::min(best.fold_mt, fold);
      best.finalize_mt = std::min(best.finalize_mt, finalize);
      same_window = same_window && distances == window_distances &&
                    std::memcmp(next.data(), scratch.data(), next.size()) == 0;
    }

    // The read bandwidth: one pass summing every update's words.
    t = clock_type::now();
    for (const auto& u : updates) {
      uint64_t words = 0;
      const auto* p = reinterpret_cast<const uint64_t*>(u.bytes.data());
      for (size_t i = 0; i < u.bytes.size() / 8; ++i)
        words += p[i];
      sink += static_cast<double>(words & 1);
    }
    best.read = std::min(best.read, seconds_since(t));

    // A float32 sum in arrival order, chunk by chunk (the old ram mode).
    auto* sum = reinterpret_cast<float*>(scratch.data());
    t = clock_type::now();
    for (size_t c = 0; c < updates.size(); ++c) {
      const auto* x = reinterpret_cast<const float*>(updates[c].bytes.data());
      auto n = layout.total_bytes() / 4;
      if (c == 0)
        std::memcpy(sum, x, n * 4);
      else
        for (size_t i = 0; i < n; ++i)
          sum[i] += x[i];
    }
    best.float_fold = std::min(best.float_fold, seconds_since(t));

    // ram mode's exact sum: fold (measuring), then finalize; its memory
    // recycled from the round before, as the server does (the first
    // repeat's page faults are not the fold's).
    auto g = global.bytes.bytes();
    // Every update into every chunk, measured, the values' bounds tested
    // as the server tests them (in the fold's pass, or `apart`: in a pass
    // of their own before it, as until this build): seconds folding, and
    // the sum of the distances (-1 if a fold was refused).
    auto fold_all = [&](fedavg_accumulator& acc, bool apart) {
      double seconds = 0, distances = 0;
      for (uint64_t seq = 0; seq < plan->chunk_count(); ++seq) {
        const auto& e = plan->extent(seq);
        auto started = clock_type::now();
        for (const auto& u : updates) {
          auto x = u.bytes.bytes().subspan(e.model_offset, e.bytes);
          if (apart && !check_finite(layout, *plan, seq, x, 1e30))
            return std::pair{seconds, -1.0};
          auto d = apart ? acc.fold_measured(seq, x, 1.0, false, g)
                         : acc.fold_measured(seq, x, 1.0, false, g, 1e30);
          if (!d)
            return std::pair{seconds, -1.0};
          distances += *d;
        }
        seconds += seconds_since(started);
      }
      return std::pair{seconds, distances};
    };
    auto [ram_fold, fused_sink] = fold_all(*exact, false);
    auto [two_pass, two_sink] = fold_all(*exact_two, false);
    auto [check_apart, apart_sink] = fold_all(*exact_apart, true);
    exact_apart->discard();
    if (fused_sink < 0 || two_sink < 0 || apart_sink != fused_sink)
      return 1;
    sink += fused_sink;
    best.exact_fold = std::min(best.exact_fold, ram_fold);
    best.exact_two_pass = std::min(best.exact_two_pass, two_pass);
    best.exact_apart = std::min(best.exact_apart, check_apart);
    auto published_two = exact_two->finalize(g, nullptr);
    t = clock_type::now();
    auto published = exact->finalize(g, nullptr);
    best.exact_finalize = std::min(best.exact_finalize, seconds_since(t));
    if (!published)
      return 1;
    // Window mode's model and distances are ram mode's, bit for bit.
    same_ram = same_ram && window_distances == fused_sink &&
               std::memcmp(next.data(), published->data(), next.size()) == 0;
    auto [mt_fold, mt_sink] = fold_all(*exact_mt, false);
    best.exact_fold_mt = std::min(best.exact_fold_mt, mt_fold);
    same_bits = same_bits && mt_sink == fused_sink;
    t = clock_type::now();
    auto published_mt = exact_mt->finalize(g, nullptr);
    best.exact_finalize_mt = std::min(best.exact_finalize_mt, seconds_since(t));
    if (!published_mt)
      return 1;
    same_bits =
        same_bits && std::memcmp(published->data(), published_mt->data(),
                                 published->size()) == 0;
    if (!published_two)
      return 1;
    same_two_pass = same_two_pass && two_sink == fused_sink &&
                    std::memcmp(published->data(), published_two->data(),
                                published->size()) == 0;
    exact_two->recycle(std::move(*published_two));
    exact->recycle(std::move(*published));
    exact_mt->recycle(std::move(*published_mt));
  }
  std::printf("%llu MiB float32 model, %u updates; seconds per pass over "
              "the model, best of %llu (ratio to a memcpy of it)\n",
              static_cast<unsigned long long>(mib), clients,
              static_cast<unsigned long long>(repeat));
  auto copy = best.copy / clients;
  auto row = [copy](const char* what, double s) {
    std::printf("  %-38s %7.3f s  %6.2f x memcpy\n", what, s, s / copy);
  };
  row("memcpy", copy);
  std::printf("  %-38s %7.3f s  %6.2f x memcpy  (%s model and distances "
              "as ram mode's)\n",
              "window check + exact fold + distance", best.fold / clients,
              best.fold / clients / copy, same_ram ? "the same" : "OTHER");
  row("window finalize (once)", best.finalize);
  row("check + distance, two passes", best.distance / clients);
  std::printf("  %-38s %7.3f s  %6.2f x memcpy  (%s distances)\n",
              "  the same in one (checked_distance)", best.checked / clients,
              best.checked / clients / copy, same_check ? "the same" : "OTHER");
  std::printf("  %-38s %7.3f s  %6.2f x memcpy  (%u threads; %s distances "
              "and model as one thread's)\n",
              "  window fold on all cores", best.fold_mt / clients,
              best.fold_mt / clients / copy, cores,
              same_window ? "the same" : "OTHER");
  std::printf("  %-38s %7.3f s  %6.2f x memcpy  (%u threads)\n",
              "  window finalize on all cores", best.finalize_mt,
              best.finalize_mt / copy, cores);
  row("read an update (sum of its words)", best.read / clients);
  row("float32 fold in arrival order", best.float_fold / clients);
  row("ram check + exact fold + distance", best.exact_fold / clients);
  std::printf("  %-38s %7.3f s  %6.2f x memcpy  (%s bits and distances)\n",
              "  the same in two passes", best.exact_two_pass / clients,
              best.exact_two_pass / clients / copy,
              same_two_pass ? "the same" : "OTHER");
  row("  the check in a pass of its own", best.exact_apart / clients);
  std::printf("  %-38s %7.3f s  %6.2f x memcpy  (%u threads)\n",
              "  the same on all cores", best.exact_fold_mt / clients,
              best.exact_fold_mt / clients / copy, cores);
  row("ram exact finalize (once)", best.exact_finalize);
  std::printf("  %-38s %7.3f s  %6.2f x memcpy  (%u threads; %s bits "
              "and distances as one thread's, fold and finalize)\n",
              "ram exact finalize, all cores", best.exact_finalize_mt,
              best.exact_finalize_mt / copy, cores,
              same_bits ? "the same" : "OTHER");
  std::printf("  read bandwidth %.2f GB/s; ram exact fold + distance at %.2f "
              "GB/s of update (%.2f of the read bandwidth)\n",
              static_cast<double>(mib << 20) / (best.read / clients) / 1e9,
              static_cast<double>(mib << 20) / (best.exact_fold / clients) /
                  1e9,
              best.read / best.exact_fold);
  float first;
  std::memcpy(&first, next.data(), sizeof first);
  std::printf("  (distances %g, first mean %g)\n", sink, first);
  return same_window && same_ram && same_bits && same_two_pass && same_check
             ? 0
             : 1;
}
