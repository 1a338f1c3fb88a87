#pragma once
// The server's SecAgg+ part: server_secagg_flow (protocol/) with what it
// needs of the actor: its phases' timers, the scheduler told whom the
// round goes on without, liars excluded and dropped, the run ended, and
// the response promises of the requests it holds until a phase ends. Each
// of the server's SecAgg+ handlers is one call here.
// Thread-safety: none; part of the server actor (actors/server_core.hpp).

#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <caf/all.hpp>

#include "actors/server_core.hpp"
#include "protocol/server_secagg_flow.hpp"

namespace fedcaf {

class server_secagg {
public:
  /// The run's SecAgg+ over `core`'s clients; `stop` ends the run with its
  /// reason (a round that cannot go on).
  server_secagg(server_core& core,
                std::function<void(const std::string&)> stop);

  /// Opens round `round` for `chosen`, those of them connected `reached`.
  void start(uint32_t round, const std::set<std::string>& chosen,
             const std::vector<std::string>& reached);
  /// Client `id`'s SecAgg+ frame `f`: answered now, or once its phase ends.
  caf::result<frame> receive(const std::string& id, const frame& f);
  /// The deadline of phase `phase` of `round`: ends it if it is still open.
  void expire(uint32_t round, uint32_t phase);
  /// The aggregator's request at finalize: the plan that unmasks the sum
  /// of `in_sum`'s updates, once the survivors revealed their shares.
  caf::result<secagg::unmask_plan>
  unmask(uint32_t round, const std::vector<std::string>& in_sum);
  /// Client `id` lost its connection: it leaves the phase.
  void lost(const std::string& id);
  /// The aggregator unmasked round `round`: in range, or not (the trace
  /// of an upload out of range; server_secagg_flow::unmasked).
  void unmasked(uint32_t round, bool in_range);
  /// Client `id`'s masked update was refused for its content (`why`).
  void poisoned(const std::string& id, const std::string& why);
  /// The clients excluded from this round, with why (for its report).
  const std::vector<std::pair<std::string, std::string>>& excluded() const {
    return flow_.excluded();
  }

private:
  /// What the flow needs done: timers, the scheduler told, the run ended.
  secagg_port port_of();
  /// Tells the live view the phase now.
  void note_phase();

  server_core& core_;
  std::function<void(const std::string&)> stop_;
  server_secagg_flow flow_;
};

} // namespace fedcaf
