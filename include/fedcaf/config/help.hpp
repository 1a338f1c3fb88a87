#pragma once
// What each configuration key does, in one table (src/config/help.cpp),
// for the reference `fedcaf config-reference` prints. Constant tables only.

#include <span>
#include <string_view>

namespace fedcaf {

/// One line or two on what a key does.
struct key_help {
  /// A key's whole dotted path, or its end after a dot: the entry
  /// "comm_configs.stream_configs.window" names that key under a client's
  /// comm_configs and under server_configs.comm_configs alike.
  std::string_view path;
  std::string_view help;
};

/// Every entry of the help table, in the order it is written.
std::span<const key_help> config_help();

/// Returns true iff help entry path `entry` names key path `path`: equal,
/// or `path` ends in "." followed by `entry`.
bool help_names(std::string_view entry, std::string_view path);

/// Returns the help of the longest entry that names `path`; "" iff none
/// does.
std::string_view help_of(std::string_view path);

} // namespace fedcaf
