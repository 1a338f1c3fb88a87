// `simulate` of a tree of relays in one process.

#include "simulated_tree.hpp"

#include <algorithm>

#include "server_wiring.hpp"

namespace fedcaf::cli {

namespace {

/// Part `r` (from 0) of `total` shared among `parts` as evenly as can be.
uint32_t share(uint32_t total, uint32_t parts, uint32_t r) {
  return total / parts + (r < total % parts ? 1 : 0);
}

/// At least 1, and `min` of `of` scaled to `part` of it, rounded up.
uint32_t scaled_min(uint32_t min, uint32_t of, uint32_t part) {
  return std::max<uint32_t>(
      1, static_cast<uint32_t>((uint64_t{min} * part + of - 1) / of));
}

} // namespace

simulated_tree::simulated_tree(const config& cfg, const options& opts,
                               std::shared_ptr<lazy_data> sets, stop_flag stop,
                               uint32_t threads_per_client,
                               std::vector<run_report>& client_reports)
    : cfg_(cfg), opts_(opts), sets_(std::move(sets)), stop_(std::move(stop)),
      threads_(threads_per_client), client_reports_(&client_reports),
      relays_(cfg.server.simulated_relays) {
  opts_.report_path.reset(); // the root's, not the relays'
  opts_.report_html_path.reset();
  opts_.inner_node = true; // their round lines in the log, not on stdout
}

config simulated_tree::root_config(const config& cfg) {
  config root = cfg;
  auto& s = root.server;
  auto r = s.simulated_relays;
  auto per_round = s.clients_per_round ? s.clients_per_round : s.num_clients;
  for (uint32_t i = 0; i < r; ++i)
    s.relays["Relay" + std::to_string(i + 1)] = share(s.num_clients, r, i);
  s.min_clients = scaled_min(s.min_clients, per_round, r);
  s.num_clients = r;
  s.clients_per_round = 0;
  s.simulated_relays = 0;
  return root;
}

void simulated_tree::spawn(caf::actor_system& sys, const server_actor& root) {
  for (uint32_t r = 0; r < relays_.size(); ++r) {
    client_options co{"Relay" + std::to_string(r + 1),
                      millis_of(cfg_.server.comm.stream.idle_timeout_s)};
    co.own_thread = true;
    co.quiet = true; // the root's lines speak for the run
    // A relay's config plans as the root's did (FedAvg of a block of at
    // least one client); were it refused, spawn_side would say so before
    // the storage is used.
    auto plan = plan_of(relay_config(r));
    auto storage = plan ? plan->storage_dir : std::string{};
    relays_[r].upstream =
        spawn_client(sys, root, co,
                     relay_trainers(
                         [this, r, &sys](relay_upstream up) {
                           return spawn_side(sys, r, std::move(up));
                         },
                         storage, log_level::debug),
                     &relays_[r].upstream_report);
  }
}

std::string simulated_tree::finish(caf::actor_system& sys,
                                   const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock{spawning_};
    closing_ = true;
    for (auto& t : relays_)
      if (t.side)
        caf::anon_send(t.side->server, stop_atom::value, reason);
  }
  std::string failure;
  for (auto& t : relays_) {
    await_all(sys, std::vector<client_actor>{t.upstream});
    if (t.side) {
      await_all(sys, std::vector<server_actor>{t.side->server});
      await_all(sys, t.children);
      if (t.drawn)
        t.drawn->await_all();
      t.side->shut_down(sys);
    }
    if (t.drawn)
      t.drawn->report_into(drawn_figures_, *client_reports_);
    for (auto& c : t.child_reports)
      client_reports_->push_back(std::move(c));
    for (const auto* r : {&t.upstream_report, &t.side_report})
      if (failure.empty() && !r->failure.empty())
        failure = r->node + ": " + r->failure;
    t = relay{};
  }
  return failure;
}

config simulated_tree::relay_config(uint32_t r) const {
  config c = cfg_;
  auto& s = c.server;
  auto n = static_cast<uint32_t>(relays_.size());
  auto per_round = s.clients_per_round ? s.clients_per_round : s.num_clients;
  auto mine = share(s.num_clients, n, r);
  auto sampled = share(per_round, n, r);
  s.min_clients = scaled_min(s.min_clients, per_round, sampled);
  s.clients_per_round = sampled < mine ? sampled : 0;
  s.num_clients = mine;
  s.sampling_seed += r + 1;
  s.simulated_relays = 0;
  s.relays.clear();
  s.aggregator = server_rule::fedavg; // the root's rule runs at the root
  s.rule.dp_noise_multiplier = 0;     // DP-FedAvg's noise too
  s.rule.dp_clip_norm = 0;
  s.checkpoint = {};
  s.save_global_model.clear();
  c.source = cfg_.source + " (Relay" + std::to_string(r + 1) + ")";
  return c;
}

result<relay_side> simulated_tree::spawn_side(caf::actor_system& sys,
                                              uint32_t r, relay_upstream up) {
  std::lock_guard<std::mutex> lock{spawning_};
  if (closing_)
    return error{errc::internal, "the run is ending"};
  auto c = relay_config(r);
  auto layout = up.initial.layout;
  auto chunk = c.server.comm.chunk_bytes_for(layout.total_bytes());
  if (!chunk)
    return error{errc::bad_config, c.source + ": " + chunk.err().message};
  auto plan = plan_of(c);
  if (!plan)
    return plan.err();
  auto& t = relays_[r];
  auto n = static_cast<uint32_t>(relays_.size());
  uint32_t first = 0;
  for (uint32_t i = 0; i < r; ++i)
    first += share(cfg_.server.num_clients, n, i);
  auto idle = millis_of(c.server.comm.stream.idle_timeout_s);
  std::optional<summoning> drawn;
  if (drawn_as_population(c)) {
    t.drawn = std::make_unique<crowd>(
        sys, first, c.server.num_clients, [this, idle](uint32_t i) {
          client_options co{"", idle};
          co.quiet = i >= 10; // the first relay's first ten speak
          return std::pair{std::move(co),
                           local_trainer(sets_, cfg_.data, i, threads_, stop_)};
        });
    drawn = t.drawn->hook();
  }
  auto s = spawn_from_config(sys, c, nullptr, &t.side_report, false, opts_,
                             nullptr, nullptr, nullptr, stop_, &up,
                             drawn ? &*drawn : nullptr);
  if (!s)
    return s.err();
  t.side = *s;
  if (!t.drawn)
    t.child_reports.resize(c.server.num_clients);
  for (uint32_t i = first; !t.drawn && i < first + c.server.num_clients; ++i) {
    client_options co{"Client" + std::to_string(i + 1),
                      millis_of(c.server.comm.stream.idle_timeout_s)};
    co.hold_model = c.server.clients_per_round == 0;
    co.quiet = first > 0; // the first relay's first ten speak for them all
    t.children.push_back(spawn_client(
        sys, s->server, co, local_trainer(sets_, cfg_.data, i, threads_, stop_),
        &t.child_reports[i - first]));
  }
  return relay_side{s->server, layout, &sys, *chunk, plan->relay_cache_chunks};
}

} // namespace fedcaf::cli
