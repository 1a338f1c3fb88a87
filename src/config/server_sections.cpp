// Reads server_configs: rounds and their scheduler, sampling, the
// aggregator, memory mode, checkpoints, secure aggregation and relays, and
// refuses the combinations a run cannot honour.

#include "read_sections.hpp"

#include <algorithm>
#include <charconv>
#include <filesystem>

#include "fedcaf/client_id.hpp"
#include "fedcaf/shard.hpp"

namespace fedcaf::config_reader {

namespace {

void read_sampling(section& kw, server_config& sc) {
  kw.get("clients_per_round", sc.clients_per_round, 1, max_clients);
  std::optional<double> fraction;
  kw.get("client_fraction", fraction);
  if (fraction && !(*fraction > 0 && *fraction <= 1))
    kw.fail("client_fraction", "must be in (0, 1]");
  else if (fraction && kw.has("clients_per_round"))
    kw.fail("client_fraction", "give clients_per_round or client_fraction, "
                               "not both");
  else if (fraction)
    sc.clients_per_round = std::max<uint32_t>(
        1, static_cast<uint32_t>(*fraction * sc.num_clients + 0.5));
  if (sc.clients_per_round > sc.num_clients)
    kw.fail("clients_per_round", "must not exceed num_clients (" +
                                     std::to_string(sc.num_clients) + ")");
  kw.get("seed", sc.sampling_seed);
}

void read(section s, secure_aggregation_config& a) {
  s.get("enabled", a.enabled);
  s.get("threshold", a.threshold);
  s.positive("clipping_range", a.clipping_range);
  s.get("quantization_bits", a.quantization_bits);
  if (a.quantization_bits < 1 || a.quantization_bits > 31)
    s.fail("quantization_bits",
           "must be from 1 to 31, got " + std::to_string(a.quantization_bits));
  s.get("neighbours", a.neighbours);
}

/// Refuses what secure aggregation cannot run with.
void check_secure_aggregation(section& s, const server_config& sc) {
  const auto& a = sc.secure_aggregation;
  if (!a.enabled)
    return;
  auto fail = [&](const std::string& why) {
    s.fail("secure_aggregation", why);
  };
  if (sc.scheduler != scheduler_kind::sync)
    fail("runs with SyncScheduler only (a sum needs a round)");
  if (sc.memory_mode != memory_mode::ram &&
      sc.aggregator != server_rule::fedavg)
    fail(std::string{"in memory_mode "} + std::string{name_of(sc.memory_mode)} +
         " averages with FedAvgAggregator only (the masked sum waits where "
         "the old model was, which " +
         aggregator_name(sc.aggregator) + " needs): use memory_mode ram");
  if (sc.rule.partial_updates == partial_updates::keep)
    fail("cannot keep a partial masked update (partial_updates: keep)");
  if (is_robust(sc.aggregator))
    fail(std::string{aggregator_name(sc.aggregator)} +
         " must see each update's values to order them; "
         "masked updates hide them");
  if (sc.rule.max_update_norm > 0 || sc.rule.norm_bound > 0)
    fail("cannot measure a masked update: drop "
         "aggregator_kwargs.max_update_norm and norm_bound");
  if (sc.on_deadline == deadline_action::wait)
    fail("ends its keys phase at round_deadline_s: scheduler_kwargs."
         "on_deadline: wait does not apply");
  auto n = sc.clients_per_round ? sc.clients_per_round : sc.num_clients;
  uint64_t top = (uint64_t{1} << a.quantization_bits) - 1;
  if (n * top > 0xffffffffull)
    fail(std::to_string(n) + " clients of " +
         std::to_string(a.quantization_bits) +
         " bits each overflow the 32-bit sum: lower quantization_bits");
  auto k = a.neighbours == 0 || a.neighbours >= n ? n - 1 : a.neighbours;
  if (k > 254)
    fail("at most 254 neighbours per client, got " + std::to_string(k));
  if (a.threshold > k + 1)
    fail("threshold " + std::to_string(a.threshold) + " exceeds the " +
         std::to_string(k) + " neighbours a client shares with (+1)");
}

/// server_configs.relays: client id -> the most clients under it. A tree
/// sums: what does not decompose into sums of groups is refused here.
void read_relays(section& s, server_config& sc) {
  std::vector<std::pair<std::string, std::string>> relays;
  s.get_map("relays", relays);
  for (const auto& [id, most] : relays) {
    auto key = "relays." + id;
    if (auto ok = check_client_id(id); !ok)
      return s.fail(key.c_str(), ok.err().message);
    uint64_t n = 0;
    auto [end, ec] = std::from_chars(most.data(), most.data() + most.size(), n);
    if (ec != std::errc{} || end != most.data() + most.size() || n == 0 ||
        n > max_clients)
      return s.fail(key.c_str(), "the most clients under the relay, 1 to " +
                                     std::to_string(max_clients));
    const auto& auth = sc.comm.auth;
    const std::string& relay_id = id; // a binding no lambda may capture
    if (auth.enabled && std::none_of(auth.tokens.begin(), auth.tokens.end(),
                                     [&relay_id](const auto& t) {
                                       return t.first == relay_id;
                                     }))
      return s.fail(key.c_str(),
                    "has no token (comm_configs.grpc_configs."
                    "authenticator_args): the relay could never register");
    sc.relays[id] = n;
  }
  s.get("simulated_relays", sc.simulated_relays, 0, max_clients);
  if (sc.simulated_relays > 0 && !sc.relays.empty())
    s.fail("simulated_relays", "a simulated tree names its own relays "
                               "(Relay1..R): give relays or simulated_relays");
  auto per_round = sc.clients_per_round ? sc.clients_per_round : sc.num_clients;
  if (sc.simulated_relays > per_round)
    s.fail("simulated_relays",
           "each relay runs at least one client a round: at most " +
               std::to_string(per_round) + " (clients_per_round)");
  if (sc.relays.empty() && sc.simulated_relays == 0)
    return;
  const std::string where =
      sc.relays.empty() ? " (server_configs.simulated_relays runs a tree)"
                        : " (server_configs.relays names relays)";
  auto refuse = [&](const char* key, const std::string& why) {
    s.fail(key, why + where);
  };
  if (is_robust(sc.aggregator))
    refuse("aggregator",
           std::string{aggregator_name(sc.aggregator)} +
               " does not decompose into the sums a tree forwards: the "
               "median or trimmed mean of relays' sums is not that of their "
               "clients' updates; use FedAvg or a server optimizer");
  if (is_async(sc.aggregator))
    refuse("aggregator",
           std::string{aggregator_name(sc.aggregator)} +
               " weighs each update by its own staleness as it arrives: a "
               "relay's sum mixes updates of one round and has no single "
               "staleness; use a SyncScheduler rule");
  if (sc.rule.client_weights_mode != client_weighting::equal)
    refuse("aggregator_kwargs.client_weights_mode",
           "sample_size weights through relays are not built: a relay "
           "weighs each of its clients 1; use equal");
  if (sc.secure_aggregation.enabled)
    refuse("secure_aggregation.enabled",
           "secure aggregation across relays is not built: the masks of a "
           "relay's group do not cancel in its partial sum (a relay's own "
           "server_configs.secure_aggregation runs it within its group)");
  if (sc.rule.partial_updates == partial_updates::keep &&
      !is_async(sc.aggregator))
    refuse("aggregator_kwargs.partial_updates",
           "keep would put the part of a relay's sum that arrived before it "
           "was lost into the model; use discard (the default)");
  if (sc.rule.norm_bound > 0)
    refuse("aggregator_kwargs.norm_bound",
           "a relay's sum is not one update: its distance from the model "
           "says nothing of its clients'");
  if (!sc.rule.tensor_rules.empty())
    refuse("aggregator_kwargs.tensor_rules",
           "kept tensors replace a client's bytes by the model's, which a "
           "relay's sum would need times its weight");
}

/// min_clients unless the config says it: a round goes on without one of
/// `per_round` clients, and without a tenth of many (2 -> 1, 3 -> 2,
/// 10 -> 9, 100 -> 90); one client alone is its round.
uint32_t default_min_clients(uint32_t per_round) {
  if (per_round <= 1)
    return 1;
  return per_round - std::max<uint32_t>(1, per_round / 10);
}

/// partial_updates unless the config says it: keep for a server's own
/// clients (a client dropped mid-upload costs the others no upload), discard
/// under secure aggregation and in trees (a partial masked update, or a
/// relay's partial sum, cannot stay); the async rules keep.
void resolve_partial_updates(server_config& sc) {
  if (sc.rule.partial_updates_given || is_async(sc.aggregator))
    return;
  bool tree = !sc.relays.empty() || sc.simulated_relays > 0;
  sc.rule.partial_updates = sc.secure_aggregation.enabled || tree
                                ? partial_updates::discard
                                : partial_updates::keep;
}

/// Reads scheduler_kwargs: the clients of a round and its deadlines.
void read_scheduler_kwargs(section kw, server_config& sc) {
  uint32_t n = sc.num_clients;
  kw.get("num_clients", n, 1, max_clients);
  if (n != sc.num_clients)
    kw.fail("num_clients", "differs from server_configs.num_clients");
  read_sampling(kw, sc);
  auto per_round = sc.clients_per_round ? sc.clients_per_round : sc.num_clients;
  sc.min_clients = default_min_clients(per_round);
  kw.get("min_clients", sc.min_clients, 1, max_clients);
  if (sc.min_clients > per_round)
    kw.fail("min_clients",
            std::to_string(sc.min_clients) +
                " must not exceed the clients of a round (" +
                std::to_string(per_round) +
                "): set it with the clients (--set "
                "server_configs.scheduler_kwargs.min_clients=N)");
  kw.seconds("round_deadline_s", sc.round_deadline_s, true);
  kw.seconds("registration_deadline_s", sc.registration_deadline_s, true);
  kw.one_of("on_deadline", sc.on_deadline);
  bool same_init = true;
  kw.get("same_init_model", same_init);
  if (!same_init)
    kw.fail("same_init_model", "only true is supported");
}

/// The scheduler the aggregator needs, the one named or, unnamed, chosen
/// for it (AsyncScheduler for FedAsync and FedBuff, SyncScheduler else).
void check_scheduler(section& s, server_config& sc) {
  auto needed =
      is_async(sc.aggregator) ? scheduler_kind::async : scheduler_kind::sync;
  if (!s.has("scheduler"))
    sc.scheduler = needed;
  if (sc.scheduler != needed)
    s.fail("aggregator", std::string{aggregator_name(sc.aggregator)} +
                             " needs " + std::string{name_of(needed)} +
                             ", the scheduler is " +
                             std::string{name_of(sc.scheduler)});
}

/// Reads memory_mode and storage_dir, and refuses what the mode cannot run.
void read_memory_mode(section& s, server_config& sc) {
  s.one_of("memory_mode", sc.memory_mode);
  if (sc.rule.norm_bound > 0 && sc.memory_mode != memory_mode::ram)
    s.fail("aggregator_kwargs.norm_bound",
           "needs memory_mode ram: an update is scaled towards the model its "
           "client received, which window and disk modes overwrite");
  if (sc.scheduler == scheduler_kind::async &&
      sc.memory_mode != memory_mode::ram)
    s.fail("memory_mode", "AsyncScheduler runs in ram mode only (window and "
                          "disk modes average sync rounds in place)");
  s.get("storage_dir", sc.storage_dir);
  s.get("fold_threads", sc.fold_threads, 0, max_fold_threads);
  if (sc.memory_mode == memory_mode::disk &&
      !std::filesystem::is_directory(sc.storage_dir))
    s.fail("storage_dir", "'" + sc.storage_dir + "' is not a directory");
}

void read(section c, checkpoint_config& cp) {
  c.get("dir", cp.dir);
  if (cp.dir.empty())
    c.fail("dir", "names the folder checkpoints are written to");
  c.get("every_rounds", cp.every_rounds, 1);
  c.get("keep", cp.keep, 1);
  c.one_of("on_error", cp.on_error);
}

} // namespace

void read(section s, server_config& sc) {
  s.get("num_clients", sc.num_clients, 1, max_clients);
  s.get("max_shard_ranks", sc.max_shard_ranks, 2, max_shard_ranks);
  s.get("num_global_epochs", sc.num_global_epochs, 1);
  s.one_of("scheduler", sc.scheduler);
  read_scheduler_kwargs(s.child("scheduler_kwargs"), sc);
  s.one_of("aggregator", sc.aggregator, rule_names);
  read(s.child("aggregator_kwargs"), sc.rule, sc.aggregator);
  check_scheduler(s, sc);
  s.get("evaluate", sc.evaluate);
  s.get("federated_evaluation", sc.federated_evaluation);
  read_memory_mode(s, sc);
  s.get("save_global_model", sc.save_global_model);
  if (!sc.save_global_model.empty()) {
    auto dir = std::filesystem::path{sc.save_global_model}.parent_path();
    if (!dir.empty() && !std::filesystem::is_directory(dir))
      s.fail("save_global_model",
             "directory '" + dir.string() + "' does not exist");
  }
  if (s.has("checkpoint"))
    read(s.child("checkpoint"), sc.checkpoint);
  std::string device = "cpu";
  s.one_of("device", device, {"cpu"});
  read(s.child("comm_configs"), sc.comm, true);
  read(s.child("secure_aggregation"), sc.secure_aggregation);
  check_secure_aggregation(s, sc);
  read_relays(s, sc);
  resolve_partial_updates(sc);
  s.ignore({"logging_output_dirname", "logging_output_filename"});
}

} // namespace fedcaf::config_reader
