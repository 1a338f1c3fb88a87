// libFuzzer target for the gateway's byte-stream reader: arbitrary bytes,
// cut into reads at arbitrary points, go through msg::frame_reader exactly
// as a gateway feeds it (next/commit for one part, feed for the rest); each
// frame it yields is classified with kind_of and decoded as its kind. It may
// refuse anything; it must never crash, hang, read out of bounds, buffer a
// frame past its limit, or yield a frame whose size its header did not
// declare. Build with -DFEDCAF_FUZZ=ON and CXX=clang++; .ci/run runs it for
// 60 s.

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "messages/codec.hpp"
#include "messages/frame_reader.hpp"

using namespace fedcaf;
using namespace fedcaf::msg;

namespace {

constexpr uint64_t max_frame_bytes = 1 << 16;

void check(bool ok) {
  if (!ok)
    __builtin_trap();
}

void decode_as_its_kind(const frame& f) {
  check(f.size() >= frame_header_bytes && f.size() <= max_frame_bytes);
  uint32_t words = 0;
  std::memcpy(&words, f.data() + 12, sizeof words);
  check(f.size() == frame_header_bytes + uint64_t{words} * 8);
  auto kind = kind_of(f);
  if (!kind)
    return;
  switch (*kind) {
  case frame_kind::hello:
    (void)decode<hello>(f);
    break;
  case frame_kind::fetch:
    (void)decode<fetch>(f);
    break;
  case frame_kind::offer:
    (void)decode<offer>(f);
    break;
  case frame_kind::chunk:
    (void)decode_chunk(f, max_frame_bytes);
    break;
  case frame_kind::end_of_stream:
    (void)decode<end_of_stream>(f);
    break;
  case frame_kind::credit:
    (void)decode<credit>(f);
    break;
  case frame_kind::round_start:
    if (auto r = decode<round_start>(f))
      check(static_cast<bool>(decode<round_start>(encode(*r))));
    break;
  case frame_kind::welcome:
    (void)decode<welcome>(f);
    break;
  case frame_kind::accept:
    (void)decode<accept>(f);
    break;
  case frame_kind::stream_closed:
    (void)decode<stream_closed>(f);
    break;
  case frame_kind::done:
    (void)decode<done>(f);
    break;
  case frame_kind::round_over:
    (void)decode<round_over>(f);
    break;
  default:
    break;
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2)
    return 0;
  // The first two bytes choose how the rest is cut into reads.
  uint32_t cut_seed = data[0] | (data[1] << 8);
  auto bytes =
      std::span<const char>{reinterpret_cast<const char*>(data) + 2, size - 2};
  frame_reader reader{max_frame_bytes};
  bool half = true; // alternate between the two ways a gateway reads
  while (!bytes.empty()) {
    cut_seed = cut_seed * 1103515245u + 12345u;
    auto part = std::min<size_t>(bytes.size(), 1 + (cut_seed >> 16) % 97);
    auto piece = bytes.first(part);
    bytes = bytes.subspan(part);
    half = !half;
    if (half) {
      auto ok = reader.feed(piece, decode_as_its_kind);
      if (!ok)
        return 0;
      continue;
    }
    while (!piece.empty()) { // TLS: decrypt straight into next()
      auto dst = reader.next();
      check(!dst.empty());
      auto n = std::min(dst.size(), piece.size());
      std::memcpy(dst.data(), piece.data(), n);
      piece = piece.subspan(n);
      auto got = reader.commit(n);
      if (!got)
        return 0;
      if (*got)
        decode_as_its_kind(**got);
      check(reader.pending_bytes() <= max_frame_bytes);
    }
  }
  return 0;
}
