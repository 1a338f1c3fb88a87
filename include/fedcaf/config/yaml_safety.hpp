#pragma once
// The one way fedcaf reads YAML it did not write: a size guard before
// anything is parsed, and no anchors or aliases (refused from the event
// stream, before any node is built). yaml-cpp throws; these return errors.
// Stateless: safe from any thread.

#include <string>

#include <yaml-cpp/yaml.h>

#include "fedcaf/error.hpp"

namespace fedcaf {

/// Returns the text of the file `path` (a `what`, e.g. "config file"), or an
/// error (errc::bad_config) naming it iff it cannot be opened or holds more
/// than the size limit (16 MiB). Reads at most the limit plus 64 KiB,
/// whatever the file's size.
result<std::string> read_yaml_file(const std::string& path, const char* what);

/// Parses the first YAML document of `text`. Returns errc::bad_config with
/// "SOURCE: <reason>" iff the text is not YAML, is larger than the size
/// limit (16 MiB), or uses an anchor or an alias (&name, *name, <<: *name:
/// yaml-cpp shares the node an alias names, so a few lines of nested aliases
/// become more nodes than any memory holds once walked or emitted).
result<YAML::Node> parse_yaml(const std::string& text,
                              const std::string& source);

} // namespace fedcaf
