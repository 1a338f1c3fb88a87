#include "fedcaf/credit_window.hpp"

#include <doctest/doctest.h>

using namespace fedcaf;

TEST_CASE("at most window chunks are in flight") {
  credit_window w{10, 3};
  CHECK(w.take() == 0);
  CHECK(w.take() == 1);
  CHECK(w.take() == 2);
  CHECK_FALSE(w.can_send());
  CHECK(w.in_flight() == 3);
  CHECK(w.ack(0));
  CHECK(w.can_send());
  CHECK(w.take() == 3);
  CHECK(w.peak_in_flight() == 3);
}

TEST_CASE("credits must come back in order and only for chunks sent") {
  credit_window w{4, 2};
  w.take();
  w.take();
  auto wrong = w.ack(1);
  REQUIRE_FALSE(wrong);
  CHECK(wrong.err().code == errc::bad_sequence);
  CHECK(w.ack(0));
  CHECK(w.ack(1));
  CHECK_FALSE(w.ack(2)); // not sent yet
  while (w.can_send())
    w.take();
  CHECK(w.ack(2));
  CHECK(w.ack(3));
  CHECK(w.complete());
  CHECK_FALSE(w.can_send());
}
