// The idle timeout of a transfer, with the time passed in by hand.

#include <doctest/doctest.h>

#include "protocol/transfer_watchdog.hpp"

using namespace fedcaf;
using std::chrono::milliseconds;

TEST_CASE("a transfer is stuck only after the idle timeout without moving") {
  transfer_watchdog w{milliseconds{400}};
  transfer_watchdog::time_point t0{milliseconds{10000}};
  CHECK_FALSE(w.active());
  CHECK_FALSE(w.stuck(t0 + milliseconds{5000})); // no transfer
  w.start(t0);
  CHECK(w.active());
  CHECK_FALSE(w.stuck(t0 + milliseconds{400}));
  w.moved(t0 + milliseconds{300});
  CHECK_FALSE(w.stuck(t0 + milliseconds{700}));
  auto why = w.stuck(t0 + milliseconds{701});
  REQUIRE(why);
  CHECK(*why == "no chunk or credit moved for 400 ms");
  w.stop();
  CHECK_FALSE(w.stuck(t0 + milliseconds{9000}));
}
