#pragma once
// The server's part that registers clients: a Hello decided by the registry
// (and, a sharded client's rank, fitted to its client by server_shards),
// the client joined to the scheduler (a sharded one once all its ranks are
// in), a resumed session announced again, a lost one dropped when its grace
// ends. Each of the server's registration handlers is one call here.
// Thread-safety: none; part of the server actor (actors/server_core.hpp).

#include <functional>
#include <set>
#include <string>

#include <caf/all.hpp>

#include "actors/server_core.hpp"
#include "actors/server_shards.hpp"

namespace fedcaf {

class server_registration {
public:
  /// Registers `core`'s clients, a sharded one's ranks through `shards`;
  /// `dropped` hears each connection dropped (a relay's pacing).
  server_registration(server_core& core, server_shards& shards,
                      std::function<void(const std::string&)> dropped);

  /// A Hello from a client in this process (`address` empty) or from a
  /// gateway, with the peer's address and the name in its verified client
  /// certificate. Returns the Welcome or the refusal.
  frame hello(const frame& f, const std::string& address,
              const std::string& certificate_name);

  /// The grace period of the connection registered as `key` (a client's
  /// id, or a rank's key) is over since `epoch`: it is dropped, and its
  /// client leaves the rounds (a sharded one: with its first rank).
  void drop(const std::string& key, uint64_t epoch);

  /// The connection `sender` says goodbye (`f`): it is dropped now,
  /// without the grace period, the reason logged, and its client leaves
  /// the rounds. Returns its key, or nullopt iff it is not registered.
  std::optional<std::string> goodbye(const caf::strong_actor_ptr& sender,
                                     const frame& f);

  /// The connection that `m` says ended was lost: `first(key)` hears it
  /// at once; then, unless the run ends, its client waits for it to
  /// resume, reported (with the error its gateway quit with, if any; not
  /// one dropped from the run already) and dropped when its grace ends.
  /// Returns its key, or nullopt iff it is not registered.
  std::optional<std::string>
  lost(const caf::down_msg& m,
       const std::function<void(const std::string&)>& first);

  /// A simulation's round `round` opens for `chosen`
  /// (server_options::drawn): its members registered and not chosen are
  /// sent away (Done) and forgotten; those chosen and neither registered
  /// nor summoned for the last round and on their way are summoned.
  void call_up(uint32_t round, const std::set<std::string>& chosen);

private:
  /// Reports client `id`'s connection lost, ended by `reason` (none: the
  /// peer closed it).
  void report_lost(const std::string& id, const caf::error& reason);
  /// Drops `key` (gone since `epoch`); `report` says so, with the client's
  /// id. False iff it came back since, or the run is ending.
  bool drop_now(const std::string& key, uint64_t epoch,
                const std::function<void(const std::string&)>& report);
  void resumed(const std::string& key, const client_inbox& sender,
               const admission<client_inbox>& a);

  server_core& core_;
  server_shards& shards_;
  std::function<void(const std::string&)> dropped_;
  /// A simulation's members summoned and not registered yet.
  std::set<std::string> summoned_;
  /// A population's server refused a Hello over the network (logged once).
  bool remote_refused_ = false;
};

} // namespace fedcaf
