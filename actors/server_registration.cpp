#include "actors/server_registration.hpp"

#include "actors/errors.hpp"
#include "actors/messages.hpp"

namespace fedcaf {

server_registration::server_registration(
    server_core& core, server_shards& shards,
    std::function<void(const std::string&)> dropped)
    : core_(core), shards_(shards), dropped_(std::move(dropped)) {}

frame server_registration::hello(const frame& f, const std::string& address,
                                 const std::string& certificate_name) {
  auto h = msg::decode<msg::hello>(f);
  auto peer = address.empty() ? std::string{"in-process"} : address;
  if (!h) {
    core_.reporter_.refused(peer, h.err());
    return core_.refuse(h.err());
  }
  // A population's clients are this process's own (a relay whose children
  // are all simulated): nobody takes a member's place, nobody joins them.
  if (core_.options_.drawn.members && !address.empty()) {
    error why{errc::not_authorized,
              h->client_id + " from " + address +
                  ": this server's clients are all simulated in its process"};
    core_.reporter_.refused(peer, why);
    // Counted every time, logged once: a peer repeating Hellos costs a
    // decode and an answer, not a log line each.
    auto first = !remote_refused_;
    remote_refused_ = true;
    return core_.refusals_.refuse_logged_if(why, first);
  }
  // Where a client's handle enters: an in-process client actor, or the
  // gateway of a remote one (a broker: untyped by CAF's design).
  auto* self = core_.self_;
  auto sender = caf::actor_cast<client_inbox>(self->current_sender());
  auto fits = [this, &h]() -> std::optional<error> {
    return h->shard.sharded() ? shards_.refusal(*h) : std::nullopt;
  };
  auto& registry = core_.registry_;
  auto a = registry.admit(*h, sender, address, certificate_name,
                          core_.stopping_, core_.now(), fits);
  if (!a) {
    core_.reporter_.refused(peer, a.err());
    return core_.refusals_.refuse_logged_if(a.err(), registry.log_refusal());
  }
  bool sharded = h->shard.sharded();
  auto key = sharded ? rank_key(h->client_id, h->shard.rank) : h->client_id;
  bool joins = !sharded || shards_.registered(*h); // its last rank came
  if (a->resumed)
    resumed(key, sender, *a);
  else
    self->monitor(sender);
  if (joins && (!a->resumed || sharded)) {
    core_.reporter_.registered(h->client_id, a->from, core_.now());
    self->send(core_.peers_.scheduler, join_atom::value, h->client_id, a->from);
    if (core_.options_.drawn.members) { // summoned into the open round
      summoned_.erase(key);
      self->send(self, round_atom::value, key);
    }
  }
  const auto& o = core_.options_;
  return msg::encode(msg::welcome{a->index, o.num_clients,
                                  o.client_configs_yaml, o.terms, a->resumed});
}

void server_registration::call_up(uint32_t round,
                                  const std::set<std::string>& chosen) {
  const auto& members = *core_.options_.drawn.members;
  auto* self = core_.self_;
  std::vector<std::string> away;
  core_.registry_.for_each_connected([&](const std::string& id, auto&) {
    if (!chosen.count(id) && members.index_of(id))
      away.push_back(id);
  });
  auto done = msg::encode(msg::done{round, {}, {}});
  for (const auto& id : away)
    if (auto handle = core_.registry_.forget(id)) {
      self->demonitor(handle->address());
      self->send(*handle, done_atom::value, done);
      core_.reporter_.retired(id, round);
    }
  // One summoned for the last round and not here yet is on its way: drawn
  // again, it is announced this round as it registers.
  std::set<std::string> on_the_way;
  auto server = caf::actor_cast<server_actor>(self);
  for (const auto& id : chosen) {
    if (core_.registry_.find(id))
      continue;
    if (!summoned_.count(id))
      if (auto i = members.index_of(id))
        core_.options_.drawn.summon(server, *i);
    on_the_way.insert(id);
  }
  summoned_ = std::move(on_the_way);
}

void server_registration::drop(const std::string& key, uint64_t epoch) {
  drop_now(key, epoch, [this](const std::string& id) {
    if (!core_.banned(id)) // a banned one was said dropped already
      core_.reporter_.dropped(id, core_.options_.reconnect_grace.count());
  });
}

std::optional<std::string>
server_registration::goodbye(const caf::strong_actor_ptr& sender,
                             const frame& f) {
  auto lost = core_.registry_.lose(
      [&sender](const client_inbox& h) { return h.address() == sender; });
  if (!lost)
    return std::nullopt;
  auto [key, epoch] = *lost;
  auto g = msg::decode<msg::goodbye>(f);
  auto why = g ? msg::said_why(*g)
               : "a goodbye it could not say (" + g.err().message + ")";
  std::string reason = g ? name_of(g->reason) : "unreadable_goodbye";
  drop_now(key, epoch, [this, &why, &reason](const std::string& id) {
    if (!core_.banned(id)) // a banned one was said dropped already
      core_.reporter_.left(id, reason, why);
  });
  return key;
}

std::optional<std::string> server_registration::lost(
    const caf::down_msg& m,
    const std::function<void(const std::string&)>& first) {
  auto& core = core_;
  auto lost = core.registry_.lose(
      [&m](const client_inbox& h) { return h.address() == m.source; });
  if (!lost)
    return std::nullopt;
  const auto& [key, epoch] = *lost;
  if (first)
    first(key);
  if (core.stopping_)
    return key;
  // A simulation's member never comes back (it ended, in this process):
  // dropped now, drawn no more.
  if (core.options_.drawn.members &&
      core.options_.drawn.members->index_of(key)) {
    drop_now(key, epoch, [this, &m](const std::string& id) {
      if (!core_.banned(id))
        core_.reporter_.left(id,
                             m.reason ? to_string(from_caf(m.reason).code)
                                      : std::string{"no_goodbye"},
                             "it ended without a goodbye");
    });
    return key;
  }
  if (!core.banned(key)) // a banned one was said dropped already
    report_lost(key, m.reason);
  core.self_->delayed_send(core.self_, core.options_.reconnect_grace,
                           drop_atom::value, key, epoch);
  return key;
}

void server_registration::report_lost(const std::string& id,
                                      const caf::error& reason) {
  auto grace_ms = core_.options_.reconnect_grace.count();
  if (reason)
    core_.reporter_.lost(id, to_string(from_caf(reason).code),
                         core_.self_->system().render(reason), grace_ms);
  else
    core_.reporter_.lost(id, "no_goodbye",
                         "closed without a goodbye: a crash, a kill or a "
                         "network failure",
                         grace_ms);
}

bool server_registration::drop_now(
    const std::string& key, uint64_t epoch,
    const std::function<void(const std::string&)>& report) {
  auto& registry = core_.registry_;
  if (core_.stopping_ || !registry.drop(key, epoch))
    return false;
  if (dropped_)
    dropped_(key);
  const auto* c = registry.find(key);
  if (c->logical != key && !shards_.dropped(c->logical, c->rank))
    return true; // a rank of a client already out of the rounds
  report(c->logical);
  core_.self_->send(core_.peers_.scheduler, drop_atom::value, c->logical);
  return true;
}

void server_registration::resumed(const std::string& key,
                                  const client_inbox& sender,
                                  const admission<client_inbox>& a) {
  auto* self = core_.self_;
  if (a.replaced) // the connection taken over is closed by its gateway
    self->monitor(sender);
  if (a.notice) // one session per client; the old connection is told
    self->send(*a.replaced, replaced_atom::value, msg::encode(*a.notice));
  core_.reporter_.resumed(key, a.from,
                          a.replaced ? "reconnected" : "same_connection");
  // After the Welcome, which the Hello's reply carries.
  self->send(self, round_atom::value, key);
}

} // namespace fedcaf
