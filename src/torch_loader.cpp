// The fedcaf command's side of the LibTorch plugin (see torch_plugin.hpp):
// the trainer's entry points, each loading libfedcaf_torch.so on first use.

#include <dlfcn.h>
#include <unistd.h>

#include <filesystem>
#include <mutex>
#include <optional>

#include "fedcaf/install_layout.hpp"
#include "torch_plugin.hpp"

namespace fedcaf {

namespace {

namespace fs = std::filesystem;

/// Where the plugin may be, in order: beside the executable (the build
/// tree), then in ../lib/fedcaf (an installed tree).
std::vector<fs::path> plugin_paths() {
  auto dir = executable_dir();
  return {dir / FEDCAF_TORCH_PLUGIN,
          dir / ".." / "lib" / "fedcaf" / FEDCAF_TORCH_PLUGIN};
}

/// What to install when the plugin is there but does not load: LibTorch
/// itself (the fedcaf-torch package depends on it; a plugin copied
/// without it finds none).
std::string load_failure(const fs::path& path, const std::string& why) {
  auto hint = why.find("cannot open shared object file") != std::string::npos
                  ? " (a library it needs is missing: install Debian's "
                    "libtorch1.13, on which the fedcaf-torch package "
                    "depends)"
                  : "";
  return path.lexically_normal().string() + " does not load: " + why + hint;
}

result<const torch_plugin*> open_plugin() {
  auto paths = plugin_paths();
  std::optional<error> failure; // the first plugin that did not load
  for (const auto& path : paths) {
    if (!fs::exists(path))
      continue;
    // RTLD_LOCAL: the plugin's copies of fedcaf's own functions stay its
    // own (it is linked with -Bsymbolic as well).
    void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      if (!failure)
        failure = error{errc::io_error, load_failure(path, ::dlerror())};
      continue;
    }
    auto entry = reinterpret_cast<const torch_plugin* (*)()>(
        ::dlsym(handle, "fedcaf_torch_plugin_v2"));
    if (entry == nullptr)
      return error{errc::io_error,
                   path.string() + " is not fedcaf's LibTorch plugin"};
    return entry(); // the handle stays open for the process's lifetime
  }
  if (failure)
    return *failure;
  return error{errc::io_error,
               "this run trains or evaluates with LibTorch, and fedcaf's "
               "LibTorch trainer is not installed: install the fedcaf-torch "
               "package (" FEDCAF_TORCH_PLUGIN " is neither at " +
                   paths[0].lexically_normal().string() + " nor at " +
                   paths[1].lexically_normal().string() + ")"};
}

/// The plugin, loaded once for the process.
result<const torch_plugin*> plugin() {
  static std::once_flag once;
  static result<const torch_plugin*> loaded{error{errc::internal, ""}};
  std::call_once(once, [] { loaded = open_plugin(); });
  return loaded;
}

} // namespace

result<std::unique_ptr<trainer>> make_trainer(const client_configs& cfg,
                                              client_data data, uint64_t seed,
                                              uint32_t num_threads) {
  auto p = plugin();
  if (!p)
    return p.err();
  return (*p)->make_trainer(cfg, std::move(data), seed, num_threads);
}

result<std::unique_ptr<evaluator>>
make_evaluator(const client_configs& cfg, std::shared_ptr<const image_set> test,
               uint32_t num_threads) {
  auto p = plugin();
  if (!p)
    return p.err();
  return (*p)->make_evaluator(cfg, std::move(test), num_threads);
}

result<model_snapshot> make_initial_model(const model_config& cfg) {
  auto p = plugin();
  if (!p)
    return p.err();
  return (*p)->make_initial_model(cfg);
}

result<dp_profile_result> profile_dp_step(const dp_profile_config& cfg,
                                          const std::string& mode,
                                          uint32_t seq_length) {
  auto p = plugin();
  if (!p)
    return p.err();
  return (*p)->profile_dp_step(cfg, mode, seq_length);
}

} // namespace fedcaf
