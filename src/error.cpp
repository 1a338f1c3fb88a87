#include "fedcaf/error.hpp"

namespace fedcaf {

const char* to_string(errc code) {
  switch (code) {
  case errc::malformed_frame:
    return "malformed_frame";
  case errc::unsupported_version:
    return "unsupported_version";
  case errc::unexpected_message:
    return "unexpected_message";
  case errc::bad_checksum:
    return "bad_checksum";
  case errc::out_of_range:
    return "out_of_range";
  case errc::bad_sequence:
    return "bad_sequence";
  case errc::wrong_round:
    return "wrong_round";
  case errc::unknown_stream:
    return "unknown_stream";
  case errc::unknown_client:
    return "unknown_client";
  case errc::manifest_mismatch:
    return "manifest_mismatch";
  case errc::unsupported_dtype:
    return "unsupported_dtype";
  case errc::not_authorized:
    return "not_authorized";
  case errc::not_in_round:
    return "not_in_round";
  case errc::stream_reset:
    return "stream_reset";
  case errc::frame_too_large:
    return "frame_too_large";
  case errc::poisoned_update:
    return "poisoned_update";
  case errc::not_authenticated:
    return "not_authenticated";
  case errc::too_many_requests:
    return "too_many_requests";
  case errc::out_of_memory:
    return "out_of_memory";
  case errc::bad_config:
    return "bad_config";
  case errc::io_error:
    return "io_error";
  case errc::bad_argument:
    return "bad_argument";
  case errc::internal:
    return "internal";
  case errc::busy:
    return "busy";
  case errc::disconnected:
    return "disconnected";
  case errc::timeout:
    return "timeout";
  case errc::cancelled:
    return "cancelled";
  }
  return "unknown_error";
}

std::string to_string(const error& e) {
  return std::string{to_string(e.code)} + ": " + e.message;
}

} // namespace fedcaf
