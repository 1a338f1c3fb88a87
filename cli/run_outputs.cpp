// What a run leaves: the report, the live view and its page, the exit
// code, and how an interrupt ends the run.

#include "run_outputs.hpp"

#include <cstdio>

#include <caf/all.hpp>

#include "actors/messages.hpp"
#include "fedcaf/live_page.hpp"
#include "fedcaf/log.hpp"
#include "fedcaf/memory_probe.hpp"

namespace fedcaf::cli {

int failed(const std::string& why) {
  std::fprintf(stderr, "fedcaf: %s\n", why.c_str());
  log_to_file_only(log_level::error, "fedcaf", why);
  return 1;
}

result<void> writable_report(const options& opts) {
  if (!opts.report_path)
    return {};
  return check_report_path(*opts.report_path);
}

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

namespace {

/// What the live view states of `cfg`'s run.
live_run live_run_of(const config& cfg, const char* role) {
  const auto& sc = cfg.server;
  const auto& z = cfg.clients.compression;
  live_run r;
  r.role = role;
  r.aggregator = aggregator_name(sc.aggregator);
  r.scheduler = name_of(sc.scheduler);
  // A relay runs its parent's rounds, as many as there are.
  r.num_rounds = std::string_view{role} == "relay" ? 0 : sc.num_global_epochs;
  r.num_clients = sc.num_clients;
  r.async = sc.scheduler == scheduler_kind::async;
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
    std::printf(
        "final test accuracy: %.4f (the clients' evaluation, weight %llu"
        ")\n",
        *last.test_accuracy,
        static_cast<unsigned long long>(last.client_metrics->samples));
  else
    std::printf("final test accuracy: %.4f (%zu test images)\n",
                *last.test_accuracy, size_t{10000});
  return 0;
}

} // namespace

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

run_report report_for(const config& cfg, const char* role) {
  run_report r;
  r.role = role;
  r.aggregator = aggregator_name(cfg.server.aggregator);
  r.scheduler = name_of(cfg.server.scheduler);
  r.config_yaml = cfg.effective_yaml; // written after every round
  return r;
}

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

int conclude(const options& opts, run_report& report, const config& cfg,
             const live_view& view) {
  auto code = write_outputs(opts, report, cfg, view);
  if (view.http && report.status != "interrupted")
    view.http->keep_for_open_pages(std::chrono::milliseconds{1500});
  return code;
}

} // namespace fedcaf::cli
