#include "actors/client_refetch.hpp"

#include <caf/all.hpp>

#include "actors/messages.hpp"

namespace fedcaf {

client_refetch::client_refetch(client_actor::pointer* self, std::string who,
                               refetch_queue::reader read,
                               refetch_queue::giver give,
                               std::function<now()> state)
    : self_(self), state_(std::move(state)),
      queue_(std::move(who), std::move(read), std::move(give)) {}

void client_refetch::ask(uint32_t round, uint64_t offset, uint64_t bytes,
                         std::vector<std::pair<uint64_t, msg::frame>> fetches) {
  queue_.ask(round, offset, bytes, std::move(fetches));
  send();
}

void client_refetch::send() {
  auto at = state_();
  if (!at.may_send)
    return;
  for (auto& out : queue_.next(at.round, at.window))
    (*self_)
        ->request(at.server, caf::infinite, fetch_atom::value, out.frame)
        .then(
            [this, out](frame& reply) {
              queue_.answered(out, std::move(reply), state_().round);
              send();
            },
            [this, out](caf::error&) {
              queue_.failed(out);
              send();
            });
}

} // namespace fedcaf
