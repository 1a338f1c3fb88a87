// libFuzzer target for every decoder of peer input. Build with
// -DFEDCAF_FUZZ=ON and CXX=clang++; run build/tests/codec_fuzz
// -max_total_time=60. A decoder may refuse anything; it must never crash, hang
// or read out of bounds, and whatever it accepts must re-encode to a frame it
// accepts again.

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "messages/codec.hpp"

using namespace fedcaf;
using namespace fedcaf::msg;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  frame f(data, data + size);
  if (auto c = decode_chunk(f, 1 << 20)) {
    auto again =
        encode_chunk(c->header, c->bytes.size(), [&](std::span<std::byte> dst) {
          std::memcpy(dst.data(), c->bytes.data(), c->bytes.size());
        });
    if (!decode_chunk(again, 1 << 20))
      __builtin_trap();
  }
  if (auto r = decode<round_start>(f))
    if (!decode<round_start>(encode(*r)))
      __builtin_trap();
  // Figures that decode are within the rules, and encode to the same.
  if (auto e = decode<evaluation>(f)) {
    if (!check_named_values(e->metrics, "fuzz"))
      __builtin_trap();
    auto again = decode<evaluation>(encode(*e));
    if (!again || again->metrics != e->metrics)
      __builtin_trap();
  }
  if (auto o = decode<offer>(f))
    if (!check_named_values(o->metrics, "fuzz"))
      __builtin_trap();
  // Secure aggregation: what decodes is within the limits and re-encodes.
  if (auto k = decode<secagg_keys>(f))
    if (!decode<secagg_keys>(encode(*k)))
      __builtin_trap();
  if (auto r = decode<secagg_roster>(f))
    if (r->neighbours.size() > max_secagg_neighbours ||
        !decode<secagg_roster>(encode(*r)))
      __builtin_trap();
  if (auto s = decode<secagg_shares>(f))
    if (!decode<secagg_shares>(encode(*s)))
      __builtin_trap();
  if (auto r = decode<secagg_receipt>(f))
    if (!decode<secagg_receipt>(encode(*r)))
      __builtin_trap();
  if (auto u = decode<secagg_unmask>(f))
    if (!decode<secagg_unmask>(encode(*u)))
      __builtin_trap();
  (void)decode<hello>(f);
  (void)decode<welcome>(f);
  (void)decode<accept>(f);
  (void)decode<credit>(f);
  (void)decode<fetch>(f);
  (void)decode<end_of_stream>(f);
  (void)decode<stream_closed>(f);
  (void)decode<done>(f);
  return 0;
}
