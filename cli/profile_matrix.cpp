// Reads a profile matrix file with the config readers' section reader.

#include "profile_matrix.hpp"

#include <filesystem>

#include "fedcaf/config/section.hpp"
#include "fedcaf/config/words.hpp"

namespace fedcaf::cli {

namespace {

using config_reader::max_clients;
using config_reader::max_model_bytes;
using config_reader::section;

/// `name` as a file that another config names: a relative name is looked
/// for beside that config (in `dir`) first, then in the working directory
/// (where configs written before this rule found it).
std::string beside(const std::string& name, const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  auto there = dir / name;
  std::error_code ec;
  if (fs::path{name}.is_relative() && fs::is_regular_file(there, ec))
    return there.lexically_normal().string();
  return name;
}

/// Reads a profile matrix found in the folder `dir`.
void read(section& s, profile_matrix& m, const std::filesystem::path& dir) {
  s.get("base", m.base);
  m.base = beside(m.base, dir);
  if (!std::filesystem::is_regular_file(m.base))
    s.fail("base", "'" + m.base +
                       "' is not a file (a relative base is looked for "
                       "beside the matrix file, then in the working "
                       "directory)");
  s.get_whole_list("sizes_mib", m.sizes_mib, 1, max_model_bytes >> 20);
  s.get_whole_list("clients", m.clients, 1, max_clients);
  s.get_list("chunking", m.chunking);
  s.get_list("memory_modes", m.memory_modes);
  for (const auto& mode : m.memory_modes)
    if (!parse_word<memory_mode>(mode))
      s.fail("memory_modes", "'" + mode + "' is not ram, window or disk");
  s.get("rounds", m.rounds, 1);
  s.get("sample_ms", m.sample_ms, 1);
  s.get("timeout_s", m.timeout_s, 1);
}

} // namespace

result<profile_matrix>
load_profile_matrix(const std::string& path,
                    const std::vector<std::string>& overrides) {
  auto dir = std::filesystem::path{path}.parent_path();
  return config_reader::load_section_file<profile_matrix>(
      path, overrides,
      [&dir](section& s, profile_matrix& m) { read(s, m, dir); });
}

} // namespace fedcaf::cli
