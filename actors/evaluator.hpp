#pragma once
// The evaluator: tests each published global model on the test set, on a
// thread of its own so training and streaming never wait for it.
// (eval_atom, snapshot_ptr) -> (evaluated, loss, accuracy).

#include <memory>

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

#include "fedcaf/trainer.hpp"

namespace fedcaf {

/// Spawns a detached evaluator. A null `impl` answers evaluated = false.
caf::actor spawn_evaluator(caf::actor_system& sys,
                           std::shared_ptr<evaluator> impl);

} // namespace fedcaf
