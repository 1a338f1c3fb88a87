// A gateway's timer tick, from its limits.

#include <doctest/doctest.h>

#include "protocol/gateway_limits.hpp"

using namespace fedcaf;
using std::chrono::milliseconds;

TEST_CASE("gateway limits: the tick is a quarter of the shortest timeout, "
          "within 20 ms to 1 s") {
  gateway_limits l;
  CHECK(tick_interval(l) == milliseconds{1000}); // 5 s heartbeat / 4, capped
  l.heartbeat = milliseconds{2000};
  CHECK(tick_interval(l) == milliseconds{500});
  l.handshake_timeout = milliseconds{400};
  CHECK(tick_interval(l) == milliseconds{100});
  l.connection_timeout = milliseconds{40};
  CHECK(tick_interval(l) == milliseconds{20}); // 10 ms, raised
}
