#pragma once
// fedcaf::errc across actor boundaries: a fedcaf::error becomes a caf::error
// of the category "fedcaf" whose code is the errc and whose context is the
// message, so the receiver of a failed request gets the code back, not a
// CAF runtime_error with a string. Thread-safety: pure functions.

#include <exception>
#include <string>

#include <caf/actor_system_config.hpp>
#include <caf/atom.hpp>
#include <caf/error.hpp>

#include "fedcaf/error.hpp"

namespace fedcaf {

/// The category of fedcaf's errors among CAF's.
constexpr caf::atom_value errc_category = caf::atom("fedcaf");

/// Returns `code` with `message` as a caf::error (found by ADL, so that
/// `caf::error e = errc::timeout;` and caf::make_error(code, ...) work).
caf::error make_error(errc code);
caf::error make_error(errc code, std::string message);

/// Returns `e` as a caf::error, its code and message kept.
caf::error to_caf(const error& e);

/// Returns the fedcaf::error that `e` carries: its own code and message for
/// the "fedcaf" category; for CAF's own errors, the code that says what to
/// do (a dead or unreachable actor: disconnected; a timed-out request:
/// timeout; anything else: internal) and CAF's rendering as the message.
error from_caf(const caf::error& e);

/// Returns what exception `x` says: out_of_memory for std::bad_alloc,
/// internal ("unhandled exception: <what()>") for anything else. For an
/// actor's exception handler. REQUIRES: x is not null.
error error_of(const std::exception_ptr& x);

/// Lets `cfg`'s system render fedcaf's errors by name ("bad_checksum:
/// ..."). Every actor system that runs fedcaf's actors calls it.
void add_errc_category(caf::actor_system_config& cfg);

} // namespace fedcaf
