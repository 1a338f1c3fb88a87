// The spill folder's room, checked before a window-mode relay's first
// round: a folder too small is named with its room and what is needed.

#include <doctest/doctest.h>

#include <cstdlib>

#include "fedcaf/byte_buffer.hpp"

using namespace fedcaf;

TEST_CASE("spill_room: ok where the folder has room, else it names the "
          "folder, its room and the need") {
  CHECK(spill_room(1, "a test"));
  auto full = spill_room(uint64_t{1} << 62, "a window-mode relay");
  REQUIRE_FALSE(full);
  CHECK(full.err().code == errc::io_error);
  CHECK(full.err().message.find("a window-mode relay may write up to") == 0);
  CHECK(full.err().message.find(spill_dir()) != std::string::npos);
  CHECK(full.err().message.find("set TMPDIR") != std::string::npos);
}
