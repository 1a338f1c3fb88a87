#include "process.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "fedcaf/install_layout.hpp"
#include "run.hpp"

namespace fedcaf::cli {

int prepare_output(const options& opts, const char* command,
                   const char* config_name, const std::string& dir) {
  if (!opts.config_path || !opts.out_dir) {
    std::fprintf(stderr, "fedcaf: %s needs -c %s and -o DIR\n", command,
                 config_name);
    return 2;
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    std::fprintf(stderr, "fedcaf: %s: %s\n", dir.c_str(), ec.message().c_str());
    return 1;
  }
  return 0;
}

pid_t launch_self(const std::vector<std::string>& args,
                  const std::string& log) {
  auto pid = ::fork();
  if (pid == 0) {
    std::vector<char*> argv;
    for (const auto& a : args)
      argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    auto* out = std::freopen(log.c_str(), "w", stdout);
    if (out != nullptr)
      ::dup2(::fileno(stdout), STDERR_FILENO);
    ::execv("/proc/self/exe", argv.data());
    ::_exit(127);
  }
  return pid;
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream in{path};
  if (!in)
    return nullptr;
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception&) {
    return nullptr;
  }
}

/// Where a plotting script is: ../share/fedcaf/tools next to the command
/// (an installed tree), else the checkout's tools/ (a build tree).
std::filesystem::path tool_path(const std::string& script) {
  if (auto installed = installed_share_file("tools/" + script))
    return *installed;
  return std::filesystem::path{FEDCAF_SOURCE_DIR} / "tools" / script;
}

void draw_figures(const std::string& script, const std::string& out) {
  namespace fs = std::filesystem;
  auto path = tool_path(script);
  // Debian's interpreter, where python3-matplotlib installs, even when
  // another python3 comes first on PATH.
  std::string python =
      fs::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
  auto cmd = python + " '" + path.string() + "' '" + out + "'";
  // What this process printed (the summary table) comes before the
  // script's "figures in" line, on a pipe too.
  std::fflush(stdout);
  if (std::system(cmd.c_str()) != 0)
    std::printf("figures skipped: python3 with matplotlib is needed "
                "(Debian: python3-matplotlib)\n");
}

} // namespace fedcaf::cli
