#pragma once
// fedcaf's own log (CAF's logger is compiled out in Debian's build): one line
// per event on stderr, "HH:MM:SS.mmm who: message". Control bytes are written
// as \xNN and a message is cut at 1 KiB, so text from a peer (a client id,
// a reason) can neither forge a line nor flood the log. Thread-safety:
// lines from different threads never interleave.

#include <string_view>

namespace fedcaf {

/// Writes one line to stderr.
void log_line(std::string_view who, std::string_view message);

} // namespace fedcaf
