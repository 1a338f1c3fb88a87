// fedcaf: the command line. Parses arguments and hands over to run.cpp.

#include <cstdio>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>

#include "fedcaf/error.hpp"
#include "run.hpp"

namespace {

constexpr const char* usage_text =
    "usage: fedcaf <command> [options]\n"
    "\n"
    "commands:\n"
    "  simulate   server, scheduler, aggregator and all clients in one "
    "process\n"
    "             (without -c: the embedded configs/simulate.yaml)\n"
    "  server     the server side as its own process, listening on\n"
    "             server_configs.comm_configs.grpc_configs.server_uri\n"
    "  client     one client as its own process, connecting to\n"
    "             comm_configs.grpc_configs.server_uri\n"
    "  profile    -c MATRIX -o DIR: run a matrix of server + client processes\n"
    "             (model size x clients x chunking x memory mode), sample\n"
    "             their memory, write JSON, CSV, a report and figures\n"
    "  dp-epsilon --noise-multiplier S --sample-rate Q --steps N --delta D\n"
    "             epsilon of DP-SGD (RDP accountant); last line epsilon=...\n"
    "  dp-sigma   --epsilon E --sample-rate Q --steps N --delta D\n"
    "             the noise multiplier for a target epsilon; last line\n"
    "             noise_multiplier=...\n"
    "  dp-profile -c CONFIG -o DIR: DP-SGD memory and time (modes none,\n"
    "             per_sample, ghost, fused x sequence lengths) on a small\n"
    "             transformer; JSON per run, summary.txt, figures\n"
    "\n"
    "options:\n"
    "  -c, --config FILE      YAML config (APPFL layout)\n"
    "  --set KEY.PATH=VALUE   override one config key, e.g.\n"
    "                         --set server_configs.num_global_epochs=2\n"
    "  --report FILE          write the run report as JSON (simulate and\n"
    "                         server: after every round too)\n"
    "  --metrics FILE         simulate, server: one JSON line per round and\n"
    "                         per client event, as they happen\n"
    "  --version              fedcaf's version\n"
    "  -o, --out DIR          profile, dp-profile: where results go\n"
    "  -h, --help             this text\n";

int usage_error(const std::string& why) {
  std::fprintf(stderr, "fedcaf: %s\n%s", why.c_str(), usage_text);
  return 2;
}

/// Prints "fedcaf: out_of_memory: ..." for an allocation that failed in
/// `command` and returns the exit code. Allocates nothing.
int out_of_memory(const char* command, const char* what) {
  std::fprintf(stderr, "fedcaf: %s: running 'fedcaf %s' (%s)\n",
               fedcaf::to_string(fedcaf::errc::out_of_memory), command, what);
  return 1;
}

int run(int argc, char** argv) {
  if (argc < 2)
    return usage_error("missing command");
  std::string command = argv[1];
  if (command == "--version" || command == "version") {
    std::printf("fedcaf %s\n", FEDCAF_VERSION);
    return 0;
  }
  if (command == "-h" || command == "--help" || command == "help") {
    std::printf("%s", usage_text);
    return 0;
  }
  fedcaf::cli::options opts;
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> const char* {
      return i + 1 < argc ? argv[++i] : nullptr;
    };
    if (arg == "-h" || arg == "--help") {
      std::printf("%s", usage_text);
      return 0;
    }
    const char* v = nullptr;
    if (arg == "-c" || arg == "--config") {
      if (!(v = value()))
        return usage_error(arg + " needs a file");
      opts.config_path = v;
    } else if (arg == "--set") {
      if (!(v = value()))
        return usage_error("--set needs key.path=value");
      opts.overrides.emplace_back(v);
    } else if (arg.rfind("--set=", 0) == 0) {
      opts.overrides.emplace_back(arg.substr(6));
    } else if (arg == "-o" || arg == "--out") {
      if (!(v = value()))
        return usage_error(arg + " needs a directory");
      opts.out_dir = v;
    } else if (arg == "--noise-multiplier" || arg == "--epsilon" ||
               arg == "--sample-rate" || arg == "--steps" || arg == "--delta") {
      if (!(v = value()))
        return usage_error(arg + " needs a number");
      opts.numbers.emplace_back(arg.substr(2), v);
    } else if (arg == "--run") {
      if (!(v = value()))
        return usage_error("--run needs MODE:LENGTH");
      opts.dp_run = v;
    } else if (arg == "--metrics") {
      if (!(v = value()))
        return usage_error("--metrics needs a file");
      opts.metrics_path = v;
    } else if (arg == "--version") {
      std::printf("fedcaf %s\n", FEDCAF_VERSION);
      return 0;
    } else if (arg == "--report") {
      if (!(v = value()))
        return usage_error("--report needs a file");
      opts.report_path = v;
    } else {
      return usage_error("unknown option '" + arg + "'");
    }
  }
  if (opts.dp_run && command != "dp-profile")
    return usage_error("--run applies to dp-profile only");
  if (opts.metrics_path && command != "simulate" && command != "server")
    return usage_error("--metrics applies to simulate and server only");
  if (command == "simulate")
    return fedcaf::cli::run_simulate(opts);
  if (command == "server")
    return fedcaf::cli::run_server(opts);
  if (command == "client")
    return fedcaf::cli::run_client(opts);
  if (command == "profile")
    return fedcaf::cli::run_profile(opts);
  if (command == "dp-epsilon")
    return fedcaf::cli::run_dp_epsilon(opts);
  if (command == "dp-sigma")
    return fedcaf::cli::run_dp_sigma(opts);
  if (command == "dp-profile")
    return fedcaf::cli::run_dp_profile(opts);
  return usage_error("unknown command '" + command + "'");
}

} // namespace

/// Runs the command. An allocation that fails in it (std::bad_alloc, or
/// std::length_error from a container asked to grow past its limit) ends it
/// with "fedcaf: out_of_memory: ..." and exit code 1, not an abort.
int main(int argc, char** argv) {
  const char* command = argc >= 2 ? argv[1] : "";
  try {
    return run(argc, argv);
  } catch (const std::bad_alloc& e) {
    return out_of_memory(command, e.what());
  } catch (const std::length_error& e) {
    return out_of_memory(command, e.what());
  }
}
