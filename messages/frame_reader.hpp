#pragma once
// Cuts a byte stream from a peer into frames (docs/protocol.md, "Framing").
// Every header is checked before a byte of its body is buffered: a frame
// larger than the limit, with flags set, or of more than one segment is
// refused from its first 16 bytes. Thread-safety: one owner.

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <span>

#include "fedcaf/error.hpp"
#include "messages/codec.hpp"

namespace fedcaf::msg {

class frame_reader {
public:
  /// Frames of more than `max_frame_bytes` (envelope included) are refused.
  explicit frame_reader(uint64_t max_frame_bytes)
      : max_frame_bytes_(max_frame_bytes) {}

  /// Changes the limit for frames whose header has not arrived yet.
  void set_max_frame_bytes(uint64_t n) { max_frame_bytes_ = n; }

  /// Returns where the next bytes of the stream go: the rest of a header, or
  /// the rest of a frame's body. Never empty. The span is valid until the
  /// next call of commit().
  std::span<char> next();

  /// Takes `n` bytes written into next(). Returns the frame iff it is now
  /// complete (moved out: the caller owns it), nothing iff more bytes are
  /// needed, and an error iff a header is invalid; after an error the
  /// reader is unusable. REQUIRES: n <= next().size().
  result<std::optional<frame>> commit(size_t n);

  /// Copies `bytes` in, calling `on_frame(frame&&)` for each completed
  /// frame. Returns the first header error. A body is appended to the
  /// frame's reserved memory, which is never zero-filled first.
  template <class OnFrame>
  result<void> feed(std::span<const char> bytes, OnFrame&& on_frame) {
    while (!bytes.empty()) {
      if (expected_ > 0 && body_.size() == have_) { // appending a body
        auto n = std::min<uint64_t>(bytes.size(), expected_ - have_);
        body_.insert(body_.end(), bytes.data(), bytes.data() + n);
        bytes = bytes.subspan(n);
        have_ += n;
        if (have_ == expected_)
          on_frame(take_frame());
        continue;
      }
      auto dst = next();
      auto n = std::min(dst.size(), bytes.size());
      std::copy_n(bytes.data(), n, dst.data());
      bytes = bytes.subspan(n);
      auto got = commit(n);
      if (!got)
        return got.err();
      if (*got)
        on_frame(std::move(**got));
    }
    return {};
  }

  /// Bytes received of the frame under way (0 between frames).
  uint64_t pending_bytes() const { return have_; }

private:
  result<void> start_body();
  frame take_frame();

  uint64_t max_frame_bytes_;
  std::array<char, frame_header_bytes> header_{};
  frame body_;            ///< the frame under way, once its header is known
  uint64_t have_ = 0;     ///< bytes of the current frame received
  uint64_t expected_ = 0; ///< its size, once its header is known
  bool failed_ = false;
};

} // namespace fedcaf::msg
