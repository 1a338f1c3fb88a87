// Wiring: main builds the actor system, spawns and wires the actors, waits,
// and tears down in reverse order. No globals.

#include "run.hpp"
#include "console_progress.hpp"
#include "http_view.hpp"
#include "interrupts.hpp"
#include "relay.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <memory>
#include <mutex>
#include <thread>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "actors/client.hpp"
#include "actors/gateway.hpp"
#include "actors/messages.hpp"
#include "actors/remote.hpp"
#include "actors/server_side.hpp"
#include "fedcaf/aggregation_plan.hpp"
#include "fedcaf/checkpoint.hpp"
#include "fedcaf/config.hpp"
#include "fedcaf/dummy_trainer.hpp"
#include "fedcaf/fashion_mnist.hpp"
#include "fedcaf/live_page.hpp"
#include "fedcaf/log.hpp"
#include "fedcaf/memory_probe.hpp"
#include "fedcaf/models.hpp"
#include "fedcaf/tensor_data.hpp"
#include "fedcaf/tls.hpp"
#include "fedcaf/trainer.hpp"
#include "protocol/network.hpp"

namespace fedcaf::cli {

namespace {

using dataset_ptr = std::shared_ptr<const image_set>;

/// Prints "fedcaf: <why>" (into the --log-file too) and returns exit code 1.
int failed(const std::string& why) {
  std::fprintf(stderr, "fedcaf: %s\n", why.c_str());
  log_to_file_only(log_level::error, "fedcaf", why);
  return 1;
}

result<config> load_any(const options& opts, config_role role) {
  if (opts.config_path)
    return load_config_file(*opts.config_path, role, opts.overrides);
  if (role != config_role::simulate)
    return error{errc::bad_config, "this command needs -c CONFIG"};
  return load_config(embedded_simulate_yaml(),
                     "<embedded configs/simulate.yaml>", role, opts.overrides);
}

/// Loads the config; APPFL keys fedcaf does not use get one warning that
/// lists them all, or (--strict) refuse it.
result<config> load(const options& opts, config_role role) {
  auto cfg = load_any(opts, role);
  if (!cfg || cfg->ignored_keys.empty())
    return cfg;
  if (opts.strict)
    return error{errc::bad_config,
                 cfg->source + ": keys fedcaf does not use (--strict): " +
                     ignored_keys_text(*cfg)};
  std::fprintf(stderr, "fedcaf: %s\n", ignored_keys_warning(*cfg).c_str());
  return cfg;
}

result<dataset_ptr> load_images(const data_config& d, const char* prefix) {
  auto set = read_fashion_mnist(d.dataset_path, prefix);
  if (!set)
    return set.err();
  return dataset_ptr{std::make_shared<image_set>(std::move(*set))};
}

uint32_t cores() {
  return std::max(1u, std::thread::hardware_concurrency());
}

using samples_ptr = std::shared_ptr<const tensor_set>;

/// A split of the data set (train, or test), read on first use and shared
/// by every client of the process (clients with the dummy trainer never
/// read it; the test split is read only for federated evaluation). Null
/// for a test split the tensors dataset does not name.
/// Thread-safety: get() may be called from several actors at once.
class lazy_data_set {
public:
  lazy_data_set(data_config data, bool train)
      : data_(std::move(data)), train_(train) {}

  result<samples_ptr> get() {
    std::lock_guard<std::mutex> guard{mtx_};
    if (!read_ && !(data_.dataset_name == "tensors" && !train_ &&
                    data_.test_features.empty())) {
      auto loaded = read_data_set(data_, train_);
      if (!loaded)
        return loaded.err();
      set_ = std::make_shared<tensor_set>(std::move(*loaded));
    }
    read_ = true;
    return set_;
  }

private:
  std::mutex mtx_;
  data_config data_;
  bool train_;
  bool read_ = false;
  samples_ptr set_;
};

/// The training and test splits a process's clients share.
struct lazy_data {
  explicit lazy_data(const data_config& d) : train(d, true), test(d, false) {}
  lazy_data_set train;
  lazy_data_set test;
};

/// Client `index`'s part of `split` (none when the split is null).
result<void> take_part(lazy_data_set& split, const data_config& data,
                       uint32_t index, samples_ptr& set,
                       std::vector<uint32_t>& part) {
  auto got = split.get();
  if (!got)
    return got.err();
  if (!*got)
    return {};
  auto idx = partition_set(**got, data, index);
  if (!idx)
    return idx.err();
  set = *got;
  part = std::move(*idx);
  return {};
}

/// Client `index`'s training data, and its test data iff it evaluates.
result<client_data> data_of(lazy_data& sets, const data_config& data,
                            uint32_t index, bool evaluates) {
  client_data cd;
  if (auto ok = take_part(sets.train, data, index, cd.train, cd.train_indices);
      !ok)
    return ok.err();
  if (evaluates)
    if (auto ok = take_part(sets.test, data, index, cd.test, cd.test_indices);
        !ok)
      return ok.err();
  return cd;
}

/// Client `index`'s trainer for the server's client_configs `cc`: the
/// dummy trainer, or LibTorch on its partition of the data.
result<std::unique_ptr<trainer>>
make_local_trainer(lazy_data& sets, const data_config& data, uint32_t index,
                   uint32_t num_threads, const client_configs& cc) {
  if (cc.train.trainer == trainer_kind::python)
    return error{errc::bad_config,
                 "this server's clients train with their own Python code "
                 "(train_configs.trainer: python): run the Python client "
                 "(import fedcaf; see examples/python/fashion_mnist.py), "
                 "not fedcaf client"};
  if (cc.train.trainer == trainer_kind::dummy) {
    auto layout = model_layout(cc.model);
    if (!layout)
      return layout.err();
    dummy_storage storage;
    if (cc.train.storage == model_storage::disk)
      storage.file = cc.train.storage_dir + "/fedcaf-client" +
                     std::to_string(index) + "-" + std::to_string(::getpid()) +
                     ".bin";
    auto add = cc.train.add * (cc.train.add_by_index ? index + 1 : 1);
    return make_dummy_trainer(std::move(*layout), static_cast<float>(add), 1,
                              storage, static_cast<float>(cc.train.noise),
                              index);
  }
  auto cd = data_of(sets, data, index, cc.train.federated_evaluation);
  if (!cd)
    return cd.err();
  return make_trainer(cc, std::move(*cd), data.seed + index, num_threads);
}

/// Builds client `index`'s trainer once the server's client_configs are
/// known: the dummy trainer, or LibTorch on its partition of the data. Its
/// training stops at the next step once `stop` is set (null: never).
trainer_factory local_trainer(std::shared_ptr<lazy_data> sets, data_config data,
                              uint32_t index, uint32_t num_threads,
                              stop_flag stop) {
  return [sets, data, index, num_threads,
          stop](const client_configs& cc,
                const msg::welcome&) -> result<std::unique_ptr<trainer>> {
    auto made = make_local_trainer(*sets, data, index, num_threads, cc);
    if (made)
      (*made)->stop_when(stop);
    return made;
  };
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

/// Returns the test set iff the server will evaluate, else null.
result<dataset_ptr> test_set_for(const config& cfg) {
  if (!cfg.server.evaluate || !has_evaluation(cfg.clients.model) ||
      cfg.data.dataset_name != "FashionMNIST")
    return dataset_ptr{};
  return load_images(cfg.data, "t10k");
}

/// Keys a resumed run may change with --resume-force: when and where, not
/// what it computes.
bool may_change(const std::string& key) {
  for (const char* part :
       {"deadline", "timeout", "server_uri", "reconnect_grace_s",
        "server_configs.checkpoint.", "save_global_model", "storage_dir",
        "logging_output", "rate_window_s", "min_rate_bytes_per_s"})
    if (key.find(part) != std::string::npos)
      return true;
  return false;
}

/// The checkpoint `opts.resume` names, if any, checked against `cfg`: the
/// same config (keys that may change aside under --resume-force), rounds
/// left to run.
result<std::shared_ptr<const stored_checkpoint>>
checkpoint_to_resume(const config& cfg, const options& opts) {
  if (!opts.resume)
    return std::shared_ptr<const stored_checkpoint>{};
  auto c = latest_checkpoint(*opts.resume);
  if (!c)
    return c.err();
  std::vector<std::string> refused;
  for (const auto& key :
       differing_keys(c->state.config_yaml, cfg.effective_yaml))
    if (!opts.resume_force || !may_change(key))
      refused.push_back(key);
  if (!refused.empty()) {
    std::string keys;
    for (const auto& k : refused)
      keys += (keys.empty() ? "" : ", ") + k;
    return error{errc::bad_config,
                 "--resume " + *opts.resume +
                     ": the config differs from the "
                     "checkpoint's (" +
                     c->folder + ") in " + keys +
                     (opts.resume_force
                          ? " (only deadlines, timeouts, ports and paths may "
                            "change)"
                          : " (--resume-force lets deadlines, timeouts, ports "
                            "and paths change)")};
  }
  if (c->state.round >= cfg.server.num_global_epochs)
    return error{errc::bad_config,
                 "--resume " + *opts.resume + ": the checkpoint (" + c->folder +
                     ") is of the last round, " +
                     std::to_string(c->state.round) + ": the run is complete"};
  if (cfg.server.scheduler == "AsyncScheduler")
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

/// Spawns the server side of `cfg`; its evaluation stops at the next batch
/// once `stop` is set.
result<server_side>
spawn_from_config(caf::actor_system& sys, const config& cfg, dataset_ptr test,
                  run_report* report, bool remote, const options& opts,
                  std::shared_ptr<metrics_log> metrics,
                  std::shared_ptr<live_status> live,
                  std::shared_ptr<transfer_progress> progress, stop_flag stop,
                  relay_upstream* relay = nullptr) {
  auto plan = plan_aggregation(cfg.server);
  if (!plan)
    return error{errc::bad_config, cfg.source + ": " + plan.err().message};
  std::string storage_file;
  if (plan->memory_mode == memory_mode::disk)
    storage_file = global_model_file(*plan, ::getpid());
  auto resume = checkpoint_to_resume(cfg, opts);
  if (!resume)
    return resume.err();
  auto initial = relay ? result<model_snapshot>{std::move(relay->initial)}
                       : initial_model(cfg.clients.model, storage_file);
  if (!initial)
    return initial.err();
  if (*resume)
    if (auto ok = resume_model(**resume, *initial); !ok)
      return ok.err();
  const auto& comm = cfg.server.comm;
  auto chunk_bytes = comm.chunk_bytes_for(initial->layout.total_bytes());
  if (!chunk_bytes)
    return error{errc::bad_config,
                 cfg.source + ": " + chunk_bytes.err().message};
  std::shared_ptr<evaluator> eval;
  if (test) {
    auto e = make_evaluator(cfg.clients, std::move(test), cores());
    if (!e)
      return e.err();
    (*e)->stop_when(std::move(stop));
    eval = std::move(*e);
  }
  server_side_options so;
  so.scheduler.num_clients = cfg.server.num_clients;
  so.scheduler.num_rounds = cfg.server.num_global_epochs;
  so.scheduler.clients_per_round = cfg.server.clients_per_round;
  so.scheduler.sampling_seed = cfg.server.sampling_seed;
  so.plan = *plan;
  so.server.dp_noise_multiplier = cfg.server.rule.dp_noise_multiplier;
  so.server.dp_delta = cfg.server.rule.dp_delta;
  if (cfg.server.clients_per_round > 0)
    so.server.dp_sample_rate =
        static_cast<double>(cfg.server.clients_per_round) /
        cfg.server.num_clients;
  so.rule = cfg.server.rule;
  so.scheduler.min_clients = cfg.server.min_clients;
  so.server.reconnect_grace = millis_of(comm.stream.reconnect_grace_s);
  // An upload that goes silent while its client is connected is rejected;
  // one whose client lost its connection has reconnect_grace_s to resume.
  so.idle_timeout =
      millis_of(comm.stream.idle_timeout_s + comm.stream.reconnect_grace_s);
  so.min_rate_bytes_per_s = comm.stream.min_rate_bytes_per_s;
  so.rate_window = millis_of(comm.stream.rate_window_for(*chunk_bytes));
  so.scheduler.registration_deadline =
      millis_of(cfg.server.registration_deadline_s);
  if (remote) {
    if (comm.auth.enabled)
      so.server.tokens = comm.auth.tokens;
    for (const auto& [id, token] : so.server.tokens)
      so.scheduler.expected_clients.push_back(id);
    so.server.require_certificate_name = comm.use_ssl;
  }
  so.server.num_clients = cfg.server.num_clients;
  so.server.num_rounds = cfg.server.num_global_epochs;
  so.server.compression = cfg.clients.compression;
  so.server.chunk_bytes = *chunk_bytes;
  so.server.window = comm.stream.window;
  so.server.client_configs_yaml = client_configs_yaml(cfg);
  so.server.terms = client_terms_of(cfg);
  so.server.report_path = opts.report_path.value_or("");
  so.server.report_html_path = opts.report_html_path.value_or("");
  so.server.metrics = std::move(metrics);
  so.server.live = std::move(live);
  so.server.progress = std::move(progress);
  so.server.federated_evaluation =
      cfg.server.federated_evaluation.value_or(false);
  so.server.evaluation_timeout = millis_of(comm.stream.idle_timeout_s);
  so.server.max_sample_size = cfg.server.rule.max_sample_size;
  so.server.secure_aggregation = cfg.server.secure_aggregation;
  so.server.secagg_phase_timeout = millis_of(comm.stream.idle_timeout_s);
  so.save_global_model = cfg.server.save_global_model;
  so.server.checkpoint = cfg.server.checkpoint;
  so.server.config_yaml = cfg.effective_yaml;
  if (const auto& c = *resume) {
    auto rounds = rounds_from_json(c->state.report_rounds);
    if (!rounds)
      return rounds.err();
    report->rounds = std::move(*rounds);
    report->resumed_from = c->state.resumed_from;
    report->resumed_from.push_back(c->state.round);
    so.server.resumed_from = report->resumed_from;
    so.scheduler.first_round = c->state.round + 1;
    so.resume = c;
  }
  so.scheduler.relays = cfg.server.relays;
  if (relay) { // its parent's rounds, as many as the parent runs
    so.plan.partial_sums = true;
    so.server.relay = true;
    so.scheduler.num_rounds = so.server.num_rounds = relay_rounds;
    so.server.client_configs_yaml = relay->client_configs_yaml;
    // The children are told the parent's client_configs: the relay serves
    // downloads compressed as those say (uploads compressed are refused
    // with relays, at the root).
    auto parents = parse_client_configs(relay->client_configs_yaml);
    if (!parents)
      return error{errc::bad_config,
                   "the parent's client_configs: " + parents.err().message};
    if (parents->compression.up && so.plan.memory_mode != memory_mode::ram)
      return error{errc::bad_config,
                   cfg.source +
                       ": server_configs.memory_mode: the parent's clients "
                       "compress their uploads (deltas), which a relay "
                       "decodes in memory_mode ram only"};
    so.server.compression = parents->compression;
    so.server.terms = relay->terms;
    so.server.federated_evaluation = false;
  }
  return spawn_server_side(sys, std::move(*initial), std::move(so),
                           std::move(eval), report);
}

/// Blocks until every actor in `actors` has terminated.
template <class Handle>
void await_all(caf::actor_system& sys, const std::vector<Handle>& actors) {
  caf::scoped_actor self{sys};
  for (const auto& a : actors)
    self->monitor(a);
  for (size_t i = 0; i < actors.size(); ++i)
    self->receive([](const caf::down_msg&) {});
}

/// Refuses a --report path that cannot be written, before the run.
result<void> writable_report(const options& opts) {
  if (!opts.report_path)
    return {};
  return check_report_path(*opts.report_path);
}

/// Before a server side run: refuses a --report or --report-html path
/// that cannot be written, and opens the --metrics file (null without
/// --metrics).
result<std::shared_ptr<metrics_log>> open_outputs(const options& opts) {
  if (auto ok = writable_report(opts); !ok)
    return ok.err();
  if (opts.report_html_path)
    if (auto ok = check_writable(*opts.report_html_path, "HTML report"); !ok)
      return ok.err();
  if (!opts.metrics_path)
    return std::shared_ptr<metrics_log>{};
  return metrics_log::open(*opts.metrics_path);
}

/// The live view (--http) and what it shows: the status is kept iff
/// --http or --report-html asks for it, the view runs iff --http does.
struct live_view {
  std::shared_ptr<live_status> status;
  std::unique_ptr<http_view> http;
};

/// What the live view states of `cfg`'s run.
live_run live_run_of(const config& cfg, const char* role) {
  const auto& sc = cfg.server;
  const auto& z = cfg.clients.compression;
  live_run r;
  r.role = role;
  r.aggregator = aggregator_name(sc.aggregator);
  r.scheduler = sc.scheduler;
  // A relay runs its parent's rounds, as many as there are.
  r.num_rounds = std::string_view{role} == "relay" ? 0 : sc.num_global_epochs;
  r.num_clients = sc.num_clients;
  r.async = sc.scheduler == "AsyncScheduler";
  r.federated_evaluation = sc.federated_evaluation.value_or(false);
  r.secure_aggregation = sc.secure_aggregation.enabled;
  r.upload_encoding = z.upload_encoding();
  r.download_encoding = z.down ? to_string(z.method) : "none";
  r.zfp_tolerance = z.zfp_tolerance;
  r.dp_noise_multiplier = sc.rule.dp_noise_multiplier;
  r.dp_delta = sc.rule.dp_delta;
  r.dp_sgd = cfg.clients.train.dp.mode != dp_sgd_mode::none;
  r.relays = sc.relays;
  return r;
}

/// Descriptors the run keeps for itself, out of the live view's reach: one
/// per client and per connection not yet welcomed on the fedcaf port, and
/// 64 for the rest (model, report, checkpoint and metrics files, logs,
/// CAF's multiplexer, the libraries LibTorch's plugin maps).
uint64_t reserved_descriptors(const config& cfg) {
  return uint64_t{cfg.server.num_clients} +
         cfg.server.comm.stream.max_unauthenticated + 64;
}

result<live_view> start_view(const options& opts, const config& cfg,
                             const char* role) {
  live_view v;
  if (!opts.http && !opts.report_html_path)
    return v;
  v.status = std::make_shared<live_status>();
  v.status->set_run(live_run_of(cfg, role));
  if (!opts.http)
    return v;
  auto h = http_view::start(*opts.http, v.status, reserved_descriptors(cfg));
  if (!h)
    return h.err();
  v.http = std::move(*h);
  log_line(role, "live view at " + v.http->url() + " (at most " +
                     std::to_string(v.http->max_connections()) +
                     " connections)");
  return v;
}

/// An empty report of a server side run from `cfg`.
run_report report_for(const config& cfg, const char* role) {
  run_report r;
  r.role = role;
  r.aggregator = aggregator_name(cfg.server.aggregator);
  r.scheduler = cfg.server.scheduler;
  r.config_yaml = cfg.effective_yaml; // written after every round
  return r;
}

/// SIGINT or SIGTERM ends the run: the server stops it (clients are told),
/// then training and evaluation in this process stop at their next step
/// (`stop`), and the report says "interrupted". The server hears first, so
/// that a client that ends its training early is not taken for a failure.
void stop_on_interrupt(interrupt_watch& watch, const round_host& server,
                       std::shared_ptr<std::atomic<bool>> stop) {
  watch.on_interrupt([server, stop](int sig) {
    caf::anon_send(server, stop_atom::value,
                   std::string{"interrupted by "} + signal_name(sig));
    stop->store(true);
  });
}

void note_interrupt(const interrupt_watch& watch, run_report& report) {
  if (watch.signal() == 0)
    return;
  report.status = "interrupted";
  if (report.failure.empty())
    report.failure =
        std::string{"interrupted by "} + signal_name(watch.signal());
}

/// The live view's final state: how the run ended, shown by the view and
/// written to --report-html. Returns an error iff that cannot be written.
result<void> show_end(const options& opts, const run_report& report,
                      const live_view& view) {
  if (!view.status)
    return {};
  view.status->ended(run_status(report), report.failure);
  if (!opts.report_html_path)
    return {};
  return write_static_page(view.status->snapshot(), *opts.report_html_path);
}

/// Writes the report and the HTML page if asked, prints the final
/// accuracy, returns the exit code.
int write_outputs(const options& opts, run_report& report, const config& cfg,
                  const live_view& view) {
  report.config_yaml = cfg.effective_yaml;
  report.peak_rss_bytes = sample_memory().peak_rss_bytes;
  if (opts.report_path)
    if (auto ok = write_report(report, *opts.report_path); !ok)
      return failed(to_string(ok.err()));
  if (auto ok = show_end(opts, report, view); !ok)
    return failed(to_string(ok.err()));
  if (!report.failure.empty()) // may name a peer's text: escaped
    return failed(printable_line(report.failure));
  if (report.rounds.empty() || !report.rounds.back().test_accuracy)
    return 0;
  const auto& last = report.rounds.back();
  if (last.client_metrics && last.client_metrics->find("accuracy") ==
                                 last.test_accuracy) // the clients' figure
    std::printf("final test accuracy: %.4f (the clients' evaluation, %llu "
                "samples)\n",
                *last.test_accuracy,
                static_cast<unsigned long long>(last.client_metrics->samples));
  else
    std::printf("final test accuracy: %.4f (%zu test images)\n",
                *last.test_accuracy, size_t{10000});
  return 0;
}

/// As write_outputs; then, unless interrupted, a page open on the live
/// view gets the final state before the process exits (at most 1.5 s).
int conclude(const options& opts, run_report& report, const config& cfg,
             const live_view& view) {
  auto code = write_outputs(opts, report, cfg, view);
  if (view.http && report.status != "interrupted")
    view.http->keep_for_open_pages(std::chrono::milliseconds{1500});
  return code;
}

} // namespace

namespace {

/// Where a server side listens (server_uri) and its TLS context (null:
/// plain TCP).
result<std::pair<endpoint, std::shared_ptr<tls_context>>>
front_door_of(const comm_config& comm) {
  auto at = parse_endpoint(comm.server_uri);
  if (!at)
    return at.err();
  auto tls = tls_of(comm, true);
  if (!tls)
    return tls.err();
  return std::pair{std::move(*at), std::move(*tls)};
}

} // namespace

/// TrimmedMean trims floor(trim_ratio k) values of k from each end: with
/// too few clients a round trims nothing and averages like FedAvg.
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

/// Part `r` (from 0) of `total` shared among `parts` as evenly as can be.
uint32_t share(uint32_t total, uint32_t parts, uint32_t r) {
  return total / parts + (r < total % parts ? 1 : 0);
}

/// At least 1, and `min` of `of` scaled to `part` of it, rounded up.
uint32_t scaled_min(uint32_t min, uint32_t of, uint32_t part) {
  return std::max<uint32_t>(
      1, static_cast<uint32_t>((uint64_t{min} * part + of - 1) / of));
}

/// `simulate` of a tree (server_configs.simulated_relays R): the root sees
/// R clients, Relay1..R, all in every round; relay r runs its block of
/// consecutive clients (Client<i>, partition i-1, as in a flat run), and
/// samples its share of clients_per_round. Each relay is what `fedcaf
/// relay` runs, in this process: its upstream client on a thread of its
/// own (its training waits for its children's round), its children's side
/// spawned by the first round, its clients beside it.
class simulated_tree {
public:
  simulated_tree(const config& cfg, const options& opts,
                 std::shared_ptr<lazy_data> sets, stop_flag stop,
                 uint32_t threads_per_client,
                 std::vector<run_report>& client_reports)
      : cfg_(cfg), opts_(opts), sets_(std::move(sets)), stop_(std::move(stop)),
        threads_(threads_per_client), client_reports_(&client_reports),
        relays_(cfg.server.simulated_relays) {
    opts_.report_path.reset(); // the root's, not the relays'
    opts_.report_html_path.reset();
  }

  /// The root's config: R clients, the relays, each weighing its block.
  static config root_config(const config& cfg) {
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

  /// Spawns the relays' upstream clients, registering with `root`.
  void spawn(caf::actor_system& sys, const server_actor& root) {
    for (uint32_t r = 0; r < relays_.size(); ++r) {
      client_options co{"Relay" + std::to_string(r + 1),
                        millis_of(cfg_.server.comm.stream.idle_timeout_s)};
      co.own_thread = true;
      auto storage = cfg_.server.memory_mode == memory_mode::disk
                         ? cfg_.server.storage_dir
                         : std::string{};
      relays_[r].upstream =
          spawn_client(sys, root, co,
                       relay_trainers(
                           [this, r, &sys](relay_upstream up) {
                             return spawn_side(sys, r, std::move(up));
                           },
                           storage),
                       &relays_[r].upstream_report);
    }
  }

  /// Once the root's run is over: ends every relay's children's side and
  /// waits for all of its actors. Returns the first failure, or "".
  std::string finish(caf::actor_system& sys, const std::string& reason) {
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
        t.side->shut_down(sys);
      }
      for (const auto* r : {&t.upstream_report, &t.side_report})
        if (failure.empty() && !r->failure.empty())
          failure = r->node + ": " + r->failure;
      t = relay{};
    }
    return failure;
  }

private:
  struct relay {
    client_actor upstream;
    run_report upstream_report, side_report;
    std::optional<server_side> side;
    std::vector<client_actor> children;
  };

  /// Relay r's config: FedAvg of its block, sums only, its share of the
  /// round's clients.
  config relay_config(uint32_t r) const {
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
    s.checkpoint = {};
    s.save_global_model.clear();
    c.source = cfg_.source + " (Relay" + std::to_string(r + 1) + ")";
    return c;
  }

  result<relay_side> spawn_side(caf::actor_system& sys, uint32_t r,
                                relay_upstream up) {
    std::lock_guard<std::mutex> lock{spawning_};
    if (closing_)
      return error{errc::internal, "the run is ending"};
    auto c = relay_config(r);
    auto layout = up.initial.layout;
    auto chunk = c.server.comm.chunk_bytes_for(layout.total_bytes());
    if (!chunk)
      return error{errc::bad_config, c.source + ": " + chunk.err().message};
    auto& t = relays_[r];
    auto s = spawn_from_config(sys, c, nullptr, &t.side_report, false, opts_,
                               nullptr, nullptr, nullptr, stop_, &up);
    if (!s)
      return s.err();
    t.side = *s;
    auto n = static_cast<uint32_t>(relays_.size());
    uint32_t first = 0;
    for (uint32_t i = 0; i < r; ++i)
      first += share(cfg_.server.num_clients, n, i);
    for (uint32_t i = first; i < first + c.server.num_clients; ++i) {
      client_options co{"Client" + std::to_string(i + 1),
                        millis_of(c.server.comm.stream.idle_timeout_s)};
      co.hold_model = c.server.clients_per_round == 0;
      t.children.push_back(
          spawn_client(sys, s->server, co,
                       local_trainer(sets_, cfg_.data, i, threads_, stop_),
                       &(*client_reports_)[i]));
    }
    return relay_side{s->server, layout, &sys, *chunk};
  }

  const config& cfg_;
  options opts_;
  std::shared_ptr<lazy_data> sets_;
  stop_flag stop_;
  uint32_t threads_;
  std::vector<run_report>* client_reports_;
  std::mutex spawning_; ///< spawn_side runs on the relays' threads
  bool closing_ = false;
  std::vector<relay> relays_;
};

int run_simulate(const options& opts) {
  auto cfg = load(opts, config_role::simulate);
  if (!cfg)
    return failed(to_string(cfg.err()));
  auto metrics = open_outputs(opts);
  if (!metrics)
    return failed(to_string(metrics.err()));
  interrupt_watch watch;
  // Before the data is read: a --http address that cannot be bound stops
  // the command at once.
  auto view = start_view(opts,
                         cfg->server.simulated_relays > 0
                             ? simulated_tree::root_config(*cfg)
                             : *cfg,
                         "simulate");
  if (!view)
    return failed(to_string(view.err()));
  auto stop = std::make_shared<std::atomic<bool>>(false);
  warn_if_trimming_nothing(*cfg);
  auto test = test_set_for(*cfg);
  if (!test)
    return failed(to_string(test.err()));
  auto sets = std::make_shared<lazy_data>(cfg->data);
  // The clients train with LibTorch on the training split: read and check
  // it now, so that a bad file stops the command before the run starts.
  if (cfg->clients.train.trainer == trainer_kind::vanilla)
    if (auto train = sets->train.get(); !train)
      return failed(to_string(train.err()));
  auto n = cfg->server.num_clients;
  auto per_round = cfg->server.clients_per_round
                       ? std::min(n, cfg->server.clients_per_round)
                       : n;
  auto threads_per_client = std::max(1u, cores() / per_round);
  auto report = report_for(*cfg, "simulate");
  std::vector<run_report> client_reports(n);
  auto relays = cfg->server.simulated_relays;
  std::optional<simulated_tree> tree;
  if (relays > 0)
    tree.emplace(*cfg, opts, sets, stop, threads_per_client, client_reports);
  {
    auto sc = make_system_config(per_round + 3, false);
    caf::actor_system sys{sc};
    console_progress console;
    auto side = spawn_from_config(
        sys, tree ? simulated_tree::root_config(*cfg) : *cfg, *test, &report,
        false, opts, *metrics, view->status, console.meter(), stop);
    if (!side)
      return failed(to_string(side.err()));
    stop_on_interrupt(watch, side->server, stop);
    std::vector<client_actor> clients;
    if (tree)
      tree->spawn(sys, side->server);
    for (uint32_t i = 0; i < n && !tree; ++i) {
      client_options co;
      co.client_id = "Client" + std::to_string(i + 1);
      co.idle_timeout = millis_of(cfg->server.comm.stream.idle_timeout_s);
      co.hold_model = per_round == n; // sampled: no model between rounds
      clients.push_back(spawn_client(
          sys, side->server, co,
          local_trainer(sets, cfg->data, i, threads_per_client, stop),
          &client_reports[i]));
    }
    if (tree)
      std::printf("simulating %u clients under %u relays, %u rounds\n", n,
                  relays, cfg->server.num_global_epochs);
    else
      std::printf("simulating %u clients, %u rounds\n", n,
                  cfg->server.num_global_epochs);
    await_all(sys, std::vector<server_actor>{side->server});
    await_all(sys, clients);
    watch.on_interrupt({});
    if (tree)
      if (auto why = tree->finish(sys, report.failure);
          !why.empty() && report.failure.empty())
        report.failure = why;
    side->shut_down(sys);
  }
  note_interrupt(watch, report);
  for (const auto& c : client_reports) {
    report.peak_in_flight = std::max(report.peak_in_flight, c.peak_in_flight);
    if (report.failure.empty() && !c.failure.empty())
      report.failure = c.node + ": " + c.failure;
  }
  report.clients = std::move(client_reports);
  return conclude(opts, report, *cfg, *view);
}

int run_server(const options& opts) {
  tune_malloc_for_streams();
  auto cfg = load(opts, config_role::server);
  if (!cfg)
    return failed(to_string(cfg.err()));
  auto metrics = open_outputs(opts);
  if (!metrics)
    return failed(to_string(metrics.err()));
  interrupt_watch watch;
  warn_if_trimming_nothing(*cfg);
  if (cfg->server.round_deadline_s == 0 &&
      cfg->server.scheduler == "SyncScheduler")
    log_line("server", "note: no scheduler_kwargs.round_deadline_s: a "
                       "registered client that never offers holds each round "
                       "open until it is dropped");
  const auto& comm = cfg->server.comm;
  if (!cfg->server.relays.empty() && !comm.auth.enabled && !comm.use_ssl)
    log_line(log_level::warning, "server",
             "server_configs.relays without tokens or TLS: anyone who "
             "reaches the server can register as a relay's id (and weigh "
             "what it may); set use_authenticator or use_ssl");
  auto door = front_door_of(comm);
  if (!door)
    return failed(to_string(door.err()));
  const auto& at = door->first;
  const auto& tls = door->second;
  // Before the test set is read: a --http address that cannot be bound
  // stops the command at once.
  auto view = start_view(opts, *cfg, "server");
  if (!view)
    return failed(to_string(view.err()));
  auto test = test_set_for(*cfg);
  if (!test)
    return failed(to_string(test.err()));
  auto stop = std::make_shared<std::atomic<bool>>(false);
  auto report = report_for(*cfg, "server");
  {
    auto sc = make_system_config(4, true);
    caf::actor_system sys{sc};
    console_progress console;
    auto side =
        spawn_from_config(sys, *cfg, *test, &report, true, opts, *metrics,
                          view->status, console.meter(), stop);
    if (!side)
      return failed(to_string(side.err()));
    stop_on_interrupt(watch, side->server, stop);
    auto gate =
        listen(sys, side->server, at, limits_of(comm), tls, side->refusals);
    if (!gate) {
      side->shut_down(sys);
      caf::anon_send_exit(side->server, caf::exit_reason::user_shutdown);
      return failed(to_string(gate.err()));
    }
    log_line("server",
             "listening on " + at.host + ":" + std::to_string(gate->port) +
                 (comm.use_ssl ? " (TLS, client certificates required)"
                               : " (plain TCP)") +
                 (comm.auth.enabled ? ", tokens required" : "") +
                 ", waiting for " + std::to_string(cfg->server.num_clients) +
                 " clients");
    await_all(sys, std::vector<server_actor>{side->server});
    watch.on_interrupt({});
    caf::anon_send_exit(gate->acceptor, caf::exit_reason::user_shutdown);
    side->shut_down(sys);
  }
  note_interrupt(watch, report);
  return conclude(opts, report, *cfg, *view);
}

int run_client(const options& opts) {
  tune_malloc_for_streams();
  auto cfg = load(opts, config_role::client);
  if (!cfg)
    return failed(to_string(cfg.err()));
  if (auto ok = writable_report(opts); !ok)
    return failed(to_string(ok.err()));
  const auto& cc = cfg->client;
  auto sets = std::make_shared<lazy_data>(cc.data);
  run_report report;
  {
    console_progress console;
    run_remote_client(cc,
                      local_trainer(sets, cc.data, cc.data.client_index,
                                    cc.num_threads, nullptr),
                      report, {}, nullptr, console.meter());
  }
  return conclude(opts, report, *cfg, live_view{});
}

/// A relay's simulated child `index` (server_configs.simulated_clients).
client_options simulated_child(const relay_files& files, uint32_t index) {
  const auto& down = files.server.server;
  client_options co;
  co.client_id =
      files.client.client.client_id + "-Client" + std::to_string(index + 1);
  co.idle_timeout = millis_of(down.comm.stream.idle_timeout_s);
  co.hold_model =
      down.clients_per_round == 0 || down.clients_per_round >= down.num_clients;
  return co;
}

int run_relay(const options& opts) {
  tune_malloc_for_streams();
  if (!opts.config_path)
    return failed("relay needs -c FILE (client_id, comm_configs for its "
                  "parent; server_configs for its children)");
  auto files = load_relay_file(*opts.config_path, opts.overrides);
  if (!files)
    return failed(to_string(files.err()));
  auto metrics = open_outputs(opts);
  if (!metrics)
    return failed(to_string(metrics.err()));
  const auto& down = files->server;
  // The live view (--http) and --report-html show the children's rounds.
  auto view = start_view(opts, down, "relay");
  if (!view)
    return failed(to_string(view.err()));
  const auto& comm = down.server.comm;
  if (down.server.round_deadline_s == 0 ||
      down.server.registration_deadline_s == 0)
    log_line(log_level::warning, "relay",
             "no scheduler_kwargs.round_deadline_s or "
             "registration_deadline_s: a child that never registers or never "
             "offers holds the relay's round, and its parent's, open");
  auto door = front_door_of(comm);
  if (!door)
    return failed(to_string(door.err()));
  const auto& at = door->first;
  const auto& tls = door->second;
  auto report = report_for(down, "relay");
  run_report upstream;
  std::optional<server_side> side;
  std::optional<listening> gate;
  auto sets = std::make_shared<lazy_data>(files->client.data);
  std::vector<run_report> child_reports(files->simulated_clients);
  std::vector<client_actor> children; // simulated, in this process
  {
    auto sc = make_system_config(4, true);
    caf::actor_system sys{sc};
    auto stop = std::make_shared<std::atomic<bool>>(false);
    std::mutex spawning; // the spawner runs on the upstream client's thread
    auto spawn = [&](relay_upstream up) -> result<relay_side> {
      std::lock_guard<std::mutex> lock{spawning};
      auto layout = up.initial.layout;
      auto chunk = comm.chunk_bytes_for(layout.total_bytes());
      if (!chunk)
        return error{errc::bad_config,
                     down.source + ": " + chunk.err().message};
      auto s = spawn_from_config(sys, down, nullptr, &report, true, opts,
                                 *metrics, view->status, nullptr, stop, &up);
      if (!s)
        return s.err();
      auto g = listen(sys, s->server, at, limits_of(comm), tls, s->refusals);
      if (!g) {
        s->shut_down(sys);
        caf::anon_send_exit(s->server, caf::exit_reason::user_shutdown);
        return g.err();
      }
      log_line("relay", "listening on " + at.host + ":" +
                            std::to_string(g->port) + " for " +
                            std::to_string(down.server.num_clients) +
                            " clients" + (comm.use_ssl ? " (TLS)" : ""));
      side = *s;
      gate = *g;
      for (uint32_t i = 0; i < files->simulated_clients; ++i)
        children.push_back(
            spawn_client(sys, s->server, simulated_child(*files, i),
                         local_trainer(sets, files->client.data, i, 1, stop),
                         &child_reports[i]));
      return relay_side{s->server, layout, &sys, *chunk};
    };
    run_remote_client(
        files->client.client,
        relay_trainers(spawn, down.server.memory_mode == memory_mode::disk
                                  ? down.server.storage_dir
                                  : std::string{}),
        upstream);
    std::lock_guard<std::mutex> lock{spawning};
    if (side) { // the parent's run is over: so is the children's
      caf::anon_send(side->server, stop_atom::value,
                     upstream.failure.empty()
                         ? std::string{}
                         : "the relay's parent: " + upstream.failure);
      await_all(sys, std::vector<server_actor>{side->server});
      await_all(sys, children);
      caf::anon_send_exit(gate->acceptor, caf::exit_reason::user_shutdown);
      side->shut_down(sys);
    }
    side.reset(); // no handle may outlive the actor system
    gate.reset();
    children.clear();
  }
  if (!upstream.failure.empty() && report.failure.empty())
    report.failure = "upstream: " + upstream.failure;
  return conclude(opts, report, down, *view);
}

} // namespace fedcaf::cli
