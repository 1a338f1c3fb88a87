#pragma once
// The rounds the scheduler's protocol tests drive: a roster of three
// clients in round 1, and offers with the figures a test names.

#include <string>

#include "protocol/round_roster.hpp"

namespace fedcaf::testing {

/// A, B, C registered (from host-A, host-B, host-C); round 1 open with all
/// three.
inline round_roster three_clients(round_roster::terms t = {}) {
  round_roster r(t);
  for (auto id : {"A", "B", "C"})
    r.join(id, std::string("host-") + id);
  r.start(1);
  return r;
}

/// `id` offers with these figures, admitted with `weight`.
inline void offer(round_roster& r, const std::string& id, double loss = 0,
                  double epsilon = 0, double weight = 1) {
  msg::offer o;
  o.client_id = id;
  o.train_loss = loss;
  o.dp_epsilon = epsilon;
  r.offer(o, weight);
}

} // namespace fedcaf::testing
