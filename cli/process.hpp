#pragma once
// What the measuring commands (profile, dp-profile) share: starting this
// binary again as a child, reading the JSON it writes, drawing figures.

#include <sys/types.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace fedcaf::cli {

/// Checks that a measuring command has -c and -o (the config named
/// `config_name` in the message) and creates the output folder `dir`.
/// Returns 0, or the exit code after saying why on stderr.
int prepare_output(const struct options& opts, const char* command,
                   const char* config_name, const std::string& dir);

/// Starts this binary with `args` (argv[0] first), its stdout and stderr
/// going to `log`. Returns the child's pid.
pid_t launch_self(const std::vector<std::string>& args, const std::string& log);

/// Returns the JSON in `path`, or null iff it is missing or malformed.
nlohmann::json read_json(const std::string& path);

/// Runs tools/<script> (next to the binary's source) on `out` with Debian's
/// python3, or says why the figures were skipped.
void draw_figures(const std::string& script, const std::string& out);

} // namespace fedcaf::cli
