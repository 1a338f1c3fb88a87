#include "actors/evaluator.hpp"

#include <caf/all.hpp>

#include "actors/protocol.hpp"
#include "fedcaf/log.hpp"

namespace fedcaf {

namespace {

caf::behavior evaluator_actor(caf::event_based_actor*,
                              std::shared_ptr<evaluator> impl) {
  return {
      [impl](eval_atom, const snapshot_ptr& s) {
        if (!impl)
          return caf::make_message(false, 0.0, 0.0);
        auto m = impl->evaluate(s->view());
        if (!m) {
          log_line("evaluator", to_string(m.err()));
          return caf::make_message(false, 0.0, 0.0);
        }
        return caf::make_message(true, m->loss, m->accuracy);
      },
  };
}

} // namespace

caf::actor spawn_evaluator(caf::actor_system& sys,
                           std::shared_ptr<evaluator> impl) {
  return sys.spawn<caf::detached>(evaluator_actor, std::move(impl));
}

} // namespace fedcaf
