#pragma once
// What may name a client. A client id goes as it is into logs, reports,
// metrics files, the live view's page and Prometheus labels, so it is kept
// to what needs no escaping anywhere. Thread-safety: a pure function.

#include <string>

#include "fedcaf/error.hpp"

namespace fedcaf {

/// The longest client id.
constexpr size_t max_client_id_bytes = 128;

/// Returns ok iff `id` may name a client: 1 to 128 bytes of printable ASCII
/// other than space; else an error (malformed_frame) that says so.
inline result<void> check_client_id(const std::string& id) {
  if (id.empty() || id.size() > max_client_id_bytes)
    return error{errc::malformed_frame,
                 "a client id of " + std::to_string(id.size()) +
                     " bytes; it must have 1 to " +
                     std::to_string(max_client_id_bytes)};
  for (unsigned char c : id)
    if (c < 0x21 || c > 0x7e)
      return error{errc::malformed_frame,
                   "a client id may hold printable ASCII other than space "
                   "only"};
  return {};
}

} // namespace fedcaf
