// `fedcaf dp-profile -c CONFIG -o DIR`: DP-SGD's memory and time by mode and
// sequence length. Each (mode, length) runs in a child process of this
// binary (`--run MODE:LENGTH`), so one run's memory never counts in
// another's and a run that dies takes nothing else with it. Writes one JSON
// per run, summary.txt with overheads against mode none, and figures.

#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "dp_profile_config.hpp"
#include "fedcaf/dp_profile.hpp"
#include "fedcaf/memory_probe.hpp"
#include "process.hpp"
#include "run.hpp"

namespace fedcaf::cli {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::string run_name(const std::string& mode, uint32_t len) {
  return mode + "_seq" + std::to_string(len);
}

/// The settings a result was measured with (no paths, nothing secret).
json settings(const dp_profile_config& c) {
  return {{"model", "transformer sequence classifier, synthetic tokens"},
          {"vocab_size", c.vocab_size},
          {"d_model", c.d_model},
          {"num_heads", c.num_heads},
          {"num_layers", c.num_layers},
          {"d_ff", c.d_ff},
          {"num_labels", c.num_labels},
          {"learning_rate", c.learning_rate},
          {"sigma", c.noise_multiplier},
          {"max_grad_norm", c.max_grad_norm},
          {"warmup_iter", c.warmup_iter},
          {"num_iter", c.num_iter},
          {"repeats", c.repeats},
          {"num_threads", c.num_threads},
          {"seed", c.seed}};
}

/// The child's side: one measurement, written to DIR/<mode>_seq<T>_result.json.
int measure(const dp_profile_config& cfg, const std::string& spec,
            const std::string& out) {
  auto colon = spec.find(':');
  uint32_t len = 0;
  try {
    len = static_cast<uint32_t>(std::stoul(spec.substr(colon + 1)));
  } catch (const std::exception&) {
    colon = std::string::npos;
  }
  if (colon == std::string::npos || len == 0) {
    std::fprintf(stderr, "fedcaf: --run needs MODE:LENGTH, got '%s'\n",
                 spec.c_str());
    return 2;
  }
  auto mode = spec.substr(0, colon);
  auto r = profile_dp_step(cfg, mode, len);
  if (!r) {
    std::fprintf(stderr, "fedcaf: %s\n", to_string(r.err()).c_str());
    return 1;
  }
  auto peak_rss = static_cast<double>(sample_memory().peak_rss_bytes);
  json j = {{"mode", r->mode},
            {"seq_length", r->seq_length},
            {"batch_size", r->batch_size},
            {"peak_memory_mb", r->peak_memory_mb},
            {"peak_memory_gb", r->peak_memory_mb / 1024},
            {"peak_rss_mb", peak_rss / (1 << 20)},
            {"avg_time_ms", r->avg_time_ms},
            {"min_time_ms", r->min_time_ms},
            {"parameters", r->parameters},
            {"final_loss", r->final_loss},
            {"ok", true},
            {"config", settings(cfg)}};
  std::ofstream{out + "/" + run_name(mode, len) + "_result.json"} << j.dump(2)
                                                                  << '\n';
  std::printf("%s: peak %.1f MB, %.1f ms per iteration\n",
              run_name(mode, len).c_str(), r->peak_memory_mb, r->avg_time_ms);
  return 0;
}

/// The parent's side of one run: starts the child, waits at most timeout_s,
/// and returns its result (or a failed one saying why).
json run_child(const dp_profile_config& cfg, const options& opts,
               const std::string& mode, uint32_t len) {
  const auto& out = *opts.out_dir;
  auto name = run_name(mode, len);
  auto log = out + "/logs/" + name + ".log";
  auto result_path = out + "/" + name + "_result.json";
  fs::remove(result_path);
  std::vector<std::string> args{
      "fedcaf", "dp-profile", "-c",    *opts.config_path,
      "-o",     out,          "--run", mode + ":" + std::to_string(len)};
  for (const auto& item : opts.overrides) // the child reads what we read
    args.insert(args.end(), {"--set", item});
  auto pid = launch_self(args, log);
  auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds{cfg.timeout_s};
  int status = 0;
  bool timed_out = false;
  while (::waitpid(pid, &status, WNOHANG) != pid) {
    if (!timed_out && std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL); // the child this run started
      timed_out = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds{100});
  }
  auto j = read_json(result_path);
  if (j.is_object() && WIFEXITED(status) && WEXITSTATUS(status) == 0)
    return j;
  std::string why =
      timed_out ? "timed out after " + std::to_string(cfg.timeout_s) + " s"
      : WIFSIGNALED(status)
          ? "killed by signal " + std::to_string(WTERMSIG(status))
          : "exit status " + std::to_string(WEXITSTATUS(status));
  json failed = {{"mode", mode},
                 {"seq_length", len},
                 {"batch_size", cfg.batch_size},
                 {"ok", false},
                 {"failure", why + " (see logs/" + name + ".log)"},
                 {"config", settings(cfg)}};
  std::ofstream{result_path} << failed.dump(2) << '\n';
  return failed;
}

/// One result from the repeats of a (mode, length): the first, with the
/// median of the repeats' mean times; failed if any repeat failed.
json merge_repeats(const std::vector<json>& reps, const std::string& path) {
  std::vector<double> times;
  for (const auto& r : reps) {
    if (r["ok"] != true)
      return r;
    times.push_back(r["avg_time_ms"].get<double>());
  }
  auto merged = reps.front();
  auto sorted = times;
  std::sort(sorted.begin(), sorted.end());
  auto n = sorted.size();
  merged["avg_time_ms"] =
      n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
  merged["avg_time_ms_repeats"] = times;
  std::ofstream{path} << merged.dump(2) << '\n';
  return merged;
}

/// The summary table: each run, and each DP mode's overheads against mode
/// none at the same length.
std::string summary(const dp_profile_config& cfg, const json& runs) {
  std::ostringstream text;
  char line[256];
  text << "fedcaf dp-profile: transformer (vocab " << cfg.vocab_size
       << ", d_model " << cfg.d_model << ", " << cfg.num_layers
       << " layers, d_ff " << cfg.d_ff << "), batch " << cfg.batch_size
       << ", sigma " << cfg.noise_multiplier << ", C " << cfg.max_grad_norm
       << "\npeak memory: the most bytes LibTorch tensors held at once; time: "
          "mean of "
       << cfg.num_iter << " iterations after " << cfg.warmup_iter
       << " warm-up (median over " << cfg.repeats
       << " repeats, the modes taking turns)\n\n";
  std::snprintf(line, sizeof line, "%-11s %7s %12s %12s %13s %11s %11s\n",
                "mode", "seq_len", "peak_MiB", "avg_ms", "peak_RSS_MiB",
                "memory_x", "time_x");
  text << line;
  for (auto len : cfg.seq_lengths) {
    const json* base = nullptr;
    for (const auto& r : runs)
      if (r["mode"] == "none" && r["seq_length"] == len && r["ok"] == true)
        base = &r;
    for (const auto& r : runs) {
      if (r["seq_length"] != len)
        continue;
      auto mode = r["mode"].get<std::string>();
      if (r["ok"] != true) {
        std::snprintf(line, sizeof line, "%-11s %7u  failed: %s\n",
                      mode.c_str(), len,
                      r.value("failure", std::string{}).c_str());
        text << line;
        continue;
      }
      auto mem = r["peak_memory_mb"].get<double>();
      auto ms = r["avg_time_ms"].get<double>();
      std::string mx = "-", tx = "-";
      if (base) {
        mx = std::to_string(mem / (*base)["peak_memory_mb"].get<double>());
        tx = std::to_string(ms / (*base)["avg_time_ms"].get<double>());
        mx = mx.substr(0, mx.find('.') + 3) + "x";
        tx = tx.substr(0, tx.find('.') + 3) + "x";
      }
      std::snprintf(line, sizeof line,
                    "%-11s %7u %12.1f %12.1f %13.1f %11s %11s\n", mode.c_str(),
                    len, mem, ms, r.value("peak_rss_mb", 0.0), mx.c_str(),
                    tx.c_str());
      text << line;
    }
  }
  text << "\nmemory_x, time_x: against mode none at the same length.\n";
  return text.str();
}

} // namespace

int run_dp_profile(const options& opts) {
  if (auto rc = prepare_output(opts, "dp-profile", "CONFIG",
                               opts.out_dir.value_or("") + "/logs"))
    return rc;
  auto cfg = load_dp_profile_config(*opts.config_path, opts.overrides);
  if (!cfg) {
    std::fprintf(stderr, "fedcaf: %s\n", to_string(cfg.err()).c_str());
    return 1;
  }
  const auto& out = *opts.out_dir;
  if (opts.dp_run)
    return measure(*cfg, *opts.dp_run, out);
  json runs = json::array();
  bool all_ok = true;
  for (auto len : cfg->seq_lengths) {
    std::vector<std::vector<json>> reps(cfg->modes.size());
    for (uint32_t rep = 0; rep < cfg->repeats; ++rep)
      for (size_t m = 0; m < cfg->modes.size(); ++m) {
        std::printf("%s (%u/%u) ...\n", run_name(cfg->modes[m], len).c_str(),
                    rep + 1, cfg->repeats);
        std::fflush(stdout);
        reps[m].push_back(run_child(*cfg, opts, cfg->modes[m], len));
      }
    for (size_t m = 0; m < cfg->modes.size(); ++m) {
      runs.push_back(merge_repeats(
          reps[m], out + "/" + run_name(cfg->modes[m], len) + "_result.json"));
      all_ok = all_ok && runs.back()["ok"] == true;
    }
  }
  auto text = summary(*cfg, runs);
  std::ofstream{out + "/summary.txt"} << text;
  std::ofstream{out + "/summary.json"} << runs.dump(1) << '\n';
  std::printf("\n%s", text.c_str());
  draw_figures("plot_dp_profile.py", out);
  return all_ok ? 0 : 1;
}

} // namespace fedcaf::cli
