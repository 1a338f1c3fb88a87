// `fedcaf relay -c relay.yaml`: the relay's children's side (a server, its
// simulated children beside it) spawned from its parent's first model, its
// upstream client, and the end of both when the parent's run ends.

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "actors/client.hpp"
#include "actors/gateway.hpp"
#include "actors/messages.hpp"
#include "actors/remote.hpp"
#include "actors/server_side.hpp"
#include "fedcaf/config.hpp"
#include "fedcaf/log.hpp"
#include "fedcaf/memory_probe.hpp"
#include "local_clients.hpp"
#include "relay.hpp"
#include "run.hpp"
#include "run_outputs.hpp"
#include "server_wiring.hpp"

namespace fedcaf::cli {

namespace {

/// A relay's simulated child `index` (server_configs.simulated_clients).
client_options simulated_child(const relay_files& files, uint32_t index) {
  const auto& down = files.server.server;
  client_options co;
  co.client_id =
      files.client.client.client_id + "-Client" + std::to_string(index + 1);
  co.idle_timeout = millis_of(down.comm.stream.idle_timeout_s);
  co.hold_model =
      down.clients_per_round == 0 || down.clients_per_round >= down.num_clients;
  return co;
}

} // namespace

int run_relay(const options& opts) {
  tune_malloc_for_streams();
  if (!opts.config_path)
    return failed("relay needs -c FILE (client_id, comm_configs for its "
                  "parent; server_configs for its children)");
  auto files = load_relay_file(*opts.config_path, opts.overrides);
  if (!files)
    return failed(to_string(files.err()));
  auto metrics = open_outputs(opts);
  if (!metrics)
    return failed(to_string(metrics.err()));
  const auto& down = files->server;
  // The live view (--http) and --report-html show the children's rounds.
  auto view = start_view(opts, down, "relay");
  if (!view)
    return failed(to_string(view.err()));
  const auto& comm = down.server.comm;
  if (down.server.round_deadline_s == 0 ||
      down.server.registration_deadline_s == 0)
    log_line(log_level::warning, "relay",
             "no scheduler_kwargs.round_deadline_s or "
             "registration_deadline_s: a child that never registers or never "
             "offers holds the relay's round, and its parent's, open");
  auto door = front_door_of(comm);
  if (!door)
    return failed(to_string(door.err()));
  const auto& at = door->first;
  const auto& tls = door->second;
  auto report = report_for(down, "relay");
  run_report upstream;
  std::optional<server_side> side;
  std::optional<listening> gate;
  auto sets = std::make_shared<lazy_data>(files->client.data);
  std::vector<run_report> child_reports(files->simulated_clients);
  std::vector<client_actor> children; // simulated, in this process
  {
    auto sc = make_system_config(4, true);
    caf::actor_system sys{sc};
    auto stop = std::make_shared<std::atomic<bool>>(false);
    std::mutex spawning; // the spawner runs on the upstream client's thread
    auto spawn = [&](relay_upstream up) -> result<relay_side> {
      std::lock_guard<std::mutex> lock{spawning};
      auto layout = up.initial.layout;
      auto chunk = comm.chunk_bytes_for(layout.total_bytes());
      if (!chunk)
        return error{errc::bad_config,
                     down.source + ": " + chunk.err().message};
      auto s = spawn_from_config(sys, down, nullptr, &report, true, opts,
                                 *metrics, view->status, nullptr, stop, &up);
      if (!s)
        return s.err();
      auto g = listen(sys, s->server, at, limits_of(comm), tls, s->refusals);
      if (!g) {
        s->shut_down(sys);
        caf::anon_send_exit(s->server, caf::exit_reason::user_shutdown);
        return g.err();
      }
      log_line("relay", "listening on " + at.host + ":" +
                            std::to_string(g->port) + " for " +
                            std::to_string(down.server.num_clients) +
                            " clients" + (comm.use_ssl ? " (TLS)" : ""));
      side = *s;
      gate = *g;
      for (uint32_t i = 0; i < files->simulated_clients; ++i)
        children.push_back(
            spawn_client(sys, s->server, simulated_child(*files, i),
                         local_trainer(sets, files->client.data, i, 1, stop),
                         &child_reports[i]));
      return relay_side{s->server, layout, &sys, *chunk,
                        down.server.memory_mode == memory_mode::window
                            ? comm.stream.window
                            : 0u};
    };
    run_remote_client(
        files->client.client,
        relay_trainers(spawn, down.server.memory_mode == memory_mode::disk
                                  ? down.server.storage_dir
                                  : std::string{}),
        upstream);
    std::lock_guard<std::mutex> lock{spawning};
    if (side) { // the parent's run is over: so is the children's
      caf::anon_send(side->server, stop_atom::value,
                     upstream.failure.empty()
                         ? std::string{}
                         : "the relay's parent: " + upstream.failure);
      await_all(sys, std::vector<server_actor>{side->server});
      await_all(sys, children);
      caf::anon_send_exit(gate->acceptor, caf::exit_reason::user_shutdown);
      side->shut_down(sys);
    }
    side.reset(); // no handle may outlive the actor system
    gate.reset();
    children.clear();
  }
  if (!upstream.failure.empty() && report.failure.empty())
    report.failure = "upstream: " + upstream.failure;
  return conclude(opts, report, down, *view);
}

} // namespace fedcaf::cli
