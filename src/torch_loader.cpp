// The fedcaf command's side of the LibTorch plugin (see torch_plugin.hpp):
// the trainer's entry points, each loading libfedcaf_torch.so on first use.

#include <dlfcn.h>
#include <unistd.h>

#include <filesystem>
#include <mutex>

#include "torch_plugin.hpp"

namespace fedcaf {

namespace {

namespace fs = std::filesystem;

/// Where the plugin may be, in order: beside the executable (the build
/// tree), then in ../lib/fedcaf (an installed tree).
std::vector<fs::path> plugin_paths() {
  std::error_code ec;
  auto exe = fs::read_symlink("/proc/self/exe", ec);
  auto dir = ec ? fs::path{"."} : exe.parent_path();
  return {dir / FEDCAF_TORCH_PLUGIN,
          dir / ".." / "lib" / "fedcaf" / FEDCAF_TORCH_PLUGIN};
}

result<const torch_plugin*> open_plugin() {
  std::string tried;
  for (const auto& path : plugin_paths()) {
    if (!fs::exists(path))
      continue;
    // RTLD_LOCAL: the plugin's copies of fedcaf's own functions stay its
    // own (it is linked with -Bsymbolic as well).
    void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      tried += std::string{" "} + ::dlerror();
      continue;
    }
    auto entry = reinterpret_cast<const torch_plugin* (*)()>(
        ::dlsym(handle, "fedcaf_torch_plugin_v2"));
    if (entry == nullptr)
      return error{errc::io_error,
                   path.string() + " is not fedcaf's LibTorch plugin"};
    return entry(); // the handle stays open for the process's lifetime
  }
  auto paths = plugin_paths();
  return error{errc::io_error,
               "the LibTorch trainer (" FEDCAF_TORCH_PLUGIN ") is neither at " +
                   paths[0].string() + " nor at " + paths[1].string() + tried};
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
