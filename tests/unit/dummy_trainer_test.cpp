#include <doctest/doctest.h>

#include <atomic>
#include <cstring>
#include <memory>

#include "fedcaf/dummy_trainer.hpp"

using namespace fedcaf;

namespace {

/// The first float of the trainer's model.
float first_value(trainer& t) {
  float x = 0;
  std::memcpy(&x, t.parameters().tensors.front().data(), sizeof x);
  return x;
}

} // namespace

TEST_CASE("the dummy trainer adds its constant, and stops before a piece "
          "once asked") {
  auto made = make_dummy_trainer(synthetic_layout(2, 4096), 0.5f, 3);
  REQUIRE(made);
  auto& t = **made;
  auto stop = std::make_shared<std::atomic<bool>>(false);
  t.stop_when(stop);
  auto m = t.train();
  REQUIRE(m);
  CHECK(m->samples == 3);
  CHECK(first_value(t) == 0.5f);
  stop->store(true);
  auto stopped = t.train();
  REQUIRE_FALSE(stopped);
  CHECK(stopped.err().code == errc::cancelled);
  CHECK(first_value(t) == 0.5f); // no piece was touched
  t.stop_when(nullptr);
  REQUIRE(t.train());
  CHECK(first_value(t) == 1.0f);
}
