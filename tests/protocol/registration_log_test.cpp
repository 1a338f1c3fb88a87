#include <doctest/doctest.h>

#include <chrono>
#include <string>

#include "protocol/registration_log.hpp"

using namespace fedcaf;
using std::chrono::milliseconds;

TEST_CASE("registrations: the first ten one line each, the rest summed up "
          "at most once a second, and what is left when the round starts") {
  registration_log log;
  registration_log::time_point t0{};
  int lines = 0;
  std::string last;
  // 10,000 clients in 2.5 s.
  for (int i = 1; i <= 10000; ++i) {
    auto line = log.note("Client" + std::to_string(i), "h:" + std::to_string(i),
                         t0 + milliseconds{i / 4});
    if (line) {
      ++lines;
      last = *line;
      if (i <= 10)
        CHECK(line->starts_with("registered Client" + std::to_string(i) +
                                " from h:"));
    }
  }
  CHECK(lines == 10 + 2); // sums at 1.0 s and 2.0 s
  CHECK(last == "registered 4,000 more clients in the last 1.0 s (8,008 in "
                "all; the last: Client8008 from h:8008)");
  auto rest = log.flush(t0 + milliseconds{2600});
  REQUIRE(rest);
  CHECK(rest->starts_with("registered 1,992 more clients in the last 0.6 s"));
  CHECK(rest->find("(10,000 in all; the last: Client10000 from h:10000)") !=
        std::string::npos);
  CHECK_FALSE(log.flush(t0 + milliseconds{3000})); // nothing left
  CHECK(log.total() == 10000);
}
