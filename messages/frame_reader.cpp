#include "messages/frame_reader.hpp"

#include <endian.h>

#include <cstring>
#include <new>

namespace fedcaf::msg {

namespace {

uint32_t u32_at(const std::array<char, frame_header_bytes>& h, size_t at) {
  uint32_t x = 0;
  std::memcpy(&x, h.data() + at, sizeof x);
  return le32toh(x);
}

} // namespace

std::span<char> frame_reader::next() {
  if (expected_ == 0)
    return {header_.data() + have_, frame_header_bytes - have_};
  if (body_.size() < expected_)
    body_.resize(expected_); // written in place from here on (TLS)
  return {body_.data() + have_, expected_ - have_};
}

result<std::optional<frame>> frame_reader::commit(size_t n) {
  if (failed_)
    return error{errc::malformed_frame, "the stream failed before"};
  have_ += n;
  if (expected_ == 0) {
    if (have_ < frame_header_bytes)
      return std::optional<frame>{};
    if (auto ok = start_body(); !ok) {
      failed_ = true;
      return ok.err();
    }
  }
  if (have_ < expected_)
    return std::optional<frame>{};
  return std::optional<frame>{take_frame()};
}

frame frame_reader::take_frame() {
  body_.resize(expected_); // no-op: the frame is complete
  have_ = 0;
  expected_ = 0;
  return std::move(body_);
}

result<void> frame_reader::start_body() {
  auto flags = u32_at(header_, 4);
  auto segments_minus_one = u32_at(header_, 8);
  uint64_t words = u32_at(header_, 12);
  FEDCAF_REQUIRE(flags == 0, errc::malformed_frame, flags);
  FEDCAF_REQUIRE(segments_minus_one == 0, errc::malformed_frame,
                 segments_minus_one);
  FEDCAF_REQUIRE(words > 0, errc::malformed_frame, words);
  auto total = frame_header_bytes + words * 8;
  FEDCAF_REQUIRE(total <= max_frame_bytes_, errc::frame_too_large, total,
                 max_frame_bytes_);
  try {
    body_.clear();
    body_.reserve(total);
  } catch (const std::bad_alloc&) {
    return error{errc::out_of_memory,
                 "a frame of " + std::to_string(total) + " bytes"};
  }
  body_.insert(body_.end(), header_.begin(), header_.end());
  expected_ = total;
  return {};
}

} // namespace fedcaf::msg
