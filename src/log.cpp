#include "fedcaf/log.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <string>

namespace fedcaf {

namespace {

/// The longest message written as it is; a longer one is cut there.
constexpr size_t max_message = 1024;

/// `text` as one printable line: control bytes (a peer's newline or
/// terminal escape) become \xNN, and a text past max_message is cut, so
/// that what a peer sends can neither forge log lines nor flood the log.
std::string printable(std::string_view text) {
  std::string out;
  out.reserve(std::min(text.size(), max_message) + 16);
  for (size_t i = 0; i < text.size(); ++i) {
    if (out.size() >= max_message) {
      out += "... (" + std::to_string(text.size() - i) + " more bytes)";
      break;
    }
    auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7f) {
      static constexpr char hex[] = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

} // namespace

void log_line(std::string_view who, std::string_view message) {
  static std::mutex mtx; // guards stderr only; no state is shared
  auto name = printable(who);
  auto line = printable(message);
  auto now = std::chrono::system_clock::now();
  auto t = std::chrono::system_clock::to_time_t(now);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                now.time_since_epoch())
                .count() %
            1000;
  std::tm tm{};
  localtime_r(&t, &tm);
  std::lock_guard<std::mutex> guard{mtx};
  std::fprintf(stderr, "%02d:%02d:%02d.%03d %.*s: %.*s\n", tm.tm_hour,
               tm.tm_min, tm.tm_sec, static_cast<int>(ms),
               static_cast<int>(name.size()), name.data(),
               static_cast<int>(line.size()), line.data());
}

} // namespace fedcaf
