#pragma once
// fedcaf's own log (CAF's logger is compiled out in Debian's build): one line
// per event on stderr, "HH:MM:SS.mmm who: message". Thread-safety: lines from
// different threads never interleave.

#include <string_view>

namespace fedcaf {

/// Writes one line to stderr.
void log_line(std::string_view who, std::string_view message);

} // namespace fedcaf
