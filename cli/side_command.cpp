// The skeleton of `simulate`, `server` and `relay`, and the steps of a
// server side's life they share.

#include "side_command.hpp"

#include "actors/messages.hpp"
#include "actors/remote.hpp"
#include "fedcaf/log.hpp"

namespace fedcaf::cli {

side_command::side_command(const options& opts, const config& cfg,
                           side_shape shape)
    : opts_(opts), cfg_(cfg), shape_(shape),
      stop_(std::make_shared<std::atomic<bool>>(false)) {}

int side_command::run() {
  auto metrics = open_outputs(opts_);
  if (!metrics)
    return failed(to_string(metrics.err()));
  metrics_ = std::move(*metrics);
  if (shape_.interruptible)
    watch_.emplace();
  if (auto ok = before_view(); !ok)
    return failed(to_string(ok.err()));
  // Before the data is read: a --http address that cannot be bound stops
  // the command at once.
  auto view = start_view(opts_, view_config(), shape_.role);
  if (!view)
    return failed(to_string(view.err()));
  view_ = std::move(*view);
  if (auto ok = after_view(); !ok)
    return failed(to_string(ok.err()));
  report_ = report_for(cfg_, shape_.role);
  if (auto code = run_system())
    return *code;
  if (watch_)
    note_interrupt(*watch_, report_);
  after_system();
  return conclude(opts_, report_, cfg_, view_);
}

std::optional<int> side_command::run_system() {
  auto sc = make_system_config(shape_.threads, shape_.remote);
  caf::actor_system sys{sc};
  return in_system(sys);
}

result<server_side>
side_command::spawn_side(caf::actor_system& sys, const config& cfg,
                         dataset_ptr test,
                         std::shared_ptr<transfer_progress> progress,
                         relay_upstream* relay, const summoning* drawn) {
  auto side = spawn_from_config(sys, cfg, std::move(test), &report_,
                                shape_.remote, opts_, metrics_, view_.status,
                                std::move(progress), stop_, relay, drawn);
  if (side && watch_)
    stop_on_interrupt(*watch_, side->server, stop_);
  return side;
}

result<listening> side_command::listen_for(caf::actor_system& sys,
                                           const server_side& side,
                                           const front_door& door,
                                           const comm_config& comm,
                                           const std::string& what) {
  const auto& [at, tls] = door;
  auto gate = listen(sys, side.server, at, limits_of(comm), tls, side.refusals);
  if (!gate) {
    side.shut_down(sys);
    caf::anon_send_exit(side.server, caf::exit_reason::user_shutdown);
    return gate.err();
  }
  log_line(shape_.role,
           "listening on " + at.host + ":" + std::to_string(gate->port) + what);
  return gate;
}

void side_command::await_end(caf::actor_system& sys, const server_side& side,
                             const std::vector<client_actor>& clients,
                             const listening* gate) {
  await_all(sys, std::vector<server_actor>{side.server});
  await_all(sys, clients);
  if (watch_)
    watch_->on_interrupt({});
  if (gate)
    caf::anon_send_exit(gate->acceptor, caf::exit_reason::user_shutdown);
}

} // namespace fedcaf::cli
