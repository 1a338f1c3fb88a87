#include "cli/relay_courier.hpp"

#include <deque>
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
  auto open = std::make_shared<std::deque<uint64_t>>(); // unanswered
  auto answered = [open](uint64_t number) { std::erase(*open, number); };
  return {
      [self, server, answers, open, answered](relay_atom, snapshot_ptr& model,
                                              bool arriving, uint64_t number) {
        open->push_back(number);
        self->request(server, caf::infinite, relay_atom::value,
                      std::move(model), arriving)
            .then(
                [answers, number, answered](relay_result& r) {
                  answered(number);
                  answers->put(number, std::move(r));
                },
                [self, answers, number, answered](caf::error& e) {
                  answered(number);
                  answers->put(number, error{errc::internal,
                                             "the relay's round failed: " +
                                                 self->system().render(e)});
                });
      },
      [answers, open](settled_atom, uint64_t bytes, double weight, double loss,
                      uint32_t clients) {
        if (!open->empty())
          answers->settled(open->front(),
                           relay_stream{weight, loss, clients, bytes});
      },
      [self, server](arrived_atom, uint64_t offset, uint64_t bytes) {
        self->send(server, arrived_atom::value, offset, bytes);
      },
  };
}

} // namespace fedcaf::cli
