// Wiring of a server side from its config: the options of every actor,
// the initial model (or a checkpoint's), the evaluator, a relay's parent's
// terms.

#include "server_wiring.hpp"

#include <unistd.h>

#include <algorithm>

#include "actors/remote.hpp"
#include "fedcaf/aggregation_plan.hpp"
#include "fedcaf/checkpoint.hpp"
#include "fedcaf/fashion_mnist.hpp"
#include "fedcaf/log.hpp"
#include "fedcaf/models.hpp"
#include "fedcaf/tls.hpp"
#include "fedcaf/trainer.hpp"
#include "local_clients.hpp"

namespace fedcaf::cli {

namespace {

result<dataset_ptr> load_images(const data_config& d, const char* prefix) {
  auto set = read_fashion_mnist(d.dataset_path, prefix);
  if (!set)
    return set.err();
  return dataset_ptr{std::make_shared<image_set>(std::move(*set))};
}

/// What every client must obey, typed for Welcome (the same values the
/// client_configs YAML carries, where it has them).
msg::client_terms client_terms_of(const config& cfg) {
  const auto& s = cfg.server.comm.stream;
  auto ms = [](double seconds) {
    return static_cast<uint32_t>(std::clamp(seconds * 1000.0, 0.0, 4.0e9));
  };
  const auto& z = cfg.clients.compression;
  const auto& t = cfg.clients.train;
  return {ms(s.heartbeat_s),
          ms(s.connection_timeout_s),
          ms(s.idle_timeout_s),
          ms(s.reconnect_grace_s),
          cfg.server.comm.max_message_size,
          t.federated_evaluation,
          t.declare_update_norm,
          t.update_clip_norm,
          static_cast<uint8_t>(z.up ? z.method : compression_method::none),
          static_cast<uint8_t>(z.down ? z.method : compression_method::none),
          z.method == compression_method::zfp ? z.zfp_tolerance : 0.0};
}

/// A streaming relay's upload waits on its slowest child, and its parent
/// rejects an upload silent for the parent's idle_timeout_s +
/// reconnect_grace_s: a child that stalls is cut here (kept where it
/// delivered) within half that, before the parent takes the relay's
/// silence for its own.
void cap_streaming_silence(server_side_options& so,
                           const msg::client_terms& parent) {
  std::chrono::milliseconds limit{
      (uint64_t{parent.idle_timeout_ms} + parent.reconnect_grace_ms) / 2};
  if (!so.plan.streams_sums() || limit.count() == 0 ||
      (so.idle_timeout.count() > 0 && so.idle_timeout <= limit))
    return;
  so.idle_timeout = limit;
}

/// Logs the cut of a relay's silent children iff relay_children_options
/// made the idle timeout of `own` shorter.
void note_silence_cut(const server_side_options& own,
                      const server_side_options& relay) {
  if (relay.idle_timeout == own.idle_timeout)
    return;
  log_line("relay", "a child silent for " +
                        std::to_string(relay.idle_timeout.count()) +
                        " ms is cut (half its parent's idle_timeout_s + "
                        "reconnect_grace_s): the relay's sum streams up as its "
                        "children deliver");
}

/// Keys a resumed run may change (--set on the checkpoint's config, or
/// -c with --resume-force): when, where, how long and on how many threads,
/// not what it computes. More rounds are checked against the checkpoint's round.
bool may_change(const std::string& key) {
  for (const char* part :
       {"deadline", "timeout", "server_uri", "reconnect_grace_s",
        "server_configs.checkpoint.", "save_global_model", "storage_dir",
        "logging_output", "rate_window_s", "min_rate_bytes_per_s",
        "heartbeat_s", "server_configs.num_global_epochs",
        "server_configs.fold_threads"})
    if (key.find(part) != std::string::npos)
      return true;
  return false;
}

} // namespace

result<config> checkpoint_config(const std::string& dir,
                                 const std::vector<std::string>& overrides) {
  auto c = latest_checkpoint(dir);
  if (!c)
    return c.err();
  if (c->state.config_yaml.find("<redacted>") != std::string::npos)
    return error{errc::bad_config,
                 "--resume " + dir + ": the checkpoint's config (" + c->folder +
                     ") had its tokens written in it, which a checkpoint "
                     "never keeps: give the config with -c (or keep the "
                     "tokens in authenticator_args.tokens_file)"};
  return load_config(c->state.config_yaml,
                     "the config of the checkpoint " + c->folder,
                     config_role::server, overrides);
}

namespace {

/// The checkpoint `opts.resume` names, if any, checked against `cfg`
/// (planned as `plan`): the same config but for keys that may change
/// (given with --set on the checkpoint's own config, or with -c and
/// --resume-force), rounds left to run.
result<std::shared_ptr<const stored_checkpoint>>
checkpoint_to_resume(const config& cfg, const aggregation_plan& plan,
                     const options& opts) {
  if (!opts.resume)
    return std::shared_ptr<const stored_checkpoint>{};
  auto c = latest_checkpoint(*opts.resume);
  if (!c)
    return c.err();
  bool own = !opts.config_path; // the checkpoint's config, --set on top
  std::vector<std::string> refused;
  for (const auto& key :
       differing_keys(c->state.config_yaml, cfg.effective_yaml))
    if (!(own || opts.resume_force) || !may_change(key))
      refused.push_back(key);
  if (!refused.empty()) {
    std::string keys;
    for (const auto& k : refused)
      keys += (keys.empty() ? "" : ", ") + k;
    return error{
        errc::bad_config,
        "--resume " + *opts.resume + ": " + (own ? "--set" : "the config") +
            " differs from the checkpoint's (" + c->folder + ") in " + keys +
            (own || opts.resume_force
                 ? ": what the run computes (the model, the rule, the data, "
                   "the clients) cannot change mid-run; only rounds, "
                   "deadlines, timeouts, ports and paths may"
                 : " (--resume-force lets rounds, deadlines, timeouts, ports "
                   "and paths change; or give --resume DIR alone, with "
                   "--set)")};
  }
  if (c->state.round >= cfg.server.num_global_epochs)
    return error{errc::bad_config,
                 "--resume " + *opts.resume + ": the checkpoint (" + c->folder +
                     ") is of the last round, " +
                     std::to_string(c->state.round) + ": the run is complete"};
  if (plan.async)
    return error{errc::bad_config,
                 "--resume: the asynchronous rules write no checkpoints"};
  log_line("server", "resuming from " + c->folder + ": round " +
                         std::to_string(c->state.round) + " of " +
                         std::to_string(cfg.server.num_global_epochs) +
                         " was the last completed");
  return std::make_shared<const stored_checkpoint>(std::move(*c));
}

/// The initial model of a resumed run: the checkpoint's.
result<void> resume_model(const stored_checkpoint& c, model_snapshot& initial) {
  if (c.layout != initial.layout)
    return error{errc::bad_config,
                 "--resume: the checkpoint's model (" + c.model_path +
                     ") is laid out otherwise than the config's model"};
  if (auto ok = read_model(c, initial.bytes); !ok)
    return ok.err();
  initial.version = c.state.model_version;
  initial.round = c.state.round;
  return {};
}

/// The rounds a resumed run's checkpoint `c` recorded, into `report`, and
/// where its scheduler and server go on from, into `so`.
result<void> resume_rounds(const std::shared_ptr<const stored_checkpoint>& c,
                           server_side_options& so, run_report& report) {
  auto rounds = rounds_from_json(c->state.report_rounds);
  if (!rounds)
    return rounds.err();
  report.rounds = std::move(*rounds);
  report.resumed_from = c->state.resumed_from;
  report.resumed_from.push_back(c->state.round);
  so.server.resumed_from = report.resumed_from;
  so.scheduler.first_round = c->state.round + 1;
  so.resume = c;
  return {};
}

/// The evaluator of `test` (null: none), stopping at its next batch once
/// `stop` is set.
result<std::shared_ptr<evaluator>>
evaluator_of(const config& cfg, dataset_ptr test, stop_flag stop) {
  if (!test)
    return std::shared_ptr<evaluator>{};
  auto e = make_evaluator(cfg.clients, std::move(test), cores());
  if (!e)
    return e.err();
  (*e)->stop_when(std::move(stop));
  return std::shared_ptr<evaluator>{std::move(*e)};
}

} // namespace

result<dataset_ptr> test_set_for(const config& cfg) {
  if (!cfg.server.evaluate || !has_evaluation(cfg.clients.model) ||
      cfg.data.dataset_name != "FashionMNIST")
    return dataset_ptr{};
  return load_images(cfg.data, "t10k");
}

result<aggregation_plan> plan_of(const config& cfg) {
  auto plan = plan_aggregation(cfg.server);
  if (!plan)
    return error{errc::bad_config, cfg.source + ": " + plan.err().message};
  return plan;
}

server_side_options options_from(const config& cfg,
                                 const aggregation_plan& plan,
                                 uint64_t chunk_bytes, bool remote) {
  const auto& sc = cfg.server;
  const auto& stream = sc.comm.stream;
  server_side_options so;
  so.plan = plan;
  so.rule = sc.rule;
  so.save_global_model = sc.save_global_model;
  // An upload that goes silent while its client is connected is rejected;
  // one whose client lost its connection has reconnect_grace_s to resume.
  so.idle_timeout = millis_of(stream.idle_timeout_s + stream.reconnect_grace_s);
  so.min_rate_bytes_per_s = stream.min_rate_bytes_per_s;
  so.rate_window = millis_of(stream.rate_window_for(chunk_bytes));
  auto& sch = so.scheduler;
  sch.num_clients = sc.num_clients;
  sch.num_rounds = sc.num_global_epochs;
  sch.clients_per_round = sc.clients_per_round;
  sch.sampling_seed = sc.sampling_seed;
  sch.min_clients = sc.min_clients;
  sch.registration_deadline = millis_of(sc.registration_deadline_s);
  sch.relays = sc.relays;
  auto& srv = so.server;
  srv.num_clients = sc.num_clients;
  srv.relays = sc.relays;
  srv.max_shard_ranks = sc.max_shard_ranks;
  srv.num_rounds = sc.num_global_epochs;
  srv.dp_noise_multiplier = sc.rule.dp_noise_multiplier;
  srv.dp_delta = sc.rule.dp_delta;
  if (sc.clients_per_round > 0)
    srv.dp_sample_rate =
        static_cast<double>(sc.clients_per_round) / sc.num_clients;
  srv.reconnect_grace = millis_of(stream.reconnect_grace_s);
  srv.fetch_silence = millis_of(stream.idle_timeout_s);
  if (remote) {
    if (sc.comm.auth.enabled)
      srv.tokens = sc.comm.auth.tokens;
    for (const auto& [id, token] : srv.tokens)
      sch.expected_clients.push_back(id);
    srv.require_certificate_name = sc.comm.use_ssl;
  }
  srv.compression = cfg.clients.compression;
  srv.chunk_bytes = chunk_bytes;
  srv.window = stream.window;
  srv.client_configs_yaml = client_configs_yaml(cfg);
  srv.terms = client_terms_of(cfg);
  // Relays' sums as int32 on this server's exact grid: where it sums on
  // it (a mean, in any memory mode, unmasked), over downloads that are the
  // model itself, in chunks of whole runs of 64 float32 elements
  // (docs/design.md, "Exact sums"); never where a chunk is changed before
  // its fold (norm_bound's scaling, kept tensors: refused with relays
  // anyway).
  srv.terms.grid_sums = plan.sums_on_grid() && !cfg.clients.compression.down &&
                        chunk_bytes % (64 * sizeof(float)) == 0 &&
                        sc.rule.norm_bound <= 0 && sc.rule.tensor_rules.empty();
  // ... and a streaming relay's chunks it could not give on the grid as
  // floats (Chunk.floatSums).
  srv.terms.chunk_float_sums = srv.terms.grid_sums;
  srv.federated_evaluation = sc.federated_evaluation.value_or(false);
  srv.evaluation_timeout = millis_of(stream.idle_timeout_s);
  srv.max_sample_size = sc.rule.max_sample_size;
  srv.secure_aggregation = sc.secure_aggregation;
  srv.secagg_phase_timeout = millis_of(stream.idle_timeout_s);
  srv.secagg_least_in_sum = sch.min_clients;
  srv.checkpoint = sc.checkpoint;
  srv.config_yaml = cfg.effective_yaml;
  return so;
}

result<server_side_options>
relay_children_options(server_side_options own, const msg::client_terms& terms,
                       const std::string& client_configs_yaml,
                       const std::string& source) {
  auto so = std::move(own);
  so.plan.partial_sums = true;
  so.server.relay = true;
  so.server.relay_window = so.plan.relay_cache_chunks > 0;
  so.scheduler.num_rounds = relay_rounds;
  so.server.client_configs_yaml = client_configs_yaml;
  // The children are told the parent's client_configs: the relay serves
  // downloads compressed as those say (uploads compressed are refused
  // with relays, at the root).
  auto parents = parse_client_configs(client_configs_yaml);
  if (!parents)
    return error{errc::bad_config,
                 "the parent's client_configs: " + parents.err().message};
  // A delta is decoded against the model its client received, which a
  // relay that averages in place overwrites.
  if (parents->compression.up && so.plan.in_place)
    return error{errc::bad_config,
                 source + ": server_configs.memory_mode: the parent's clients "
                          "compress their uploads (deltas), which a relay "
                          "decodes in memory_mode ram only"};
  so.server.compression = parents->compression;
  so.server.terms = terms;
  // Its own relays' sums on the grid where it folds them so, as its
  // parent does (the same model, so the same grid).
  so.server.terms.grid_sums = terms.grid_sums && so.plan.sums_on_grid() &&
                              so.server.chunk_bytes % (64 * sizeof(float)) == 0;
  so.server.terms.chunk_float_sums = so.server.terms.grid_sums;
  so.server.federated_evaluation = false;
  cap_streaming_silence(so, terms);
  return so;
}

result<server_side>
spawn_from_config(caf::actor_system& sys, const config& cfg, dataset_ptr test,
                  run_report* report, bool remote, const options& opts,
                  std::shared_ptr<metrics_log> metrics,
                  std::shared_ptr<live_status> live,
                  std::shared_ptr<transfer_progress> progress, stop_flag stop,
                  relay_upstream* relay, const summoning* drawn) {
  auto plan = plan_of(cfg);
  if (!plan)
    return plan.err();
  auto resume = checkpoint_to_resume(cfg, *plan, opts);
  if (!resume)
    return resume.err();
  auto initial = relay ? result<model_snapshot>{std::move(relay->initial)}
                       : initial_model(cfg.clients.model,
                                       global_model_file(*plan, ::getpid()));
  if (!initial)
    return initial.err();
  if (*resume)
    if (auto ok = resume_model(**resume, *initial); !ok)
      return ok.err();
  auto chunk_bytes =
      cfg.server.comm.chunk_bytes_for(initial->layout.total_bytes());
  if (!chunk_bytes)
    return error{errc::bad_config,
                 cfg.source + ": " + chunk_bytes.err().message};
  auto eval = evaluator_of(cfg, std::move(test), std::move(stop));
  if (!eval)
    return eval.err();
  auto so = options_from(cfg, *plan, *chunk_bytes, remote);
  so.server.report_path = opts.report_path.value_or("");
  so.server.report_html_path = opts.report_html_path.value_or("");
  so.server.print_rounds = !opts.inner_node;
  so.server.metrics = std::move(metrics);
  so.server.live = std::move(live);
  so.server.progress = std::move(progress);
  if (*resume)
    if (auto ok = resume_rounds(*resume, so, *report); !ok)
      return ok.err();
  if (relay) { // its parent's rounds, as many as the parent runs
    auto children = relay_children_options(
        so, relay->terms, relay->client_configs_yaml, cfg.source);
    if (!children)
      return children.err();
    note_silence_cut(so, *children);
    so = std::move(*children);
  }
  if (drawn) {
    so.scheduler.members = drawn->members;
    so.server.drawn = *drawn;
  }
  return spawn_server_side(sys, std::move(*initial), std::move(so),
                           std::move(*eval), report);
}

result<front_door> front_door_of(const comm_config& comm) {
  auto at = parse_endpoint(comm.server_uri);
  if (!at)
    return at.err();
  auto tls = tls_of(comm, true);
  if (!tls)
    return tls.err();
  return std::pair{std::move(*at), std::move(*tls)};
}

void warn_if_guessable_tokens(const config& cfg) {
  const auto& auth = cfg.server.comm.auth;
  if (!auth.enabled)
    return;
  std::string ids;
  for (const auto& [id, token] : auth.tokens)
    if (token.size() < min_token_chars)
      ids += (ids.empty() ? "" : ", ") + id;
  if (!ids.empty())
    log_line(log_level::warning, "server",
             "the tokens of " + ids + " are shorter than " +
                 std::to_string(min_token_chars) +
                 " characters: a right token is admitted even while its "
                 "host's failed Hellos are throttled, so a token must be too "
                 "many bits to guess (128 random bits: deploy/make-certs.sh "
                 "writes them)");
}

void warn_if_trimming_nothing(const config& cfg) {
  const auto& sc = cfg.server;
  if (sc.aggregator != server_rule::trimmed_mean)
    return;
  auto k = sc.clients_per_round ? sc.clients_per_round : sc.num_clients;
  auto trimmed = static_cast<uint32_t>(sc.rule.trim_ratio * k);
  if (trimmed == 0)
    log_line(log_level::warning, "server",
             "TrimmedMeanAggregator with trim_ratio " +
                 std::to_string(sc.rule.trim_ratio) + " trims nothing of " +
                 std::to_string(k) +
                 " clients' values (floor(trim_ratio x clients) = 0): "
                 "rounds are plain means, which one client can steer; raise "
                 "trim_ratio to at least " +
                 std::to_string(1.0 / k) + " or use MedianAggregator");
}

} // namespace fedcaf::cli
