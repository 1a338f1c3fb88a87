#pragma once
// Reads what `fedcaf dp-profile` measures (fedcaf/dp_profile.hpp's
// dp_profile_config) from its file.

#include <string>
#include <vector>

#include "fedcaf/dp_profile.hpp"
#include "fedcaf/error.hpp"

namespace fedcaf::cli {

/// Reads and validates a dp-profile file (unknown keys, types, values)
/// after applying each `--set` override ("a.b=value").
result<dp_profile_config>
load_dp_profile_config(const std::string& path,
                       const std::vector<std::string>& overrides = {});

} // namespace fedcaf::cli
