#include "actors/errors.hpp"

#include <limits>
#include <new>
#include <type_traits>

#include <caf/message.hpp>
#include <caf/sec.hpp>

namespace fedcaf {

namespace {

// caf::error holds its code in 8 bits.
static_assert(static_cast<std::underlying_type_t<errc>>(errc::cancelled) <=
              std::numeric_limits<uint8_t>::max());

/// The message a "fedcaf" error's context holds: one string, or none.
std::string message_of(const caf::message& context) {
  if (context.match_elements<std::string>())
    return context.get_as<std::string>(0);
  return {};
}

/// The errc that says what to do about one of CAF's own errors.
errc errc_of(caf::sec code) {
  switch (code) {
  case caf::sec::request_receiver_down:
  case caf::sec::cannot_connect_to_node:
  case caf::sec::no_route_to_receiving_node:
  case caf::sec::cannot_forward_to_invalid_actor:
  case caf::sec::disconnect_during_handshake:
    return errc::disconnected;
  case caf::sec::request_timeout:
    return errc::timeout;
  default:
    return errc::internal;
  }
}

} // namespace

caf::error make_error(errc code) {
  return caf::error{static_cast<uint8_t>(code), errc_category};
}

caf::error make_error(errc code, std::string message) {
  return caf::error{static_cast<uint8_t>(code), errc_category,
                    caf::make_message(std::move(message))};
}

caf::error to_caf(const error& e) {
  return make_error(e.code, e.message);
}

error from_caf(const caf::error& e) {
  if (!e)
    return error{errc::internal, "no error"};
  if (e.category() == errc_category)
    return error{static_cast<errc>(e.code()), message_of(e.context())};
  if (e.category() == caf::atom("system"))
    return error{errc_of(static_cast<caf::sec>(e.code())), caf::to_string(e)};
  return error{errc::internal, caf::to_string(e)};
}

void add_errc_category(caf::actor_system_config& cfg) {
  cfg.add_error_category(errc_category, [](uint8_t code, caf::atom_value,
                                           const caf::message& context) {
    auto message = message_of(context);
    std::string out = to_string(static_cast<errc>(code));
    return message.empty() ? out : out + ": " + message;
  });
}

error error_of(const std::exception_ptr& x) {
  try {
    std::rethrow_exception(x);
  } catch (const std::bad_alloc&) {
    return {errc::out_of_memory,
            "an allocation failed (std::bad_alloc, unhandled)"};
  } catch (const std::exception& e) {
    return {errc::internal, std::string{"unhandled exception: "} + e.what()};
  } catch (...) {
    return {errc::internal, "unhandled exception of an unknown type"};
  }
}

} // namespace fedcaf
