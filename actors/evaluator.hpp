#pragma once
// The evaluator: takes each published global model, tests it on the test set
// and, if asked, writes it to a safetensors file, on a thread of its own so
// training and streaming never wait for it.
// Its interface: evaluator_actor (actors/interfaces.hpp).

#include <memory>
#include <string>

#include <caf/fwd.hpp>

#include "actors/interfaces.hpp"
#include "fedcaf/trainer.hpp"

namespace fedcaf {

/// Spawns a detached evaluator. A null `impl` answers evaluated = false; an
/// empty `save_path` saves nothing; "{round}" in it becomes the round.
evaluator_actor spawn_evaluator(caf::actor_system& sys,
                                std::shared_ptr<evaluator> impl,
                                std::string save_path);

} // namespace fedcaf
