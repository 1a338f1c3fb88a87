// fedcaf::errc across an actor boundary: a request that fails with a
// fedcaf::error reaches its requester with the same code and message.

#include <chrono>
#include <optional>

#include <caf/all.hpp>
#include <doctest/doctest.h>

#include "actors/errors.hpp"

using namespace fedcaf;
using namespace std::chrono_literals;

namespace {

using probe_atom = caf::atom_constant<caf::atom("probe")>;

/// Fails every probe with the errc it names.
caf::behavior failing_actor(caf::event_based_actor*) {
  return {
      [](probe_atom, uint8_t code) -> caf::result<int> {
        return to_caf(error{static_cast<errc>(code), "chunk 3 of client A"});
      },
  };
}

} // namespace

TEST_CASE("errors: a fedcaf::error keeps its code and message across a "
          "caf::error") {
  for (auto code : {errc::malformed_frame, errc::bad_checksum,
                    errc::poisoned_update, errc::bad_config, errc::internal,
                    errc::too_many_requests, errc::cancelled}) {
    auto back = from_caf(to_caf(error{code, "why"}));
    CHECK(back.code == code);
    CHECK(back.message == "why");
  }
  caf::error implicit = errc::timeout;
  CHECK(from_caf(implicit).code == errc::timeout);
  CHECK(from_caf(implicit).message.empty());
  CHECK(from_caf(caf::make_error(caf::sec::request_receiver_down)).code ==
        errc::disconnected);
  CHECK(from_caf(caf::make_error(caf::sec::request_timeout)).code ==
        errc::timeout);
  CHECK(from_caf(caf::make_error(caf::sec::runtime_error, "x")).code ==
        errc::internal);
}

TEST_CASE("errors: a failed request reaches the requester typed, and the "
          "system renders it by name") {
  caf::actor_system_config cfg;
  add_errc_category(cfg);
  caf::actor_system sys{cfg};
  auto a = sys.spawn(failing_actor);
  caf::scoped_actor self{sys};
  std::optional<error> got;
  std::string rendered;
  self->request(a, 5s, probe_atom::value,
                static_cast<uint8_t>(errc::bad_checksum))
      .receive([](int) { FAIL("the probe did not fail"); },
               [&](caf::error& e) {
                 got = from_caf(e);
                 rendered = sys.render(e);
               });
  REQUIRE(got);
  CHECK(got->code == errc::bad_checksum);
  CHECK(got->message == "chunk 3 of client A");
  CHECK(rendered == "bad_checksum: chunk 3 of client A");
  self->send_exit(a, caf::exit_reason::user_shutdown);
}
