#pragma once
// The configuration reference as Markdown, from the keys the readers
// record (config/schema.hpp) and their help (config/help.hpp): what
// `fedcaf config-reference` prints, and docs/configuration.md holds
// between its generated markers.

#include <string>

#include "fedcaf/config/schema.hpp"

namespace fedcaf {

/// Returns the reference of `schema`: a heading per section ("## Top
/// level", "## server_configs.scheduler_kwargs"), each with a table (key |
/// type | default | what it does) of the keys directly in it, in the order
/// the readers asked for them; a section's table follows its parent's, in
/// the order the parent names them. A key without help shows an empty
/// last cell (the help test refuses that).
std::string config_reference_markdown(const config_schema& schema);

} // namespace fedcaf
