// fedcaf: the command line. Parses arguments (CLI11: one subcommand each
// with only its own options) and hands over to run.cpp.

#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <new>
#include <stdexcept>
#include <string>

#include <CLI/CLI.hpp>

#include "fedcaf/error.hpp"
#include "fedcaf/log.hpp"
#include "run.hpp"

namespace {

using fedcaf::cli::options;

constexpr const char* overview =
    "fedcaf " FEDCAF_VERSION ": federated learning that streams models in "
    "chunks, in bounded memory.\n"
    "usage: fedcaf <command> [options]   (fedcaf <command> --help: its "
    "options)";

/// Prints "fedcaf: <why>" and a pointer to the command's help; exit code 2.
int usage_error(const std::string& command, const std::string& why) {
  std::fprintf(stderr, "fedcaf: %s\n(see 'fedcaf %s--help')\n", why.c_str(),
               command.empty() ? "" : (command + " ").c_str());
  return 2;
}

/// Prints "fedcaf: out_of_memory: ..." for an allocation that failed in
/// `command` and returns the exit code. Allocates nothing.
int out_of_memory(const char* command, const char* what) {
  std::fprintf(stderr, "fedcaf: %s: running 'fedcaf %s' (%s)\n",
               fedcaf::to_string(fedcaf::errc::out_of_memory), command, what);
  return 1;
}

/// --set KEY.PATH=VALUE (repeatable); `example` shows one.
void add_set_option(CLI::App* c, options& o, const std::string& example) {
  c->add_option("--set", o.overrides,
                "override one config key: --set KEY.PATH=VALUE, e.g. --set " +
                    example + " (repeatable)")
      ->take_all()
      ->allow_extra_args(false);
}

/// The options every run command takes: a config, overrides, the report.
void add_run_options(CLI::App* c, options& o, bool config_required) {
  auto* config =
      c->add_option("-c,--config", o.config_path, "YAML config (APPFL layout)");
  if (config_required)
    config->description("YAML config (APPFL layout); required (the server: "
                        "or --resume DIR, whose checkpoint holds one)");
  add_set_option(c, o, "server_configs.num_global_epochs=2");
  c->add_flag("--strict", o.strict,
              "refuse APPFL keys fedcaf does not use (default: one warning "
              "lists them)");
  c->add_option("--log-level", o.log_level,
                "debug, info (default), warning, error or off: log lines "
                "below it are left out (warning and above also hide the "
                "progress line)")
      ->check(
          CLI::IsMember({"debug", "info", "warning", "warn", "error", "off"}));
  c->add_option("--log-file", o.log_file,
                "also append every log line (with its date) to FILE");
  c->add_option("--report", o.report_path,
                "write the run report as JSON (simulate and server: after "
                "every round too; refused before the run if it cannot be "
                "written)");
}

/// simulate and server: --resume DIR and --resume-force.
void add_resume_options(CLI::App* c, options& o) {
  c->add_option("--resume", o.resume,
                "go on from the newest complete checkpoint in DIR "
                "(server_configs.checkpoint.dir), as if the run had never "
                "stopped; refused where the config differs from the "
                "checkpoint's (naming the keys)");
  c->add_flag("--resume-force", o.resume_force,
              "with --resume: let the keys that may change differ "
              "(deadlines, timeouts, ports, checkpoint and output paths)");
}

void add_metrics_option(CLI::App* c, options& o) {
  c->add_option("--metrics", o.metrics_path,
                "one JSON line per round and per client event, as they "
                "happen");
  c->add_option("--http", o.http,
                "[HOST:]PORT: a live view of the run (/ a page, /metrics "
                "Prometheus text, /status JSON); HOST defaults to "
                "127.0.0.1");
  c->add_option("--report-html", o.report_html_path,
                "write the live view's page of the run as one static HTML "
                "file (after every round and at the end; refused before the "
                "run if it cannot be written)");
}

/// A number option kept as text: the command checks it and says why.
void add_number(CLI::App* c, options& o, std::map<std::string, std::string>& n,
                const std::string& name, const std::string& what) {
  (void)o;
  c->add_option("--" + name, n[name], what);
}

struct command_line {
  CLI::App app{overview, "fedcaf"};
  options opts;
  std::map<std::string, std::string> numbers;
  std::map<std::string, std::function<int(const options&)>> run;
};

/// Adds a command that runs a federated run: simulate, server, client.
CLI::App* add_run_command(command_line& cl, const char* name,
                          const char* description, int (*run)(const options&),
                          bool config_required, bool metrics) {
  auto* c = cl.app.add_subcommand(name, description);
  add_run_options(c, cl.opts, config_required);
  if (metrics) { // the server side's commands
    add_metrics_option(c, cl.opts);
    add_resume_options(c, cl.opts);
  }
  cl.run[name] = run;
  return c;
}

void add_commands(command_line& cl) {
  auto& app = cl.app;
  auto& o = cl.opts;
  app.set_version_flag("--version", "fedcaf " FEDCAF_VERSION);
  app.require_subcommand(1);
  add_run_command(cl, "simulate",
                  "server, scheduler, aggregator and every client in one "
                  "process (without -c: the embedded configs/simulate.yaml)",
                  fedcaf::cli::run_simulate, false, true);
  add_run_command(cl, "server",
                  "the server side as its own process, listening on "
                  "server_configs.comm_configs.grpc_configs.server_uri",
                  fedcaf::cli::run_server, true, true);
  add_run_command(cl, "client",
                  "one client as its own process, connecting to "
                  "comm_configs.grpc_configs.server_uri",
                  fedcaf::cli::run_client, true, false);
  auto* relay =
      add_run_command(cl, "relay",
                      "an aggregator between a parent (comm_configs) and its "
                      "own clients (server_configs): sums their updates and "
                      "sends the sum up (see docs/trees.md)",
                      fedcaf::cli::run_relay, true, false);
  add_metrics_option(relay, cl.opts); // its children's rounds
  auto* profile = app.add_subcommand(
      "profile", "run a matrix of server + client processes (model size x "
                 "clients x chunking x memory mode), sample their memory, "
                 "write JSON, CSV, a report and figures");
  profile->add_option("-c,--config", o.config_path, "the matrix file");
  profile->add_option("-o,--out", o.out_dir, "where results go");
  add_set_option(profile, o, "sizes_mib=[8]");
  cl.run["profile"] = fedcaf::cli::run_profile;
  auto* eps = app.add_subcommand(
      "dp-epsilon", "epsilon of DP-SGD (RDP accountant); last line "
                    "epsilon=...");
  for (auto name : {"noise-multiplier", "sample-rate", "steps", "delta"})
    add_number(eps, o, cl.numbers, name, "a number");
  cl.run["dp-epsilon"] = fedcaf::cli::run_dp_epsilon;
  auto* sigma = app.add_subcommand(
      "dp-sigma", "the noise multiplier for a target epsilon; last line "
                  "noise_multiplier=...");
  for (auto name : {"epsilon", "sample-rate", "steps", "delta"})
    add_number(sigma, o, cl.numbers, name, "a number");
  cl.run["dp-sigma"] = fedcaf::cli::run_dp_sigma;
  auto* dpp = app.add_subcommand(
      "dp-profile", "DP-SGD memory and time (modes x sequence lengths) on a "
                    "small transformer: JSON per run, summary.txt, figures");
  dpp->add_option("-c,--config", o.config_path, "the dp-profile file");
  dpp->add_option("-o,--out", o.out_dir, "where results go");
  add_set_option(dpp, o, "seq_lengths=[64]");
  dpp->add_option("--run", o.dp_run,
                  "MODE:LENGTH, one measurement (the child process's)");
  cl.run["dp-profile"] = fedcaf::cli::run_dp_profile;
  app.add_subcommand("config-reference",
                     "print the configuration reference as Markdown: every "
                     "key the config readers ask for, its type, default and "
                     "what it does (docs/configuration.md holds it)");
  cl.run["config-reference"] = fedcaf::cli::run_config_reference;
}

/// Returns the exit code of a parse error: its help or version on stdout
/// with 0, else a one-line error with 2.
int parse_failed(command_line& cl, const CLI::ParseError& e,
                 const std::string& command) {
  if (dynamic_cast<const CLI::CallForHelp*>(&e) ||
      dynamic_cast<const CLI::CallForAllHelp*>(&e) ||
      dynamic_cast<const CLI::CallForVersion*>(&e))
    return cl.app.exit(e);
  if (dynamic_cast<const CLI::ExtrasError*>(&e)) {
    // "The following arguments were not expected: x --metrics": name the
    // first option among them (or the first argument).
    std::string what = e.what();
    auto list = what.substr(what.find(": ") + 2);
    std::string first, option;
    for (size_t at = 0; at < list.size();) {
      auto end = std::min(list.find(' ', at), list.size());
      auto word = list.substr(at, end - at);
      if (first.empty())
        first = word;
      if (option.empty() && word.rfind('-', 0) == 0)
        option = word;
      at = end + 1;
    }
    return usage_error(command, "unknown option '" +
                                    (option.empty() ? first : option) + "'");
  }
  return usage_error(command, e.what());
}

int run(int argc, char** argv) {
  command_line cl;
  add_commands(cl);
  std::string command = argc >= 2 ? argv[1] : "";
  bool known = cl.run.count(command) > 0;
  if (argc >= 2 && !known && !command.empty() && command[0] != '-')
    return usage_error("", "unknown command '" + command + "'");
  if (argc < 2)
    return usage_error("", "missing command");
  try {
    cl.app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return parse_failed(cl, e, known ? command : "");
  }
  if (cl.opts.log_level)
    fedcaf::set_log_level(*fedcaf::parse_log_level(*cl.opts.log_level));
  if (cl.opts.log_file)
    if (auto ok = fedcaf::log_to_file(*cl.opts.log_file); !ok) {
      std::fprintf(stderr, "fedcaf: %s\n", fedcaf::to_string(ok.err()).c_str());
      return 1;
    }
  for (const auto& [name, value] : cl.numbers)
    if (!value.empty())
      cl.opts.numbers.emplace_back(name, value);
  return cl.run[command](cl.opts);
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
