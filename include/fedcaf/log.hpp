#pragma once
// fedcaf's own log (CAF's logger is compiled out in Debian's build), through
// spdlog: one line per event, "HH:MM:SS.mmm L who: message" with L the level
// (D debug, I info, W warning, E error), on stderr and, once log_to_file is
// called, in that file too. Control bytes and bytes past ASCII are written
// as \xNN and a message
// is cut at 1 KiB, so text from a peer (a client id, a reason) can neither
// forge a line nor flood the log. On a terminal, a status line (the console
// progress) stays below the log lines: each line is written above it.
// Thread-safety: every function may be called from any thread; lines from
// different threads never interleave. set_log_level and log_to_file belong
// at start-up, before other threads log.

#include <optional>
#include <string>
#include <string_view>

#include "fedcaf/error.hpp"

namespace fedcaf {

enum class log_level { debug, info, warning, error, off };

/// Writes one line at `level` (dropped below the set level).
void log_line(log_level level, std::string_view who, std::string_view message);

/// Writes one line at info level.
inline void log_line(std::string_view who, std::string_view message) {
  log_line(log_level::info, who, message);
}

/// "debug", "info", "warning" (or "warn"), "error" or "off"; nullopt else.
std::optional<log_level> parse_log_level(std::string_view name);

/// Lines below `level` are dropped (default: info).
void set_log_level(log_level level);
log_level current_log_level();

/// Also writes every line to `path` (appended, flushed line by line).
result<void> log_to_file(const std::string& path);

/// Writes one line at `level` to the log file only (nothing without
/// log_to_file): for a line the command prints on stderr in its own form,
/// "fedcaf: <why>", which the file should keep too.
void log_to_file_only(log_level level, std::string_view who,
                      std::string_view message);

/// `text` as a log line writes it: control bytes and bytes past ASCII as
/// \xNN, cut at 1 KiB. For any other line that may hold a peer's text.
std::string printable_line(std::string_view text);

/// True iff stderr is a terminal: only then is a status line drawn.
bool log_on_terminal();

/// Draws `text` as the status line below the log lines, in place (cut to
/// the terminal's width); empty removes it. Does nothing unless stderr is a
/// terminal.
void log_status(std::string_view text);

/// Writes `text` and a newline to stdout (a round's line, a result), with
/// the status line moved out of its way.
void print_line(std::string_view text);

} // namespace fedcaf
