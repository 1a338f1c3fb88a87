#pragma once
// Wake-ups across threads: a function, callable from any thread (a
// relay's upstream client's, its residency's, a trainer's), that sends an
// actor one message while the actor lives. It holds the actor weakly, so
// whoever keeps the function (a trainer, a residency that outlives the
// actor system's actors) never keeps the actor alive.
// Thread-safety: the function returned is safe to call from any thread.

#include <functional>

#include <caf/actor_cast.hpp>
#include <caf/actor_control_block.hpp>
#include <caf/send.hpp>

namespace fedcaf {

/// Returns a function that sends `(atom, args...)` to `self` (whose
/// handle type is Handle), or does nothing once `self` is gone.
template <class Handle, class... Args, class Self, class Atom>
std::function<void(Args...)> wake_up(Self* self, Atom atom) {
  return
      [weak = caf::actor_cast<caf::weak_actor_ptr>(self), atom](Args... args) {
        if (auto strong = caf::actor_cast<Handle>(weak))
          caf::anon_send(strong, atom, args...);
      };
}

} // namespace fedcaf
