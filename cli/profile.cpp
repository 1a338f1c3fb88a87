// `fedcaf profile`: runs every combination of a matrix as real processes (a
// server and N clients of this same binary on 127.0.0.1), samples each
// process's RSS from /proc while it runs, and writes per-run JSON, a CSV
// summary, a text report and (with python3-matplotlib) figures.

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "fedcaf/memory_probe.hpp"
#include "fedcaf/stopwatch.hpp"
#include "process.hpp"
#include "profile_matrix.hpp"
#include "run.hpp"

namespace fedcaf::cli {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

/// One combination of the matrix.
struct run_case {
  uint64_t model_bytes;
  uint32_t clients;
  bool chunking;
  std::string memory_mode;

  std::string name() const {
    return std::to_string(model_bytes >> 20) + "MiB_" +
           std::to_string(clients) + "c_" + (chunking ? "chunked" : "whole") +
           "_" + memory_mode;
  }
};

/// A started process and its RSS timeline.
struct process {
  std::string role; ///< server | client_<k>
  pid_t pid = -1;
  int status = -1;
  json t = json::array(), rss = json::array(), anon = json::array(),
       file = json::array();
};

/// The config overrides of one case, for the server.
std::vector<std::string> server_args(const profile_matrix& m, const run_case& c,
                                     uint16_t port, const std::string& dir) {
  std::vector<std::string> a{"fedcaf", "server", "-c", m.base};
  auto set = [&](const std::string& kv) {
    a.push_back("--set");
    a.push_back(kv);
  };
  set("client_configs.model_configs.total_bytes=" +
      std::to_string(c.model_bytes));
  set("server_configs.num_clients=" + std::to_string(c.clients));
  set("server_configs.num_global_epochs=" + std::to_string(m.rounds));
  set("server_configs.memory_mode=" + c.memory_mode);
  set("server_configs.comm_configs.grpc_configs.server_uri=127.0.0.1:" +
      std::to_string(port));
  set(std::string{"server_configs.comm_configs.grpc_configs."
                  "use_model_chunking="} +
      (c.chunking ? "true" : "false"));
  if (!c.chunking)
    set("server_configs.comm_configs.grpc_configs.max_message_size=" +
        std::to_string(c.model_bytes + (1 << 20)));
  if (c.memory_mode == "disk")
    set("client_configs.train_configs.storage=disk");
  a.push_back("--report");
  a.push_back(dir + "/server.json");
  return a;
}

std::vector<std::string> client_args(const run_case& c, uint32_t k,
                                     uint16_t port, const std::string& dir) {
  auto yaml = dir + "/client_" + std::to_string(k) + ".yaml";
  std::ofstream{yaml} << "client_id: Client" << k << "\n"
                      << "data_configs:\n  dataset_kwargs:\n    num_clients: "
                      << c.clients << "\n    client_id: " << k - 1 << "\n"
                      << "comm_configs:\n  grpc_configs:\n    server_uri: "
                      << "127.0.0.1:" << port << "\n"
                      << "    max_message_size: " << c.model_bytes + (1 << 20)
                      << "\n";
  return {"fedcaf", "client",   "-c",
          yaml,     "--report", dir + "/client_" + std::to_string(k) + ".json"};
}

/// Runs one case to completion (or its timeout), sampling every process.
std::vector<process> run_one(const profile_matrix& m, const run_case& c,
                             const std::string& dir, double& started) {
  auto port = static_cast<uint16_t>(
      20000 +
      (::getpid() * 7 + c.clients * 131 + (c.model_bytes >> 20)) % 20000);
  std::vector<process> procs;
  started = unix_seconds();
  procs.push_back({"server", launch_self(server_args(m, c, port, dir),
                                         dir + "/server.log")});
  for (uint32_t k = 1; k <= c.clients; ++k)
    procs.push_back(
        {"client_" + std::to_string(k),
         launch_self(client_args(c, k, port, dir),
                     dir + "/client_" + std::to_string(k) + ".log")});
  auto deadline = steady_clock::now() + std::chrono::seconds{m.timeout_s};
  size_t running = procs.size();
  while (running > 0) {
    auto now = unix_seconds() - started;
    for (auto& p : procs) {
      if (p.status != -1)
        continue;
      auto m = sample_memory(p.pid);
      if (m && m->rss_bytes > 0) {
        p.t.push_back(now);
        p.rss.push_back(m->rss_bytes);
        p.anon.push_back(m->anon_bytes);
        p.file.push_back(m->file_bytes);
      }
      int st = 0;
      if (::waitpid(p.pid, &st, WNOHANG) == p.pid) {
        p.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
        --running;
      }
    }
    if (steady_clock::now() > deadline)
      for (auto& p : procs)
        if (p.status == -1)
          ::kill(p.pid, SIGKILL); // only processes this run started
    std::this_thread::sleep_for(std::chrono::milliseconds{m.sample_ms});
  }
  return procs;
}

/// Writes the run's JSON and returns its summary row.
json summarize(const run_case& c, const std::vector<process>& procs,
               const std::string& dir, double started) {
  json roles = json::array();
  uint64_t server_peak = 0, client_peak = 0;
  bool ok = true;
  json server_rounds = json::array();
  for (const auto& p : procs) {
    auto report = read_json(dir + "/" + p.role + ".json");
    uint64_t peak =
        report.is_object() ? report.value("peak_rss_bytes", uint64_t{0}) : 0;
    ok = ok && p.status == 0 && report.is_object() && report.value("ok", false);
    (p.role == "server" ? server_peak : client_peak) =
        std::max(p.role == "server" ? server_peak : client_peak, peak);
    json phases = json::array();
    if (report.is_object())
      for (const auto& r : report["rounds"])
        phases.push_back(r.value("ended_unix_s", 0.0) - started);
    if (p.role == "server" && report.is_object())
      server_rounds = report["rounds"];
    roles.push_back({{"role", p.role},
                     {"exit_status", p.status},
                     {"peak_rss_bytes", peak},
                     {"timeline",
                      {{"t_s", p.t},
                       {"rss_bytes", p.rss},
                       {"anon_bytes", p.anon},
                       {"file_bytes", p.file}}},
                     {"round_ends_s", phases}});
  }
  double secs = 0, moved = 0;
  for (const auto& r : server_rounds) {
    secs += r.value("wall_seconds", 0.0);
    moved += r.value("bytes_up", 0.0) + r.value("bytes_down", 0.0);
  }
  auto n = std::max<size_t>(1, server_rounds.size());
  auto s = static_cast<double>(c.model_bytes);
  json row = {{"name", c.name()},
              {"model_bytes", c.model_bytes},
              {"clients", c.clients},
              {"chunking", c.chunking},
              {"memory_mode", c.memory_mode},
              {"ok", ok},
              {"server_peak_ratio", static_cast<double>(server_peak) / s},
              {"client_peak_ratio", static_cast<double>(client_peak) / s},
              {"seconds_per_round", secs / static_cast<double>(n)},
              {"bytes_per_second", secs > 0 ? moved / secs : 0.0}};
  std::ofstream{dir + ".json"}
      << json{{"summary", row}, {"rounds", server_rounds}, {"roles", roles}}
             .dump(1)
      << '\n';
  return row;
}

void write_outputs(const std::string& out, const json& rows) {
  std::ofstream csv{out + "/summary.csv"};
  csv << "name,model_mib,clients,chunking,memory_mode,ok,server_peak_ratio,"
         "client_peak_ratio,seconds_per_round,gb_per_second\n";
  std::ostringstream text;
  text << "fedcaf profile: peak RSS (VmHWM) as a multiple of the model size "
          "S\n\n";
  char line[256];
  std::snprintf(line, sizeof line, "%-32s %4s %10s %10s %9s %7s\n", "run", "ok",
                "server/S", "client/S", "s/round", "GB/s");
  text << line;
  for (const auto& r : rows) {
    auto gbps = r["bytes_per_second"].get<double>() / 1e9;
    csv << r["name"].get<std::string>() << ','
        << (r["model_bytes"].get<uint64_t>() >> 20) << ',' << r["clients"]
        << ',' << r["chunking"] << ',' << r["memory_mode"].get<std::string>()
        << ',' << r["ok"] << ',' << r["server_peak_ratio"] << ','
        << r["client_peak_ratio"] << ',' << r["seconds_per_round"] << ','
        << gbps << '\n';
    std::snprintf(line, sizeof line, "%-32s %4s %10.3f %10.3f %9.2f %7.2f\n",
                  r["name"].get<std::string>().c_str(),
                  r["ok"].get<bool>() ? "yes" : "NO",
                  r["server_peak_ratio"].get<double>(),
                  r["client_peak_ratio"].get<double>(),
                  r["seconds_per_round"].get<double>(), gbps);
    text << line;
  }
  std::ofstream{out + "/report.txt"} << text.str();
  std::printf("%s", text.str().c_str());
}

} // namespace

int run_profile(const options& opts) {
  if (auto rc =
          prepare_output(opts, "profile", "MATRIX", opts.out_dir.value_or("")))
    return rc;
  auto m = load_profile_matrix(*opts.config_path, opts.overrides);
  if (!m) {
    std::fprintf(stderr, "fedcaf: %s\n", to_string(m.err()).c_str());
    return 1;
  }
  const auto& out = *opts.out_dir;
  json rows = json::array();
  for (auto mode : m->memory_modes)
    for (auto mib : m->sizes_mib)
      for (auto n : m->clients)
        for (auto chunking : m->chunking) {
          run_case c{mib << 20, n, chunking, mode};
          if (!chunking && c.model_bytes >= (512ull << 20)) {
            std::printf("%s: skipped (one message holds under 512 MiB)\n",
                        c.name().c_str());
            continue;
          }
          auto dir = out + "/" + c.name();
          fs::create_directories(dir);
          std::printf("%s ...\n", c.name().c_str());
          std::fflush(stdout);
          double started = 0;
          auto procs = run_one(*m, c, dir, started);
          rows.push_back(summarize(c, procs, dir, started));
        }
  write_outputs(out, rows);
  draw_figures("plot_profile.py", out);
  bool all_ok = true;
  for (const auto& r : rows)
    all_ok = all_ok && r["ok"].get<bool>();
  return all_ok ? 0 : 1;
}

} // namespace fedcaf::cli
