#pragma once
// The server's roll of clients, without CAF: who registered, over which
// connection (a handle of the caller's choosing), where each stands, and
// the rules a Hello must pass. The server actor feeds it Hellos and lost
// connections and carries out what it returns (monitors, sends, timers).
//
// Per client: connected -(connection lost)-> lost -(hello again within the
// grace period)-> connected (it resumes) | -(grace over)-> dropped (a later
// hello joins it again as new, at its old index).
// Thread-safety: none; owned by the server actor.

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "fedcaf/error.hpp"
#include "fedcaf/model_snapshot.hpp"
#include "fedcaf/shard.hpp"
#include "messages/codec.hpp"
#include "protocol/hello_throttle.hpp"
#include "protocol/reconnect_backoff.hpp"
#include "protocol/refusal_log.hpp"

namespace fedcaf {

enum class presence { connected, lost, dropped };

/// client_entry::address of a client in the server's own process.
inline constexpr const char* in_process = "this process";

/// What a Hello must show, and how many clients the run takes.
/// A SHA-256 digest.
using token_digest = std::array<unsigned char, 32>;

struct admission_rules {
  /// Client id -> token; empty: no token is asked for.
  std::vector<std::pair<std::string, std::string>> tokens;
  /// A remote client's verified certificate must name its client id.
  bool require_certificate_name = false;
  uint32_t places = 0; ///< clients the run takes at once (num_clients)
};

/// The SHA-256 of each token pair's id and token, in the rules' order.
using token_digests = std::vector<std::pair<token_digest, token_digest>>;

/// Returns the digests of rules.tokens (hashed once: a Hello then costs
/// two digests, whatever the tokens' count).
token_digests hash_tokens(const admission_rules& rules);

/// Checks hello `h` from a peer (remote iff `remote`, with a verified
/// certificate for `certificate_name`) against `rules`' tokens and
/// certificate names. Returns true iff it proved its id, false iff nothing
/// was asked of it; an error (not_authorized, the reason) iff it failed.
/// An unknown client id and a wrong token get one answer ("unknown client
/// id or wrong token"), after the same work: the token's digest compared,
/// in constant time, with every configured one.
/// `digests`: hash_tokens(rules), or null (hashed here).
result<bool> authenticate(const admission_rules& rules, const msg::hello& h,
                          bool remote, const std::string& certificate_name,
                          const token_digests* digests = nullptr);

/// What a Hello the registry admitted changed.
template <class Handle> struct admission {
  bool resumed = false; ///< a known client came back (else a new one joined)
  uint32_t index = 0;   ///< the client's index, for its Welcome
  std::string from;     ///< its address, or in_process
  /// The other connection the client's session moved from, and its
  /// address; empty iff it came back over the same connection (or is new).
  std::optional<Handle> replaced;
  /// What the replaced connection is told before it is closed; empty iff
  /// none is replaced or it was in this process.
  std::optional<error> notice;
};

/// The clients of one run, by id. `Handle` names a connection: copyable,
/// equality- and less-than-comparable (a CAF actor handle in the server).
template <class Handle> class client_registry {
public:
  struct entry {
    Handle handle{};
    uint32_t index = 0;
    presence state = presence::connected;
    uint64_t epoch = 0; ///< bumped on every loss; names the drop timer
    std::string address;
    /// Takeovers of this client's session (a Hello over a new connection):
    /// a lost client comes back once, not forty times a second.
    event_limit takeovers{8, std::chrono::seconds{10}};
    /// AsyncScheduler: the client's task and the model it downloads (held
    /// until it offers its update, so that a newer version does not pull
    /// the model away mid-download).
    msg::frame task;
    snapshot_ptr model;
    /// Dropped from the run for lying (never admitted again).
    bool banned = false;
    /// The client it is a connection of: its own id, or (a rank of a
    /// sharded client, registered as rank_key(id, rank)) the client's.
    std::string logical;
    uint32_t rank = 0;
  };

  explicit client_registry(admission_rules rules)
      : rules_(std::move(rules)), digests_(hash_tokens(rules_)) {}

  /// Decides hello `h` from `sender`, seen at `address` (empty: in this
  /// process), whose verified certificate names `certificate_name`; `ended`
  /// iff the run has ended. Returns what changed iff admitted, else the
  /// refusal ("<id> from <address>: <why>"). A known client that is not
  /// dropped resumes: over its own connection only if remote (a stalled
  /// transfer), over another one only if authenticated or lost, at most
  /// 8 times in 10 s (the actor's time `now`). Anyone else joins iff the
  /// run goes on and a place is free (a dropped client keeps its index).
  /// A remote host past its failed Hellos has its failing Hellos refused
  /// as too_many_requests, unlogged, during its back-off
  /// (protocol/hello_throttle.hpp); one that proves its id is admitted.
  /// `fits`, if set, is asked once the Hello proved its id (a sharded
  /// client's rank: does it fit its client and the model?): its error
  /// refuses the Hello, so that no stranger learns of a client's ranks.
  result<admission<Handle>>
  admit(const msg::hello& h, const Handle& sender, const std::string& address,
        const std::string& certificate_name, bool ended,
        event_limit::time_point now,
        const std::function<std::optional<error>()>& fits = {}) {
    bool remote = !address.empty();
    auto from = remote ? address : std::string{in_process};
    auto deny = [&h, &from](errc code, const std::string& why) {
      return error{code, h.client_id + " from " + from + ": " + why};
    };
    log_refusal_ = true;
    auto host = host_of(address);
    auto left = remote ? throttle_.backoff_left(host, now)
                       : hello_throttle::milliseconds{0};
    // Checked even in a back-off: a right token is admitted whatever others
    // sent from its host (tokens of 128 random bits are not guessed).
    auto authenticated =
        authenticate(rules_, h, remote, certificate_name, &digests_);
    if (!authenticated && left.count() > 0) {
      log_refusal_ = false; // the throttle logs one line per burst
      return deny(errc::too_many_requests, "too many failed Hellos from " +
                                               host + ": refused for another " +
                                               std::to_string(left.count()) +
                                               " ms");
    }
    if (!authenticated) {
      if (remote)
        note_failure(host, now);
      return deny(authenticated.err().code, authenticated.err().message);
    }
    auto key =
        h.shard.sharded() ? rank_key(h.client_id, h.shard.rank) : h.client_id;
    if (auto mixed = mixes_shards(h))
      return deny(errc::not_authorized, *mixed);
    if (const auto* known = id_of(sender); known && *known != key)
      return deny(errc::not_authorized,
                  "its connection is registered as " + *known);
    auto it = clients_.find(key);
    if (it != clients_.end() && it->second.banned)
      return deny(errc::not_authorized, "it was dropped from the run");
    if (auto unfit = fits ? fits() : std::nullopt)
      return error{unfit->code,
                   h.client_id + " from " + from + ": " + unfit->message};
    if (it != clients_.end() && it->second.state != presence::dropped)
      return resume(it->first, it->second, sender, remote, from, *authenticated,
                    now, deny);
    if (ended)
      return deny(errc::unknown_client, "the run has ended");
    if (!active_ranks(h.client_id) && active_clients() >= rules_.places)
      return deny(errc::unknown_client, "all " + std::to_string(rules_.places) +
                                            " client places are taken");
    // A client dropped (after its grace, or at once on its goodbye) joins
    // again within the takeover limit: no join, goodbye, join loop.
    if (it != clients_.end() && !it->second.takeovers.allow(now))
      return deny(errc::too_many_requests,
                  it->second.takeovers.exceeded("joins again"));
    return join(key, h, sender, from);
  }

  /// The ranks of sharded client `id` that are registered and not dropped.
  std::set<uint32_t> present_ranks(const std::string& id) const {
    std::set<uint32_t> out;
    auto it = ranks_.find(id);
    if (it == ranks_.end())
      return out;
    for (const auto& key : it->second) {
      const auto& c = clients_.at(key);
      if (c.state != presence::dropped)
        out.insert(c.rank);
    }
    return out;
  }

  /// The connections of client `id` that are connected: its own, or those
  /// of its ranks.
  std::vector<entry*> connections(const std::string& id) {
    std::vector<entry*> out;
    if (auto* c = connected(id))
      out.push_back(c);
    if (auto it = ranks_.find(id); it != ranks_.end())
      for (const auto& key : it->second)
        if (auto* c = connected(key))
          out.push_back(c);
    return out;
  }

  /// Returns true iff the refusal of the last admit() is to be logged
  /// (false: a failed Hello the throttle counts instead, one line a burst).
  bool log_refusal() const { return log_refusal_; }

  /// Returns the number of remote hosts whose failed Hellos are counted.
  size_t throttled_hosts() const { return throttle_.hosts(); }

  /// Returns the id of the connected client on connection `h`, or null.
  const std::string* id_of(const Handle& h) const {
    auto it = senders_.find(h);
    return it == senders_.end() ? nullptr : &it->second;
  }

  /// Returns client `id`'s entry, or null iff it never registered.
  entry* find(const std::string& id) {
    auto it = clients_.find(id);
    return it == clients_.end() ? nullptr : &it->second;
  }

  /// Returns client `id`'s entry iff it is connected, else null.
  entry* connected(const std::string& id) {
    auto* c = find(id);
    return c && c->state == presence::connected ? c : nullptr;
  }

  /// Calls `f(id, entry)` for every connected client, in id order.
  template <class F> void for_each_connected(F&& f) {
    for (auto& [id, c] : clients_)
      if (c.state == presence::connected)
        f(id, c);
  }

  /// Returns those of `ids` that are connected, in id order.
  /// (A sharded client's ranks are connections of their own: their keys.)
  std::vector<std::string>
  connected_among(const std::set<std::string>& ids) const {
    std::vector<std::string> out;
    for (const auto& [id, c] : clients_)
      if (c.state == presence::connected && ids.count(c.logical))
        out.push_back(id);
    return out;
  }

  /// The first connected client whose handle satisfies `is_it` loses its
  /// connection: it becomes lost, its epoch moves on. Returns its id and
  /// new epoch, or nullopt iff there is none.
  template <class Pred>
  std::optional<std::pair<std::string, uint64_t>> lose(Pred&& is_it) {
    for (auto& [id, c] : clients_) {
      if (c.state != presence::connected || !is_it(c.handle))
        continue;
      senders_.erase(c.handle);
      c.state = presence::lost;
      ++c.epoch;
      return std::pair{id, c.epoch};
    }
    return std::nullopt;
  }

  /// Drops client `id` iff it is still lost since `epoch` (its grace
  /// ended): its AsyncScheduler task and the model version it pinned go
  /// (a rejoin gets a new task). Returns true iff it was dropped now.
  bool drop(const std::string& id, uint64_t epoch) {
    auto* c = find(id);
    if (!c || c->state != presence::lost || c->epoch != epoch)
      return false;
    c->state = presence::dropped;
    c->task = {};
    c->model = nullptr;
    return true;
  }

  /// Forgets connected client `id` (a simulation's client sent away
  /// between rounds: it may join again as new). Returns its connection iff
  /// it was connected and whole (no sharded client's rank, not banned).
  std::optional<Handle> forget(const std::string& id) {
    auto it = clients_.find(id);
    if (it == clients_.end() || it->second.state != presence::connected ||
        it->second.banned || it->second.logical != id)
      return std::nullopt;
    auto handle = it->second.handle;
    senders_.erase(handle);
    clients_.erase(it);
    return handle;
  }

  /// Client `id` is never admitted again (dropped from the run for lying);
  /// returns its connection iff it is connected (to be closed: it is then
  /// lost, and dropped when its grace ends, as any client).
  std::optional<Handle> ban(const std::string& id) {
    auto* c = find(id);
    if (!c || c->banned)
      return std::nullopt;
    c->banned = true;
    return c->state == presence::connected ? std::optional<Handle>{c->handle}
                                           : std::nullopt;
  }

  /// Returns the number of connected clients.
  size_t connected_count() const {
    return count([](presence p) { return p == presence::connected; });
  }
  /// Returns the number of connections not dropped (connected or lost).
  size_t active_count() const {
    return count([](presence p) { return p != presence::dropped; });
  }
  /// Returns the number of clients not dropped, a sharded one once.
  size_t active_clients() const {
    std::set<std::string> ids;
    for (const auto& [key, c] : clients_)
      if (c.state != presence::dropped)
        ids.insert(c.logical);
    return ids.size();
  }

private:
  /// Client `id` joins (again, at its index, if it was dropped).
  admission<Handle> join(const std::string& id, const msg::hello& h,
                         const Handle& sender, const std::string& from) {
    auto it = clients_.find(id);
    auto index = it != clients_.end() ? it->second.index : next_index_++;
    auto& c = clients_[id];
    c.handle = sender;
    c.index = index;
    c.state = presence::connected;
    ++c.epoch;
    c.address = from;
    c.task = {};
    c.model = nullptr; // its takeover count stays: no churn by re-registering
    c.logical = h.client_id;
    c.rank = h.shard.rank;
    if (h.shard.sharded())
      ranks_[h.client_id].insert(id);
    senders_[sender] = id;
    return admission<Handle>{false, index, from, std::nullopt, std::nullopt};
  }

  template <class Deny>
  result<admission<Handle>> resume(const std::string& id, entry& c,
                                   const Handle& sender, bool remote,
                                   const std::string& from, bool authenticated,
                                   event_limit::time_point now, Deny& deny) {
    // A remote client registers again on its connection when its transfer
    // stalled; over another one after losing its connection (only when
    // authenticated, if the old one still looks alive).
    bool same = c.handle == sender;
    if ((same && !remote) ||
        (!same && c.state == presence::connected && !authenticated))
      return deny(errc::unknown_client, std::string{already_registered});
    if (!same && !c.takeovers.allow(now))
      return deny(errc::too_many_requests,
                  c.takeovers.exceeded("new connections"));
    admission<Handle> a{true, c.index, from, std::nullopt, std::nullopt};
    if (!same)
      a.replaced = c.handle;
    if (!same && c.address != in_process)
      a.notice = error{errc::not_authorized,
                       "another connection took over as " + id +
                           " (old connection from " + c.address + ")"};
    senders_.erase(c.handle);
    c.handle = sender;
    c.state = presence::connected;
    c.address = from;
    ++c.epoch;
    senders_[sender] = id;
    return a;
  }

  /// True iff client `id` has a rank not dropped.
  bool active_ranks(const std::string& id) const {
    return !present_ranks(id).empty();
  }

  /// Why hello `h` may not register: it is sharded where its id is
  /// registered whole, or the reverse; nullopt: it may.
  std::optional<std::string> mixes_shards(const msg::hello& h) const {
    if (h.shard.sharded()) {
      auto it = clients_.find(h.client_id);
      if (it != clients_.end() && it->second.state != presence::dropped)
        return "it is registered as one process, not as ranks";
    } else if (active_ranks(h.client_id)) {
      return "it is registered as a sharded client (ranks)";
    }
    return std::nullopt;
  }

  void note_failure(const std::string& host, event_limit::time_point now) {
    auto v = throttle_.failed(host, now);
    log_refusal_ = v.log_refusal;
    if (v.burst)
      log_line(log_level::warning, "server", "refused: " + *v.burst);
  }

  size_t count(bool (*counts)(presence)) const {
    size_t n = 0;
    for (const auto& kv : clients_)
      n += counts(kv.second.state) ? 1 : 0;
    return n;
  }

  admission_rules rules_;
  token_digests digests_; ///< rules_'s tokens, hashed once
  hello_throttle throttle_;
  bool log_refusal_ = true; ///< of the last admit()
  std::map<std::string, entry> clients_;
  /// The index the next new client gets (entries forgotten keep theirs).
  uint32_t next_index_ = 0;
  std::map<Handle, std::string> senders_; ///< current connections
  /// Sharded clients: their ranks' keys.
  std::map<std::string, std::set<std::string>> ranks_;
};

} // namespace fedcaf
