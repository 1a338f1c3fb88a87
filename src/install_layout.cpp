#include "fedcaf/install_layout.hpp"

namespace fedcaf {

namespace fs = std::filesystem;

fs::path executable_dir() {
  std::error_code ec;
  auto exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path{"."} : exe.parent_path();
}

std::optional<fs::path> installed_share_file(std::string_view relative) {
  auto path = (executable_dir() / ".." / "share" / "fedcaf" / relative)
                  .lexically_normal();
  std::error_code ec;
  if (fs::exists(path, ec))
    return path;
  return std::nullopt;
}

std::string example_command(std::string_view script, std::string_view args) {
  auto path = installed_share_file("examples/" + std::string{script});
  if (!path) {
    auto checkout = (executable_dir() / ".." / "examples" / "python" / script)
                        .lexically_normal();
    std::error_code ec;
    path = fs::exists(checkout, ec) ? checkout
                                    : fs::path{"examples/python"} / script;
  }
  return "python3 " + path->string() + " " + std::string{args};
}

} // namespace fedcaf
