// A send the receiver's interface does not declare does not compile: ctest
// typed_send_rejected builds this file with FEDCAF_UNDECLARED_SEND and
// expects CAF's "receiver does not accept given message"; the build of the
// tests compiles it without, so the declared send is known to compile.

#include <string>

#include <caf/all.hpp>

#include "actors/interfaces.hpp"

namespace fedcaf {

void tell_the_aggregator(caf::event_based_actor* self,
                         const aggregator_actor& aggregator) {
#ifdef FEDCAF_UNDECLARED_SEND
  // The aggregator declares no join: only a scheduler takes one.
  self->send(aggregator, join_atom::value, std::string{"Client1"});
#else
  self->send(aggregator, expect_atom::value, uint32_t{2});
#endif
}

} // namespace fedcaf
