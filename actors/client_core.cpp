#include "actors/client_core.hpp"

#include <string>
#include <utility>

#include "actors/messages.hpp"
#include "fedcaf/log.hpp"

namespace fedcaf {

client_core::client_core(server_link server, client_options options,
                         trainer_factory factory, run_report* report)
    : server_(std::move(server)), options_(std::move(options)),
      factory_(std::move(factory)),
      report_(report, options_.client_id, options_.progress),
      backoff_(options_.reconnect_for,
               options_.host + ":" + std::to_string(options_.port)),
      watchdog_(options_.idle_timeout),
      departure_(options_.leaving, options_.done_heard),
      refetch_(
          &self_, options_.client_id,
          [this](uint64_t seq, const frame& reply, uint64_t offset,
                 std::span<std::byte> out) {
            return round_->refetched(seq, reply, offset, out);
          },
          [this](uint64_t offset, std::span<const std::byte> bytes) {
            model_->refetched(offset, bytes);
          },
          [this] { return refetch_state(); }) {}

client_refetch::now client_core::refetch_state() const {
  using stage = client_round::stage;
  bool may =
      round_ && !reconnecting_ &&
      (round_->current_stage() != stage::downloading || round_->downloaded());
  return {server_, round_number(), round_ ? round_->announced().window : 0,
          may};
}

void client_core::send_evaluation(const msg::evaluation& e) {
  self_->request(server_, caf::infinite, evaluated_atom::value, msg::encode(e))
      .then([this](const frame& f) { log_refusal("its evaluation", f); },
            [](caf::error&) {}); // a lost connection is handled elsewhere
}

void client_core::log_refusal(const char* what, const frame& f) const {
  if (auto refused = msg::error_in(f))
    log_line(log_level::warning, options_.client_id,
             std::string{"the server refused "} + what + ": " +
                 to_string(*refused));
}

void client_core::begin_transfer() {
  watchdog_.start(now());
  arm_timer();
}

void client_core::arm_timer() {
  self_->delayed_send(self_, options_.idle_timeout / 4, tick_atom::value);
}

} // namespace fedcaf
