#include "actors/relay_courier.hpp"

#include <algorithm>
#include <deque>
#include <utility>

#include <caf/all.hpp>

#include "actors/messages.hpp"

namespace fedcaf {

void relay_answers::settled(uint64_t model, const relay_step& s) {
  std::function<void()> wake;
  {
    std::lock_guard<std::mutex> lock{mutex_};
    auto& at = streams_[model];
    at = relay_step{s.weight, s.loss, s.clients, std::max(at.ready, s.ready),
                    s.evaluation};
    wake = wake_;
    changed_.notify_all();
  }
  if (wake)
    wake();
}

void relay_answers::on_settled(std::function<void()> wake) {
  std::lock_guard<std::mutex> lock{mutex_};
  wake_ = std::move(wake);
}

result<relay_start> relay_answers::start(uint64_t model) {
  std::unique_lock<std::mutex> lock{mutex_};
  changed_.wait(lock, [this, model] {
    return streams_.count(model) > 0 || answers_.count(model) > 0 ||
           !failure_.empty();
  });
  if (auto s = streams_.find(model); s != streams_.end())
    return relay_start{s->second, {}};
  auto it = answers_.find(model);
  if (it == answers_.end())
    return error{errc::internal, "the relay's round failed: " + failure_};
  auto r = std::move(it->second);
  answers_.erase(it);
  if (!r)
    return r.err();
  return relay_start{std::nullopt, std::move(*r)};
}

uint64_t relay_answers::ready(uint64_t model) const {
  std::lock_guard<std::mutex> lock{mutex_};
  auto s = streams_.find(model);
  return s == streams_.end() ? 0 : s->second.ready;
}

void relay_answers::put(uint64_t model, result<relay_result> r) {
  std::lock_guard<std::mutex> lock{mutex_};
  answers_.insert_or_assign(model, std::move(r));
  changed_.notify_all();
}

void relay_answers::fail_all(const std::string& why) {
  std::lock_guard<std::mutex> lock{mutex_};
  failure_ = why;
  changed_.notify_all();
}

void relay_answers::forget_before(uint64_t model) {
  std::lock_guard<std::mutex> lock{mutex_};
  answers_.erase(answers_.begin(), answers_.lower_bound(model));
  streams_.erase(streams_.begin(), streams_.lower_bound(model));
}

namespace {

relay_courier_actor::behavior_type
carrying(relay_courier_actor::pointer self, server_actor server,
         std::shared_ptr<relay_answers> answers) {
  self->monitor(server);
  self->set_down_handler([self, answers](caf::down_msg&) {
    answers->fail_all("the children's side stopped");
    self->quit();
  });
  // The models handed down and not yet answered, oldest first.
  auto open = std::make_shared<std::deque<uint64_t>>();
  auto answered = [open](uint64_t number) { std::erase(*open, number); };
  return {
      [self, server, answers, open, answered](relay_atom, relay_model& m,
                                              uint64_t number) {
        open->push_back(number);
        self->request(server, caf::infinite, relay_atom::value, std::move(m))
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
      // The parent's final model, for the children to evaluate: answered
      // with their evaluation (no sum) once they did.
      [self, server, answers](eval_atom, relay_model& m, uint64_t number) {
        self->request(server, caf::infinite, eval_atom::value, std::move(m))
            .then([answers, number](
                      relay_result& r) { answers->put(number, std::move(r)); },
                  [self, answers, number](caf::error& e) {
                    answers->put(number, error{errc::internal,
                                               "the relay's final evaluation "
                                               "failed: " +
                                                   self->system().render(e)});
                  });
      },
      [self, server](arrived_atom, uint64_t offset, uint64_t bytes) {
        self->send(server, arrived_atom::value, offset, bytes);
      },
      [answers, open](settled_atom, const relay_step& step) {
        if (!open->empty())
          answers->settled(open->front(), step);
      },
  };
}

} // namespace

relay_courier_actor
spawn_relay_courier(caf::actor_system& sys, server_actor server,
                    std::shared_ptr<relay_answers> answers) {
  return sys.spawn(carrying, std::move(server), std::move(answers));
}

} // namespace fedcaf
