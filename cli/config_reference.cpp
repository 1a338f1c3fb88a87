// fedcaf config-reference: the configuration reference as Markdown, from
// the config readers themselves (every key, its type, default and help),
// as docs/configuration.md holds it between its generated markers
// (tools/update-config-reference writes it there).

#include <cstdio>
#include <filesystem>

#include "fedcaf/config/reference.hpp"
#include "fedcaf/config/schema.hpp"
#include "fedcaf/install_layout.hpp"
#include "run.hpp"

namespace fedcaf::cli {

namespace {

/// The shipped configs: ../share/fedcaf/configs next to the command (an
/// installed tree), else the checkout's configs/ (a build tree).
std::filesystem::path configs_dir() {
  if (auto installed = installed_share_file("configs"))
    return *installed;
  return std::filesystem::path{FEDCAF_SOURCE_DIR} / "configs";
}

} // namespace

int run_config_reference(const options&) {
  auto schema = collect_config_schema(yaml_files_in(configs_dir().string()));
  auto text = config_reference_markdown(schema);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return std::fflush(stdout) == 0 ? 0 : 1;
}

} // namespace fedcaf::cli
