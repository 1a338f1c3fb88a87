// The subcommands that run: `simulate` (a server side and its clients in
// one process, or a tree of them), `server`, `client`. Each builds its
// actor system, spawns and wires the actors, waits, and tears down in
// reverse order. No globals.

#include "run.hpp"
#include "console_progress.hpp"
#include "crowd.hpp"
#include "interrupts.hpp"
#include "local_clients.hpp"
#include "run_outputs.hpp"
#include "server_wiring.hpp"
#include "side_command.hpp"
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
  if (opts.resume && role == config_role::server)
    return checkpoint_config(*opts.resume, opts.overrides);
  if (role != config_role::simulate)
    return error{errc::bad_config,
                 role == config_role::server
                     ? "this command needs -c CONFIG (or --resume DIR: the "
                       "config its checkpoint holds)"
                     : "this command needs -c CONFIG"};
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

/// `simulate`: a server side and its clients in this process, or a tree
/// of relays (server_configs.simulated_relays) with theirs.
class simulate_command final : public side_command {
public:
  simulate_command(const options& opts, const config& cfg)
      : side_command(opts, cfg, shape_of(cfg)),
        side_cfg_(cfg.server.simulated_relays > 0
                      ? simulated_tree::root_config(cfg)
                      : cfg),
        // A tree adds its clients' reports as it ends; a population
        // those of its clients that failed.
        client_reports_(cfg.server.simulated_relays > 0 ||
                                drawn_as_population(cfg)
                            ? 0
                            : cfg.server.num_clients) {}

private:
  static uint32_t per_round(const config& cfg) {
    auto n = cfg.server.num_clients;
    return cfg.server.clients_per_round
               ? std::min(n, cfg.server.clients_per_round)
               : n;
  }
  static side_shape shape_of(const config& cfg) {
    return {"simulate", per_round(cfg) + 3, false, true};
  }

  // The live view shows the side's config: a tree's root has R clients,
  // the relays.
  const config& view_config() const override { return side_cfg_; }

  result<void> after_view() override {
    warn_if_trimming_nothing(cfg_);
    warn_if_guessable_tokens(cfg_);
    auto test = test_set_for(cfg_);
    if (!test)
      return test.err();
    test_ = std::move(*test);
    sets_ = std::make_shared<lazy_data>(cfg_.data);
    // The clients train with LibTorch on the training split: read and
    // check it now, so that a bad file stops the command before the run
    // starts.
    if (cfg_.clients.train.trainer == trainer_kind::vanilla)
      if (auto train = sets_->train.get(); !train)
        return train.err();
    threads_per_client_ = std::max(1u, cores() / per_round(cfg_));
    if (cfg_.server.simulated_relays > 0)
      tree_.emplace(cfg_, opts_, sets_, stop_, threads_per_client_,
                    client_reports_);
    return {};
  }

  std::optional<int> in_system(caf::actor_system& sys) override {
    console_progress console;
    std::optional<summoning> drawn;
    if (!tree_ && drawn_as_population(cfg_)) {
      crowd_.emplace(sys, 0, cfg_.server.num_clients,
                     [this](uint32_t i) { return member(i); });
      drawn = crowd_->hook();
    }
    auto side = spawn_side(sys, side_cfg_, test_, console.meter(), nullptr,
                           drawn ? &*drawn : nullptr);
    if (!side)
      return failed(to_string(side.err()));
    std::vector<client_actor> clients;
    if (tree_)
      tree_->spawn(sys, side->server);
    else if (!crowd_)
      clients = spawn_clients(sys, side->server);
    auto n = cfg_.server.num_clients;
    if (tree_)
      std::printf("simulating %u clients under %u relays, %u rounds\n", n,
                  cfg_.server.simulated_relays, cfg_.server.num_global_epochs);
    else
      std::printf("simulating %u clients, %u rounds\n", n,
                  cfg_.server.num_global_epochs);
    await_end(sys, *side, clients, nullptr);
    if (crowd_)
      crowd_->await_all();
    if (tree_)
      if (auto why = tree_->finish(sys, report_.failure);
          !why.empty() && report_.failure.empty())
        report_.failure = why;
    side->shut_down(sys);
    return std::nullopt;
  }

  /// Client `i` of a flat run drawn as a population: past the first ten
  /// it logs at debug level.
  std::pair<client_options, trainer_factory> member(uint32_t i) {
    client_options co;
    co.idle_timeout = millis_of(cfg_.server.comm.stream.idle_timeout_s);
    co.quiet = i >= 10;
    return {std::move(co),
            local_trainer(sets_, cfg_.data, i, threads_per_client_, stop_)};
  }

  /// The clients of a flat run, registering with `server`.
  std::vector<client_actor> spawn_clients(caf::actor_system& sys,
                                          const server_actor& server) {
    std::vector<client_actor> clients;
    auto n = cfg_.server.num_clients;
    for (uint32_t i = 0; i < n; ++i) {
      client_options co;
      co.client_id = "Client" + std::to_string(i + 1);
      co.idle_timeout = millis_of(cfg_.server.comm.stream.idle_timeout_s);
      co.hold_model = per_round(cfg_) == n; // sampled: no model between rounds
      clients.push_back(spawn_client(
          sys, server, co,
          local_trainer(sets_, cfg_.data, i, threads_per_client_, stop_),
          &client_reports_[i]));
    }
    return clients;
  }

  void after_system() override {
    if (crowd_)
      crowd_->report_into(report_, client_reports_);
    if (tree_) {
      const auto& f = tree_->drawn_figures();
      report_.peak_in_flight =
          std::max(report_.peak_in_flight, f.peak_in_flight);
      report_.summoned_clients = f.summoned_clients;
      report_.peak_clients_alive = f.peak_clients_alive;
    }
    for (const auto& c : client_reports_) {
      report_.peak_in_flight =
          std::max(report_.peak_in_flight, c.peak_in_flight);
      if (report_.failure.empty() && !c.failure.empty())
        report_.failure = c.node + ": " + c.failure;
    }
    report_.clients = std::move(client_reports_);
  }

  /// The config the server side runs: the root's of a tree, else cfg_.
  const config side_cfg_;
  dataset_ptr test_;
  std::shared_ptr<lazy_data> sets_;
  uint32_t threads_per_client_ = 1;
  std::vector<run_report> client_reports_;
  std::optional<simulated_tree> tree_;
  /// A flat run's clients, as a population (drawn_as_population).
  std::optional<crowd> crowd_;
};

/// `server`: a server side whose clients come over the network.
class server_command final : public side_command {
public:
  server_command(const options& opts, const config& cfg)
      : side_command(opts, cfg, {"server", 4, true, true}) {}

private:
  result<void> before_view() override {
    warn_if_trimming_nothing(cfg_);
    warn_if_guessable_tokens(cfg_);
    if (cfg_.server.round_deadline_s == 0 &&
        cfg_.server.scheduler == scheduler_kind::sync)
      log_line("server", "note: no scheduler_kwargs.round_deadline_s: a "
                         "registered client that never offers holds each "
                         "round open until it is dropped");
    const auto& comm = cfg_.server.comm;
    if (!cfg_.server.relays.empty() && !comm.auth.enabled && !comm.use_ssl)
      log_line(log_level::warning, "server",
               "server_configs.relays without tokens or TLS: anyone who "
               "reaches the server can register as a relay's id (and weigh "
               "what it may); set use_authenticator or use_ssl");
    auto door = front_door_of(comm);
    if (!door)
      return door.err();
    door_ = std::move(*door);
    return {};
  }

  result<void> after_view() override {
    auto test = test_set_for(cfg_);
    if (!test)
      return test.err();
    test_ = std::move(*test);
    return {};
  }

  std::optional<int> in_system(caf::actor_system& sys) override {
    console_progress console;
    auto side = spawn_side(sys, cfg_, test_, console.meter());
    if (!side)
      return failed(to_string(side.err()));
    const auto& comm = cfg_.server.comm;
    auto gate = listen_for(
        sys, *side, door_, comm,
        (comm.use_ssl ? " (TLS, client certificates required)"
                      : " (plain TCP)") +
            std::string{comm.auth.enabled ? ", tokens required" : ""} +
            ", waiting for " + std::to_string(cfg_.server.num_clients) +
            " clients");
    if (!gate)
      return failed(to_string(gate.err()));
    await_end(sys, *side, {}, &*gate);
    side->shut_down(sys);
    return std::nullopt;
  }

  front_door door_;
  dataset_ptr test_;
};

} // namespace

int run_simulate(const options& opts) {
  auto cfg = load(opts, config_role::simulate);
  if (!cfg)
    return failed(to_string(cfg.err()));
  return simulate_command{opts, *cfg}.run();
}

int run_server(const options& opts) {
  tune_malloc_for_streams();
  auto cfg = load(opts, config_role::server);
  if (!cfg)
    return failed(to_string(cfg.err()));
  return server_command{opts, *cfg}.run();
}

int run_client(const options& opts) {
  // SIGINT or SIGTERM (Ctrl-C, a scheduler's cancel): the client says
  // goodbye, so the server drops it at once rather than after its grace.
  interrupt_watch watch;
  tune_malloc_for_streams();
  auto cfg = load(opts, config_role::client);
  if (!cfg)
    return failed(to_string(cfg.err()));
  if (auto ok = writable_report(opts); !ok)
    return failed(to_string(ok.err()));
  const auto& cc = cfg->client;
  auto sets = std::make_shared<lazy_data>(cc.data);
  run_report report;
  auto stop = std::make_shared<std::atomic<bool>>(false);
  auto leaving = std::make_shared<departure>();
  // Once the client runs (before that, a signal ends the process at once:
  // nobody to say goodbye to): the trainer stops at its next step, and the
  // client says goodbye, naming the signal.
  auto started = [&watch, stop, leaving](caf::actor_system&,
                                         const client_actor& client) {
    auto weak = caf::actor_cast<caf::weak_actor_ptr>(client);
    watch.on_interrupt([weak, stop, leaving](int sig) {
      msg::goodbye why{sig == SIGINT ? msg::goodbye_reason::interrupted
                                     : msg::goodbye_reason::terminated,
                       signal_name(sig)};
      leaving->note(why);
      stop->store(true);
      if (auto alive = caf::actor_cast<client_actor>(weak.lock()))
        caf::anon_send(alive, goodbye_atom::value, msg::encode(why));
    });
  };
  {
    console_progress console;
    run_remote_client(cc,
                      local_trainer(sets, cc.data, cc.data.client_index,
                                    cc.num_threads, stop, cc.shard),
                      report, started, stop.get(), console.meter(), leaving,
                      stop); // the server's end stops training too
  }
  watch.on_interrupt({});
  note_interrupt(watch, report);
  auto code = conclude(opts, report, *cfg, live_view{});
  return watch.signal() ? 128 + watch.signal() : code;
}

} // namespace fedcaf::cli
