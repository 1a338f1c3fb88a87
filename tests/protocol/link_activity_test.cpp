// The silence and stall deadlines of a connection, with the time passed in.

#include <doctest/doctest.h>

#include "protocol/link_activity.hpp"

using namespace fedcaf;
using std::chrono::milliseconds;

namespace {
const link_activity::time_point t0 =
    link_activity::time_point{} + std::chrono::hours{1};
} // namespace

TEST_CASE("link activity: silent only past the timeout since the last input") {
  link_activity a{t0, t0, false, true};
  CHECK_FALSE(a.silent_for(milliseconds{300}, t0 + milliseconds{300}));
  CHECK(a.silent_for(milliseconds{300}, t0 + milliseconds{301}));
}

TEST_CASE("link activity: stalled only with output pending that did not "
          "move") {
  link_activity a{t0, t0, false, true};
  CHECK_FALSE(a.stalled_for(milliseconds{300}, t0 + milliseconds{900}));
  a.output_pending = true;
  CHECK_FALSE(a.stalled_for(milliseconds{300}, t0 + milliseconds{300}));
  CHECK(a.stalled_for(milliseconds{300}, t0 + milliseconds{301}));
}
