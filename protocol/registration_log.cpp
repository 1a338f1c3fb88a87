#include "protocol/registration_log.hpp"

#include <cstdio>

namespace fedcaf {

namespace {

/// 12345 as "12,345".
std::string grouped(uint64_t n) {
  auto digits = std::to_string(n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0)
      out += ',';
    out += digits[i];
  }
  return out;
}

} // namespace

std::optional<std::string> registration_log::note(const std::string& id,
                                                  const std::string& from,
                                                  time_point now) {
  ++total_;
  if (total_ <= first_) {
    since_ = now;
    auto line = "registered " + id + " from " + from;
    if (total_ == first_)
      line += " (more registrations are summed up once a second)";
    return line;
  }
  ++pending_;
  last_ = id + " from " + from;
  if (since_ && now - *since_ < std::chrono::seconds{1})
    return std::nullopt;
  return flush(now);
}

std::optional<std::string> registration_log::flush(time_point now) {
  if (pending_ == 0)
    return std::nullopt;
  char took[32];
  std::snprintf(took, sizeof took, "%.1f",
                since_ ? std::chrono::duration<double>(now - *since_).count()
                       : 0.0);
  auto line = "registered " + grouped(pending_) + " more client" +
              (pending_ == 1 ? "" : "s") + " in the last " + took + " s (" +
              grouped(total_) + " in all; the last: " + last_ + ")";
  pending_ = 0;
  since_ = now;
  return line;
}

} // namespace fedcaf
