#include "cli/relay_courier.hpp"

#include <utility>

#include "actors/messages.hpp"

namespace fedcaf::cli {

caf::behavior relay_courier(caf::event_based_actor* self, server_actor server,
                            std::shared_ptr<relay_answers> answers) {
  self->monitor(server);
  self->set_down_handler([self, answers](caf::down_msg&) {
    answers->fail_all("the children's side stopped");
    self->quit();
  });
  return {
      [self, server, answers](relay_atom, snapshot_ptr& model, bool arriving,
                              uint64_t number) {
        self->request(server, caf::infinite, relay_atom::value,
                      std::move(model), arriving)
            .then([answers, number](
                      relay_result& r) { answers->put(number, std::move(r)); },
                  [self, answers, number](caf::error& e) {
                    answers->put(number, error{errc::internal,
                                               "the relay's round failed: " +
                                                   self->system().render(e)});
                  });
      },
      [self, server](arrived_atom, uint64_t offset, uint64_t bytes) {
        self->send(server, arrived_atom::value, offset, bytes);
      },
  };
}

} // namespace fedcaf::cli
