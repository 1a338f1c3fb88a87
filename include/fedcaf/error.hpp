#pragma once
// The project's one error type. Core code returns result<T>; actors turn an
// error into an error frame for a peer. Thread-safety: value types only.

#include <cstdint>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>

namespace fedcaf {

/// Error codes, grouped by what the caller should do about them.
enum class errc : uint16_t {
  // Bad input: the peer or the user sent something wrong; do not retry as is.
  malformed_frame = 1, ///< undecodable or truncated frame
  unsupported_version, ///< frame from another protocol version
  unexpected_message,  ///< a frame of the wrong kind for this exchange
  bad_checksum,        ///< chunk bytes do not match their checksum
  out_of_range,        ///< offset, index or size outside the plan
  bad_sequence,        ///< duplicate or out-of-order chunk
  wrong_round,         ///< message for a round that is not open
  unknown_stream,      ///< chunk or end for a stream that is not open
  unknown_client,      ///< client not registered, or registered twice
  manifest_mismatch,   ///< model layouts differ between the two ends
  unsupported_dtype,   ///< a dtype this operation cannot handle
  not_authorized,      ///< unknown client id, wrong token or certificate
  not_in_round,        ///< the client sits this round out (late, or joined
                       ///< after it started); it waits for the next one
  stream_reset,        ///< the round's updates are collected again
  frame_too_large,     ///< a frame header announces more than the limit
  poisoned_update,     ///< non-finite values, or an update too far from the
                       ///< global model (aggregator_kwargs.max_update_norm)
  not_authenticated,   ///< a frame before the peer proved who it is
  bad_config = 40,     ///< invalid user configuration
  io_error,            ///< a file could not be read or written
  bad_argument,        ///< the user's code called the Python client wrongly
                       ///< (arrays that do not match the model, a task used
                       ///< out of turn)
  // Our bug: an invariant broke.
  internal = 80,
  // Overloaded: retry later.
  busy = 100,
  too_many_requests, ///< past a per-connection limit (fetches, chunks in
                     ///< flight, unauthenticated connections)
  out_of_memory,     ///< an allocation failed
  // Disconnected: reconnect or give up.
  disconnected = 120,
  timeout,
  cancelled, ///< the user stopped the client (Ctrl-C, close())
};

/// Returns the enumerator's name, e.g. "bad_checksum".
const char* to_string(errc code);

/// An error value: a code plus a message for humans.
struct error {
  errc code = errc::internal;
  std::string message;
};

/// Returns "bad_checksum: <message>".
std::string to_string(const error& e);

/// Either a T or an error. Like std::expected (C++23), reduced to what is used.
template <class T> class [[nodiscard]] result {
public:
  result(T value) : value_(std::move(value)) {}
  result(error e) : value_(std::move(e)) {}
  /// Converts from anything T converts from, e.g. unique_ptr<Derived>.
  template <class U,
            class = std::enable_if_t<std::is_convertible_v<U&&, T> &&
                                     !std::is_same_v<std::decay_t<U>, T> &&
                                     !std::is_same_v<std::decay_t<U>, error>>>
  result(U&& x) : value_(std::in_place_index<0>, std::forward<U>(x)) {}
  explicit operator bool() const { return value_.index() == 0; }
  T& operator*() { return std::get<0>(value_); }
  const T& operator*() const { return std::get<0>(value_); }
  T* operator->() { return &std::get<0>(value_); }
  const T* operator->() const { return &std::get<0>(value_); }
  /// REQUIRES: !*this.
  const error& err() const { return std::get<1>(value_); }

private:
  std::variant<T, error> value_;
};

template <> class [[nodiscard]] result<void> {
public:
  result() = default;
  result(error e) : error_(std::move(e)), failed_(true) {}
  explicit operator bool() const { return !failed_; }
  /// REQUIRES: !*this.
  const error& err() const { return error_; }

private:
  error error_;
  bool failed_ = false;
};

/// Builds "what (a = 1, b = 2)" from a list of names and values.
template <class... Ts>
std::string describe(const char* what, const char* names, const Ts&... xs) {
  std::ostringstream out;
  out << what;
  if constexpr (sizeof...(Ts) > 0) {
    out << " (" << names << " = ";
    ((out << xs << ", "), ...);
    out.seekp(-2, std::ios_base::cur);
    out << ')';
  }
  return out.str();
}

} // namespace fedcaf

/// Returns an error of code `code` from the enclosing function, which returns
/// a result<...>, unless `cond` holds. The message names the condition and the
/// values given: FEDCAF_REQUIRE(a <= b, errc::out_of_range, a, b).
#define FEDCAF_REQUIRE(cond, code, ...)                                        \
  do {                                                                         \
    if (!(cond))                                                               \
      return ::fedcaf::error{code,                                             \
                             ::fedcaf::describe("requirement failed: " #cond,  \
                                                #__VA_ARGS__, __VA_ARGS__)};   \
  } while (false)
