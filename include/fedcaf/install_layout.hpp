#pragma once
// Where fedcaf's files are, found from the running executable. An installed
// tree (cmake --install, the .deb) holds, under one prefix, bin/fedcaf,
// lib/fedcaf/ (the LibTorch plugin) and share/fedcaf/ (configs, examples,
// tools, deploy); a build tree holds the command and its plugin in build/
// of the checkout, the rest in the checkout. Stateless: safe from any thread.

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace fedcaf {

/// Returns the folder of the running executable (/proc/self/exe), or "."
/// iff that link cannot be read.
std::filesystem::path executable_dir();

/// Returns <prefix>/share/fedcaf/<relative> iff the running executable is
/// <prefix>/bin/<name> of an installed tree that holds that file.
std::optional<std::filesystem::path>
installed_share_file(std::string_view relative);

/// Returns the command line that runs Python example `script` with `args`:
/// "python3 <prefix>/share/fedcaf/examples/<script> <args>" from an
/// installed tree, "python3 <checkout>/examples/python/<script> <args>" from
/// build/ in the checkout, else with "examples/python/<script>" (the
/// checkout's, relative).
std::string example_command(std::string_view script, std::string_view args);

} // namespace fedcaf
