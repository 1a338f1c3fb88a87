#pragma once
// The one skeleton of the commands that run a server side (`simulate`,
// `server`, `relay`), their config loaded: open the outputs, watch for
// SIGINT and SIGTERM, start the live view, make the report, build the actor
// system, run the command's own part in it, note an interrupt, conclude.
// Each command derives and overrides its own steps; the steps of a side's
// life that two of them share (spawning it, listening at its front door,
// waiting for its end) are here too.
// Thread-safety: a command runs on the thread that calls run(); a step
// that hands work to other threads (a relay's spawner) guards it itself.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "actors/client.hpp"
#include "actors/gateway.hpp"
#include "actors/server_side.hpp"
#include "fedcaf/config.hpp"
#include "fedcaf/report.hpp"
#include "interrupts.hpp"
#include "options.hpp"
#include "run_outputs.hpp"
#include "server_wiring.hpp"

namespace fedcaf::cli {

/// What a command's run is: its role, its actor system, its signals.
struct side_shape {
  /// "simulate", "server" or "relay": the live view's and the report's
  /// role, and the log lines' tag.
  const char* role = "";
  uint32_t threads = 4; ///< the actor system's scheduler threads
  /// Clients come over the network: the actor system's middleman runs, and
  /// tokens and certificate names apply.
  bool remote = true;
  /// SIGINT and SIGTERM end the run and keep its report; false: they end
  /// the process at once.
  bool interruptible = true;
};

class side_command {
public:
  /// A run of `cfg`, the config its report states and concludes with (both
  /// must outlive the command).
  side_command(const options& opts, const config& cfg, side_shape shape);
  virtual ~side_command() = default;
  side_command(const side_command&) = delete;
  side_command& operator=(const side_command&) = delete;

  /// Runs the command's steps in the skeleton's order; returns its exit
  /// code (1 with "fedcaf: <why>" iff a step fails).
  int run();

protected:
  /// Before the live view: warnings, and what must stop the command before
  /// an --http address is bound. An error ends the command.
  virtual result<void> before_view() { return {}; }
  /// The config the live view shows: cfg_ unless the command's side runs
  /// another.
  virtual const config& view_config() const { return cfg_; }
  /// After the live view, before the actor system: the data. An error ends
  /// the command.
  virtual result<void> after_view() { return {}; }
  /// The command's part in the actor system: spawn, wait for the run's
  /// end, shut down; no handle may outlive `sys`. Returns an exit code iff
  /// the command ends there, without a report.
  virtual std::optional<int> in_system(caf::actor_system& sys) = 0;
  /// After the actor system, before the report is concluded: what the
  /// command kept goes into report_.
  virtual void after_system() {}

  /// Spawns the server side of `cfg` (see spawn_from_config), its rounds
  /// in report_; SIGINT and SIGTERM then stop it, if the run watches them.
  result<server_side> spawn_side(caf::actor_system& sys, const config& cfg,
                                 dataset_ptr test,
                                 std::shared_ptr<transfer_progress> progress,
                                 relay_upstream* relay = nullptr,
                                 const summoning* drawn = nullptr);

  /// Listens for `side`'s clients at `door` (with `comm`'s limits) and
  /// logs "listening on HOST:PORT<what>"; if it cannot, ends the side and
  /// returns why.
  result<listening> listen_for(caf::actor_system& sys, const server_side& side,
                               const front_door& door, const comm_config& comm,
                               const std::string& what);

  /// Waits for `side`'s server to end, then for `clients`; stops watching
  /// for signals and closes `gate` (null: none). The caller shuts the side
  /// down.
  void await_end(caf::actor_system& sys, const server_side& side,
                 const std::vector<client_actor>& clients,
                 const listening* gate);

  const options& opts_;
  const config& cfg_;
  const side_shape shape_;
  std::shared_ptr<metrics_log> metrics_; ///< null without --metrics
  std::optional<interrupt_watch> watch_; ///< iff shape_.interruptible
  live_view view_;
  run_report report_;
  /// Set once the run is interrupted: training and evaluation in this
  /// process stop at their next step.
  std::shared_ptr<std::atomic<bool>> stop_;

private:
  /// Builds the actor system and runs in_system in it.
  std::optional<int> run_system();
};

} // namespace fedcaf::cli
