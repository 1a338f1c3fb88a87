#pragma once
// The options the fedcaf command line gives a subcommand. Value types only.

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace fedcaf::cli {

/// Options shared by every subcommand.
struct options {
  std::optional<std::string> config_path;      ///< -c FILE
  std::vector<std::string> overrides;          ///< --set key.path=value
  std::optional<std::string> report_path;      ///< --report FILE
  std::optional<std::string> report_html_path; ///< --report-html FILE
  std::optional<std::string> metrics_path;     ///< --metrics FILE (JSON lines)
  std::optional<std::string> http;             ///< --http [HOST:]PORT
  std::optional<std::string> log_level;        ///< --log-level debug|info|...
  std::optional<std::string> log_file;         ///< --log-file FILE (appended)
  bool strict = false; ///< --strict: APPFL keys fedcaf ignores are errors
  /// Not an option: a relay inside simulate, whose round lines go to the
  /// log at debug level (stdout shows the root's).
  bool inner_node = false;
  /// --resume DIR: go on from the newest complete checkpoint there;
  /// --resume-force: even where keys that may change (deadlines, ports,
  /// timeouts, checkpoint and output paths) differ from its config.
  std::optional<std::string> resume;
  bool resume_force = false;
  std::optional<std::string> out_dir; ///< -o DIR (profile)
  /// dp-epsilon / dp-sigma: --noise-multiplier, --epsilon, --sample-rate,
  /// --steps, --delta, as given (checked by the command).
  std::vector<std::pair<std::string, std::string>> numbers;
  /// dp-profile: --run MODE:LENGTH, the one measurement of a child process.
  std::optional<std::string> dp_run;
};

} // namespace fedcaf::cli
