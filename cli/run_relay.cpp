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
#include "crowd.hpp"
#include "fedcaf/config.hpp"
#include "fedcaf/log.hpp"
#include "fedcaf/memory_probe.hpp"
#include "local_clients.hpp"
#include "relay.hpp"
#include "run.hpp"
#include "run_outputs.hpp"
#include "server_wiring.hpp"
#include "side_command.hpp"

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

/// Whether a relay's children are a population (cli/crowd.hpp): all of
/// them simulated, and sampled.
bool children_drawn(const relay_files& files) {
  return files.simulated_clients == files.server.server.num_clients &&
         drawn_as_population(files.server);
}

/// `relay`: the children's side, spawned by the upstream client's first
/// round, and the upstream client, which runs until the parent's run ends.
class relay_command final : public side_command {
public:
  /// Its report, live view (--http) and --report-html show the children's
  /// rounds (the file's server half).
  relay_command(const options& opts, const relay_files& files)
      : side_command(opts, files.server, {"relay", 4, true, false}),
        files_(files),
        child_reports_(children_drawn(files) ? 0 : files.simulated_clients) {}

private:
  // load_config refused what cannot be planned first, naming the key.
  result<void> before_view() override {
    auto plan = plan_of(cfg_);
    if (!plan)
      return plan.err();
    plan_ = std::move(*plan);
    return {};
  }

  result<void> after_view() override {
    const auto& down = cfg_.server;
    if (down.round_deadline_s == 0 || down.registration_deadline_s == 0)
      log_line(log_level::warning, "relay",
               "no scheduler_kwargs.round_deadline_s or "
               "registration_deadline_s: a child that never registers or "
               "never offers holds the relay's round, and its parent's, open");
    auto door = front_door_of(down.comm);
    if (!door)
      return door.err();
    door_ = std::move(*door);
    sets_ = std::make_shared<lazy_data>(files_.client.data);
    return {};
  }

  std::optional<int> in_system(caf::actor_system& sys) override {
    run_remote_client(files_.client.client,
                      relay_trainers(
                          [this, &sys](relay_upstream up) {
                            return spawn_children_side(sys, std::move(up));
                          },
                          plan_.storage_dir),
                      upstream_);
    std::lock_guard<std::mutex> lock{spawning_};
    if (side_) { // the parent's run is over: so is the children's
      caf::anon_send(side_->server, stop_atom::value,
                     upstream_.failure.empty()
                         ? std::string{}
                         : "the relay's parent: " + upstream_.failure);
      await_end(sys, *side_, children_, &*gate_);
      if (drawn_)
        drawn_->await_all();
      side_->shut_down(sys);
    }
    side_.reset(); // no handle may outlive the actor system
    gate_.reset();
    children_.clear();
    return std::nullopt;
  }

  /// The children's side from the parent's first model `up`, listening,
  /// and the simulated children beside it. Runs on the upstream client's
  /// thread.
  result<relay_side> spawn_children_side(caf::actor_system& sys,
                                         relay_upstream up) {
    std::lock_guard<std::mutex> lock{spawning_};
    const auto& comm = cfg_.server.comm;
    auto layout = up.initial.layout;
    auto chunk = comm.chunk_bytes_for(layout.total_bytes());
    if (!chunk)
      return error{errc::bad_config, cfg_.source + ": " + chunk.err().message};
    // A window-mode relay keeps what it sent up of its sum in a spill file
    // (for a resend): up to the model, checked before the first round.
    if (plan_.relay_cache_chunks > 0)
      if (auto room = spill_room(layout.total_bytes(), "a window-mode relay");
          !room)
        return room.err();
    std::optional<summoning> hook;
    if (children_drawn(files_)) {
      drawn_ = std::make_unique<crowd>(
          sys, 0, files_.simulated_clients,
          [this](uint32_t i) {
            return std::pair{
                simulated_child(files_, i),
                local_trainer(sets_, files_.client.data, i, 1, stop_)};
          },
          files_.client.client.client_id + "-Client");
      hook = drawn_->hook();
    }
    auto s =
        spawn_side(sys, cfg_, nullptr, nullptr, &up, hook ? &*hook : nullptr);
    if (!s)
      return s.err();
    auto g = listen_for(sys, *s, door_, comm,
                        " for " + std::to_string(cfg_.server.num_clients) +
                            " clients" + (comm.use_ssl ? " (TLS)" : ""));
    if (!g)
      return g.err();
    side_ = *s;
    gate_ = *g;
    for (uint32_t i = 0; !drawn_ && i < files_.simulated_clients; ++i)
      children_.push_back(
          spawn_client(sys, s->server, simulated_child(files_, i),
                       local_trainer(sets_, files_.client.data, i, 1, stop_),
                       &child_reports_[i]));
    return relay_side{s->server, layout, &sys, *chunk,
                      plan_.relay_cache_chunks};
  }

  void after_system() override {
    if (!upstream_.failure.empty() && report_.failure.empty())
      report_.failure = "upstream: " + upstream_.failure;
  }

  const relay_files& files_;
  aggregation_plan plan_;
  front_door door_;
  std::shared_ptr<lazy_data> sets_;
  run_report upstream_;
  std::mutex spawning_; ///< the spawner runs on the upstream client's thread
  std::optional<server_side> side_;
  std::optional<listening> gate_;
  std::vector<run_report> child_reports_;
  std::vector<client_actor> children_; ///< simulated, in this process
  /// The simulated children as a population (children_drawn), else null.
  std::unique_ptr<crowd> drawn_;
};

} // namespace

int run_relay(const options& opts) {
  tune_malloc_for_streams();
  if (!opts.config_path)
    return failed("relay needs -c FILE (client_id, comm_configs for its "
                  "parent; server_configs for its children)");
  auto files = load_relay_file(*opts.config_path, opts.overrides);
  if (!files)
    return failed(to_string(files.err()));
  return relay_command{opts, *files}.run();
}

} // namespace fedcaf::cli
