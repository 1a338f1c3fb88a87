// The subcommands that run: `simulate` (a server side and its clients in
// one process, or a tree of them), `server`, `client`. Each builds its
// actor system, spawns and wires the actors, waits, and tears down in
// reverse order. No globals.

#include "run.hpp"
#include "console_progress.hpp"
#include "interrupts.hpp"
#include "local_clients.hpp"
#include "run_outputs.hpp"
#include "server_wiring.hpp"
#include "simulated_tree.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <memory>
#include <optional>

#include <caf/all.hpp>

#include "actors/client.hpp"
#include "actors/gateway.hpp"
#include "actors/messages.hpp"
#include "actors/remote.hpp"
#include "actors/server_side.hpp"
#include "fedcaf/config.hpp"
#include "fedcaf/log.hpp"
#include "fedcaf/memory_probe.hpp"

namespace fedcaf::cli {

namespace {

result<config> load_any(const options& opts, config_role role) {
  if (opts.config_path)
    return load_config_file(*opts.config_path, role, opts.overrides);
  if (role != config_role::simulate)
    return error{errc::bad_config, "this command needs -c CONFIG"};
  return load_config(embedded_simulate_yaml(),
                     "<embedded configs/simulate.yaml>", role, opts.overrides);
}

/// Loads the config; APPFL keys fedcaf does not use get one warning that
/// lists them all, or (--strict) refuse it.
result<config> load(const options& opts, config_role role) {
  auto cfg = load_any(opts, role);
  if (!cfg || cfg->ignored_keys.empty())
    return cfg;
  if (opts.strict)
    return error{errc::bad_config,
                 cfg->source + ": keys fedcaf does not use (--strict): " +
                     ignored_keys_text(*cfg)};
  std::fprintf(stderr, "fedcaf: %s\n", ignored_keys_warning(*cfg).c_str());
  return cfg;
}

} // namespace

int run_simulate(const options& opts) {
  auto cfg = load(opts, config_role::simulate);
  if (!cfg)
    return failed(to_string(cfg.err()));
  auto metrics = open_outputs(opts);
  if (!metrics)
    return failed(to_string(metrics.err()));
  interrupt_watch watch;
  // Before the data is read: a --http address that cannot be bound stops
  // the command at once.
  auto view = start_view(opts,
                         cfg->server.simulated_relays > 0
                             ? simulated_tree::root_config(*cfg)
                             : *cfg,
                         "simulate");
  if (!view)
    return failed(to_string(view.err()));
  auto stop = std::make_shared<std::atomic<bool>>(false);
  warn_if_trimming_nothing(*cfg);
  auto test = test_set_for(*cfg);
  if (!test)
    return failed(to_string(test.err()));
  auto sets = std::make_shared<lazy_data>(cfg->data);
  // The clients train with LibTorch on the training split: read and check
  // it now, so that a bad file stops the command before the run starts.
  if (cfg->clients.train.trainer == trainer_kind::vanilla)
    if (auto train = sets->train.get(); !train)
      return failed(to_string(train.err()));
  auto n = cfg->server.num_clients;
  auto per_round = cfg->server.clients_per_round
                       ? std::min(n, cfg->server.clients_per_round)
                       : n;
  auto threads_per_client = std::max(1u, cores() / per_round);
  auto report = report_for(*cfg, "simulate");
  std::vector<run_report> client_reports(n);
  auto relays = cfg->server.simulated_relays;
  std::optional<simulated_tree> tree;
  if (relays > 0)
    tree.emplace(*cfg, opts, sets, stop, threads_per_client, client_reports);
  {
    auto sc = make_system_config(per_round + 3, false);
    caf::actor_system sys{sc};
    console_progress console;
    auto side = spawn_from_config(
        sys, tree ? simulated_tree::root_config(*cfg) : *cfg, *test, &report,
        false, opts, *metrics, view->status, console.meter(), stop);
    if (!side)
      return failed(to_string(side.err()));
    stop_on_interrupt(watch, side->server, stop);
    std::vector<client_actor> clients;
    if (tree)
      tree->spawn(sys, side->server);
    for (uint32_t i = 0; i < n && !tree; ++i) {
      client_options co;
      co.client_id = "Client" + std::to_string(i + 1);
      co.idle_timeout = millis_of(cfg->server.comm.stream.idle_timeout_s);
      co.hold_model = per_round == n; // sampled: no model between rounds
      clients.push_back(spawn_client(
          sys, side->server, co,
          local_trainer(sets, cfg->data, i, threads_per_client, stop),
          &client_reports[i]));
    }
    if (tree)
      std::printf("simulating %u clients under %u relays, %u rounds\n", n,
                  relays, cfg->server.num_global_epochs);
    else
      std::printf("simulating %u clients, %u rounds\n", n,
                  cfg->server.num_global_epochs);
    await_all(sys, std::vector<server_actor>{side->server});
    await_all(sys, clients);
    watch.on_interrupt({});
    if (tree)
      if (auto why = tree->finish(sys, report.failure);
          !why.empty() && report.failure.empty())
        report.failure = why;
    side->shut_down(sys);
  }
  note_interrupt(watch, report);
  for (const auto& c : client_reports) {
    report.peak_in_flight = std::max(report.peak_in_flight, c.peak_in_flight);
    if (report.failure.empty() && !c.failure.empty())
      report.failure = c.node + ": " + c.failure;
  }
  report.clients = std::move(client_reports);
  return conclude(opts, report, *cfg, *view);
}

int run_server(const options& opts) {
  tune_malloc_for_streams();
  auto cfg = load(opts, config_role::server);
  if (!cfg)
    return failed(to_string(cfg.err()));
  auto metrics = open_outputs(opts);
  if (!metrics)
    return failed(to_string(metrics.err()));
  interrupt_watch watch;
  warn_if_trimming_nothing(*cfg);
  if (cfg->server.round_deadline_s == 0 &&
      cfg->server.scheduler == scheduler_kind::sync)
    log_line("server", "note: no scheduler_kwargs.round_deadline_s: a "
                       "registered client that never offers holds each round "
                       "open until it is dropped");
  const auto& comm = cfg->server.comm;
  if (!cfg->server.relays.empty() && !comm.auth.enabled && !comm.use_ssl)
    log_line(log_level::warning, "server",
             "server_configs.relays without tokens or TLS: anyone who "
             "reaches the server can register as a relay's id (and weigh "
             "what it may); set use_authenticator or use_ssl");
  auto door = front_door_of(comm);
  if (!door)
    return failed(to_string(door.err()));
  const auto& at = door->first;
  const auto& tls = door->second;
  // Before the test set is read: a --http address that cannot be bound
  // stops the command at once.
  auto view = start_view(opts, *cfg, "server");
  if (!view)
    return failed(to_string(view.err()));
  auto test = test_set_for(*cfg);
  if (!test)
    return failed(to_string(test.err()));
  auto stop = std::make_shared<std::atomic<bool>>(false);
  auto report = report_for(*cfg, "server");
  {
    auto sc = make_system_config(4, true);
    caf::actor_system sys{sc};
    console_progress console;
    auto side =
        spawn_from_config(sys, *cfg, *test, &report, true, opts, *metrics,
                          view->status, console.meter(), stop);
    if (!side)
      return failed(to_string(side.err()));
    stop_on_interrupt(watch, side->server, stop);
    auto gate =
        listen(sys, side->server, at, limits_of(comm), tls, side->refusals);
    if (!gate) {
      side->shut_down(sys);
      caf::anon_send_exit(side->server, caf::exit_reason::user_shutdown);
      return failed(to_string(gate.err()));
    }
    log_line("server",
             "listening on " + at.host + ":" + std::to_string(gate->port) +
                 (comm.use_ssl ? " (TLS, client certificates required)"
                               : " (plain TCP)") +
                 (comm.auth.enabled ? ", tokens required" : "") +
                 ", waiting for " + std::to_string(cfg->server.num_clients) +
                 " clients");
    await_all(sys, std::vector<server_actor>{side->server});
    watch.on_interrupt({});
    caf::anon_send_exit(gate->acceptor, caf::exit_reason::user_shutdown);
    side->shut_down(sys);
  }
  note_interrupt(watch, report);
  return conclude(opts, report, *cfg, *view);
}

int run_client(const options& opts) {
  tune_malloc_for_streams();
  auto cfg = load(opts, config_role::client);
  if (!cfg)
    return failed(to_string(cfg.err()));
  if (auto ok = writable_report(opts); !ok)
    return failed(to_string(ok.err()));
  const auto& cc = cfg->client;
  auto sets = std::make_shared<lazy_data>(cc.data);
  run_report report;
  {
    console_progress console;
    run_remote_client(cc,
                      local_trainer(sets, cc.data, cc.data.client_index,
                                    cc.num_threads, nullptr),
                      report, {}, nullptr, console.meter());
  }
  return conclude(opts, report, *cfg, live_view{});
}

} // namespace fedcaf::cli
