#pragma once
// What the client actor's state holds, and the few helpers that only read
// or send it: its handle and connection, its options, the protocol objects
// that do the work (client_model, client_round, client_secagg_flow,
// client_reporter, reconnect_backoff, transfer_watchdog, client_departure)
// and its fetches made again (client_refetch). The state (actors/
// client.cpp) is made of it and routes the messages; other actors see
// actors/client.hpp only.
// Thread-safety: none; the client actor's.

#include <cstdint>
#include <memory>
#include <optional>

#include <caf/all.hpp>

#include "actors/client.hpp"
#include "actors/client_refetch.hpp"
#include "protocol/client_departure.hpp"
#include "protocol/client_model.hpp"
#include "protocol/client_reporter.hpp"
#include "protocol/client_round.hpp"
#include "protocol/client_secagg_flow.hpp"
#include "protocol/reconnect_backoff.hpp"
#include "protocol/transfer_watchdog.hpp"

namespace fedcaf {

struct client_core {
  /// A client of `server` (a connection, or the server in this process),
  /// with `factory` for its trainer, reporting into `report`.
  client_core(server_link server, client_options options,
              trainer_factory factory, run_report* report);
  client_core(const client_core&) = delete;

  /// The actor's clock: virtual time under CAF's test coordinator.
  caf::actor_clock::time_point now() const { return self_->clock().now(); }

  /// The round announced last (0: none yet).
  uint32_t round_number() const {
    return round_ ? round_->announced().round : 0;
  }

  /// Where and whether a window-mode relay's fetches made again may go:
  /// the round's model downloaded (a relay's stays in the downloading
  /// stage until its children's round ends), the client registered.
  client_refetch::now refetch_state() const;

  /// Sends evaluation `e` (of the model of round e.round). A refusal is
  /// logged: the figures are lost, the run goes on.
  void send_evaluation(const msg::evaluation& e);

  /// Logs a warning iff the server's answer `f` refused `what`.
  void log_refusal(const char* what, const frame& f) const;

  /// A transfer starts: the watchdog watches it, its timer ticks.
  void begin_transfer();
  /// The watchdog's next tick.
  void arm_timer();

  client_actor::pointer self_ = nullptr;
  server_link server_;
  client_options options_;
  trainer_factory factory_; ///< until the Welcome
  client_reporter report_;
  reconnect_backoff backoff_;
  std::unique_ptr<client_model> model_; ///< from the Welcome on
  client_secagg_flow secagg_;
  std::optional<client_round> round_; ///< the round announced last
  std::optional<frame> next_task_;    ///< arrived while uploading
  uint64_t generation_ = 0;
  bool reconnecting_ = false; ///< lost the server, registering again
  caf::actor_addr given_up_;  ///< the gateway of the connection lost last
  transfer_watchdog watchdog_;
  client_departure departure_; ///< how it ends: its goodbye, its line
  client_refetch refetch_;     ///< a window-mode relay's fetches made again
};

} // namespace fedcaf
