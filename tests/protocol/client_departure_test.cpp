// client_departure: one goodbye at most, only where the server can take
// it, none after Done; the program's noted reason stands over what ends
// the client next.

#include <doctest/doctest.h>

#include <atomic>
#include <memory>

#include "protocol/client_departure.hpp"

using namespace fedcaf;

TEST_CASE("client departure: one goodbye, only where the server takes it") {
  client_departure d{nullptr, nullptr};
  CHECK_FALSE(d.may_say(false)); // registering again: not now
  CHECK(d.may_say(true));
  CHECK_FALSE(d.may_say(true)); // once
  auto e = d.left(msg::goodbye{msg::goodbye_reason::interrupted, ""});
  CHECK(e.code == errc::cancelled);
  CHECK(e.message == "left the run (interrupted): said goodbye to the server");
}

TEST_CASE("client departure: a goodbye never said is named so") {
  client_departure d{nullptr, nullptr};
  CHECK(d.left(std::nullopt).message ==
        "left the run (goodbye): no goodbye said (not connected)");
}

TEST_CASE("client departure: giving up says why, not after Done") {
  client_departure d{nullptr, nullptr};
  auto g = d.giving_up(error{errc::manifest_mismatch, "16 tensors, not 8"});
  REQUIRE(g);
  CHECK(g->reason == msg::goodbye_reason::wrong_model);
  auto x = d.exception(error{errc::internal, "boom"});
  REQUIRE(x);
  CHECK(x->reason == msg::goodbye_reason::user_exception);
  d.run_over();
  CHECK_FALSE(d.giving_up(error{errc::internal, "late"}));
  CHECK_FALSE(d.exception(error{errc::internal, "late"}));
}

TEST_CASE("client departure: the program's reason stands, once") {
  auto leaving = std::make_shared<departure>();
  client_departure d{leaving, nullptr};
  CHECK_FALSE(d.leaves_instead());
  leaving->note(msg::goodbye{msg::goodbye_reason::terminated, "SIGTERM"});
  REQUIRE(d.leaves_instead());
  CHECK(d.leaves_instead()->reason == msg::goodbye_reason::terminated);
  // The trainer stopped on the same signal: no goodbye of its own.
  CHECK_FALSE(d.giving_up(error{errc::cancelled, "stopped"}));
  auto e = d.left(d.leaves_instead());
  CHECK(e.message.find("terminated: SIGTERM") != std::string::npos);
  CHECK_FALSE(d.leaves_instead()); // left: its line is the report's
  CHECK(d.noted()); // still said at the end, if it could not go before
}

TEST_CASE("client departure: cancelled by the server's Done waits for it") {
  auto done = std::make_shared<std::atomic<bool>>(false);
  client_departure d{nullptr, done};
  CHECK_FALSE(d.done_coming(error{errc::cancelled, "stopped"}));
  done->store(true);
  CHECK(d.done_coming(error{errc::cancelled, "stopped"}));
  CHECK_FALSE(d.done_coming(error{errc::internal, "failed"}));
  // A program's own reason goes first.
  auto leaving = std::make_shared<departure>();
  leaving->note(msg::goodbye{msg::goodbye_reason::interrupted, ""});
  client_departure stopped{leaving, done};
  CHECK_FALSE(stopped.done_coming(error{errc::cancelled, "stopped"}));
}
