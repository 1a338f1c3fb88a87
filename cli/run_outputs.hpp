#pragma once
// What a run leaves behind and shows while it runs: the --report and
// --report-html files, the --metrics log, the live view (--http), the exit
// code and its message, and how SIGINT or SIGTERM ends a run.
// Thread-safety: no shared state (the live status is the view's).

#include <atomic>
#include <memory>
#include <string>

#include "actors/interfaces.hpp"
#include "fedcaf/config.hpp"
#include "fedcaf/live_status.hpp"
#include "fedcaf/report.hpp"
#include "http_view.hpp"
#include "interrupts.hpp"
#include "options.hpp"

namespace fedcaf::cli {

/// Prints "fedcaf: <why>" (into the --log-file too) and returns exit code 1.
int failed(const std::string& why);

/// Refuses a --report path that cannot be written, before the run.
result<void> writable_report(const options& opts);

/// Before a server side run: refuses a --report or --report-html path
/// that cannot be written, and opens the --metrics file (null without
/// --metrics).
result<std::shared_ptr<metrics_log>> open_outputs(const options& opts);

/// The live view (--http) and what it shows: the status is kept iff
/// --http or --report-html asks for it, the view runs iff --http does.
struct live_view {
  std::shared_ptr<live_status> status;
  std::unique_ptr<http_view> http;
};

/// Starts the live view of `cfg`'s run, as `role`; an error iff --http's
/// address cannot be bound.
result<live_view> start_view(const options& opts, const config& cfg,
                             const char* role);

/// An empty report of a server side run from `cfg`.
run_report report_for(const config& cfg, const char* role);

/// SIGINT or SIGTERM ends the run: the server stops it (clients are told),
/// then training and evaluation in this process stop at their next step
/// (`stop`), and the report says "interrupted". The server hears first, so
/// that a client that ends its training early is not taken for a failure.
void stop_on_interrupt(interrupt_watch& watch, const round_host& server,
                       std::shared_ptr<std::atomic<bool>> stop);

/// Marks `report` interrupted iff `watch` caught a signal.
void note_interrupt(const interrupt_watch& watch, run_report& report);

/// Writes the report and the HTML page if asked, prints the final
/// accuracy; then, unless interrupted, a page open on the live view gets
/// the final state before the process exits (at most 1.5 s). Returns the
/// exit code.
int conclude(const options& opts, run_report& report, const config& cfg,
             const live_view& view);

} // namespace fedcaf::cli
