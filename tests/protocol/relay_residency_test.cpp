#include "protocol/relay_residency.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include <doctest/doctest.h>

using namespace fedcaf;

namespace {

constexpr uint64_t chunk = 16384; // 4 pages of 4 KiB

/// One float32 tensor of `chunks` chunks of 16 KiB.
chunk_plan plan_of(uint64_t chunks) {
  manifest m;
  m.tensors.push_back(
      make_tensor_info("w", dtype::float32, {chunks * chunk / 4}));
  return *chunk_plan::make(m, chunk);
}

/// How many of the pages of [offset, offset + bytes) are resident.
uint64_t resident_pages(const byte_buffer& b, uint64_t offset, uint64_t bytes) {
  auto page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> in((bytes + page - 1) / page);
  REQUIRE(::mincore(const_cast<std::byte*>(b.data()) + offset, bytes,
                    in.data()) == 0);
  uint64_t n = 0;
  for (auto c : in)
    n += c & 1;
  return n;
}

/// Writes `value` over position `seq` (as the download or a sum would).
void write_position(byte_buffer& b, const chunk_plan& p, uint64_t seq,
                    std::byte value) {
  const auto& e = p.extent(seq);
  std::memset(b.data() + e.model_offset, static_cast<int>(value), e.bytes);
}

} // namespace

TEST_CASE("a relay's model memory holds its download cache, the positions "
          "checked and the sums not yet gone up, and nothing else") {
  auto plan = plan_of(16);
  auto memory = byte_buffer::anonymous(plan.total_bytes());
  REQUIRE(memory);
  REQUIRE(memory->anonymous_mapping());
  relay_residency r{memory->share(), plan, 1}; // a window of 1 each side
  std::vector<std::pair<uint64_t, uint64_t>> asked;
  std::vector<uint64_t> woken;
  r.set_asker([&](uint64_t offset, uint64_t bytes) {
    asked.emplace_back(offset, bytes);
  });
  r.add_waker([&](uint64_t seq) { woken.push_back(seq); });
  int room = 0;
  r.set_download_waker([&] { ++room; });

  // The download may write the cache's 2 positions, no further.
  CHECK(r.may_download(0, chunk));
  CHECK(r.may_download(chunk, chunk));
  CHECK_FALSE(r.may_download(2 * chunk, chunk));
  for (uint64_t s = 0; s < 2; ++s)
    write_position(*memory, plan, s, std::byte{1});
  CHECK(resident_pages(*memory, 0, 2 * chunk) == 8);

  // Every child fetched position 0, and it is measured: it leaves the
  // cache, its pages go back, and the download may write position 2.
  r.served_below(1);
  CHECK(room == 0); // not measured yet
  r.measured_below(2);
  CHECK(room == 1);
  CHECK(r.served() == 1);
  CHECK(resident_pages(*memory, 0, chunk) == 0);
  CHECK(resident_pages(*memory, chunk, chunk) == 4);
  CHECK(r.may_download(2 * chunk, chunk));

  // The download goes on to the end as the children fetch.
  for (uint64_t s = 2; s < 16; ++s) {
    write_position(*memory, plan, s, std::byte{1});
    r.measured_below(s + 1);
    r.served_below(s - 1 + 1);
    CHECK(r.may_download((s + 1) * chunk, chunk) == (s + 1 < 16));
  }
  CHECK_FALSE(r.want(15, relay_residency::check)); // in the cache, but the
  REQUIRE(asked.size() == 1); // download is not known complete: asked for
  r.download_complete();      // until it is, then its waiters hear it
  CHECK(woken == std::vector<uint64_t>{15});
  CHECK(r.want(15, relay_residency::check));
  r.release(15, relay_residency::check);
  asked.clear();
  woken.clear();
  CHECK(resident_pages(*memory, 0, plan.total_bytes()) <= 2 * 4);

  // A check of position 3 (gone): fetched again, resident once filled.
  CHECK_FALSE(r.want(3, relay_residency::check));
  CHECK_FALSE(r.want(3, relay_residency::serve)); // asked once
  REQUIRE(asked.size() == 1);
  CHECK(asked[0] == std::pair{3 * chunk, chunk});
  std::vector<std::byte> g(chunk, std::byte{7});
  CHECK(r.fill(3 * chunk, g) == std::vector<uint64_t>{3});
  CHECK(woken == std::vector<uint64_t>{3});
  CHECK(memory->data()[3 * chunk + 5] == std::byte{7});
  CHECK(r.want(3, relay_residency::check));
  r.release(3, relay_residency::serve);
  CHECK(resident_pages(*memory, 3 * chunk, chunk) == 4); // still checked

  // Its sum settles in place, goes up, and is read back for a resend.
  r.hold_sum(3);
  r.release(3, relay_residency::check);
  CHECK(r.held(relay_residency::sum) == 1);
  write_position(*memory, plan, 3, std::byte{9});
  r.sent(3 * chunk, chunk / 2); // its last bytes are still to go
  CHECK(r.held(relay_residency::sum) == 1);
  r.sent(3 * chunk + chunk / 2, chunk / 2);
  CHECK(r.held(relay_residency::sum) == 0);
  CHECK(resident_pages(*memory, 3 * chunk, chunk) == 0);
  REQUIRE(r.restore_sums(3 * chunk + 100, 10));
  CHECK(r.held(relay_residency::sum) == 1);
  CHECK(memory->data()[3 * chunk + chunk - 1] == std::byte{9});
}

TEST_CASE("a relay settles no more sums than its cache while they wait to "
          "go up, and a page two positions share goes back with both") {
  manifest m; // positions of 6 KiB: pages are shared
  m.tensors.push_back(make_tensor_info("w", dtype::float32, {6 * 1536}));
  auto plan = *chunk_plan::make(m, 6144);
  auto memory = byte_buffer::anonymous(plan.total_bytes());
  REQUIRE(memory);
  relay_residency r{memory->share(), plan, 2};
  int room = 0;
  r.set_sum_waker([&] { ++room; });
  CHECK(r.may_settle());
  r.hold_sum(0);
  write_position(*memory, plan, 0, std::byte{1});
  r.hold_sum(1);
  write_position(*memory, plan, 1, std::byte{2});
  CHECK_FALSE(r.may_settle());
  r.upstream_chunk(3 * 6144); // the upload waits for 3 positions at once
  CHECK(r.may_settle());
  r.upstream_chunk(6144); // the largest is kept
  CHECK(r.may_settle());
  r.sent(0, 6144); // position 0's second page is position 1's first
  CHECK(room == 1);
  CHECK(r.may_settle());
  CHECK(resident_pages(*memory, 0, 4096) == 0);
  CHECK(resident_pages(*memory, 4096, 4096) == 1);
  CHECK(memory->data()[6144] == std::byte{2});
  r.sent(6144, 6144);
  CHECK(resident_pages(*memory, 0, 3 * 4096) == 0);
}
