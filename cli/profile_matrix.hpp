#pragma once
// What `fedcaf profile` runs (a profile matrix file), and its reader.
// Value types only.

#include <cstdint>
#include <string>
#include <vector>

#include "fedcaf/error.hpp"

namespace fedcaf::cli {

/// What `fedcaf profile` runs: every combination of the lists, each as a
/// server and N clients in processes of their own.
struct profile_matrix {
  std::string base = "configs/synthetic_dummy.yaml"; ///< server config
  std::vector<uint64_t> sizes_mib{256};
  std::vector<uint32_t> clients{2};
  std::vector<bool> chunking{true, false};
  std::vector<std::string> memory_modes{"ram"};
  uint32_t rounds = 3;
  uint32_t sample_ms = 50;   ///< RSS sampling period
  uint32_t timeout_s = 1800; ///< per run
};

/// Reads and validates a profile matrix file (unknown keys, types, values)
/// after applying each `--set` override ("a.b=value"). A relative `base`
/// names a file beside the matrix file, or else one in the working
/// directory; m.base holds the path found.
result<profile_matrix>
load_profile_matrix(const std::string& path,
                    const std::vector<std::string>& overrides = {});

} // namespace fedcaf::cli
