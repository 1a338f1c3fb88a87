#include "fedcaf/progress.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

namespace fedcaf {

double transfer_progress::now() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

void transfer_progress::round_started(uint32_t round, uint64_t expect_down,
                                      uint64_t expect_up) {
  round_ = round;
  for (auto* c : {&down_, &up_}) {
    c->done = 0;
    c->first_s = 0;
  }
  down_.expected = expect_down;
  up_.expected = expect_up;
}

void transfer_progress::expect(uint64_t down, uint64_t up) {
  down_.expected += down;
  up_.expected += up;
}

void transfer_progress::moved(counters& c, uint64_t bytes) {
  if (c.done.fetch_add(bytes) == 0) {
    double zero = 0;
    c.first_s.compare_exchange_strong(zero, now());
  }
}

void transfer_progress::moved_down(uint64_t bytes) {
  moved(down_, bytes);
}

void transfer_progress::moved_up(uint64_t bytes) {
  moved(up_, bytes);
}

transfer_progress::snapshot transfer_progress::read() const {
  snapshot s;
  s.round = round_;
  s.down = {down_.done, down_.expected, down_.first_s};
  s.up = {up_.done, up_.expected, up_.first_s};
  return s;
}

std::string human_bytes(double bytes) {
  static constexpr const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  size_t u = 0;
  while (bytes >= 1024 && u + 1 < std::size(units)) {
    bytes /= 1024;
    ++u;
  }
  char buf[32];
  if (u == 0)
    std::snprintf(buf, sizeof buf, "%.0f B", bytes);
  else
    std::snprintf(buf, sizeof buf, bytes < 10 ? "%.2f %s" : "%.1f %s", bytes,
                  units[u]);
  return buf;
}

namespace {

/// "1 h 02 min", "3 min 05 s", "7 s".
std::string human_seconds(double s) {
  auto t = static_cast<uint64_t>(std::ceil(std::max(0.0, s)));
  char buf[32];
  if (t >= 3600)
    std::snprintf(buf, sizeof buf, "%llu h %02llu min",
                  static_cast<unsigned long long>(t / 3600),
                  static_cast<unsigned long long>(t / 60 % 60));
  else if (t >= 60)
    std::snprintf(buf, sizeof buf, "%llu min %02llu s",
                  static_cast<unsigned long long>(t / 60),
                  static_cast<unsigned long long>(t % 60));
  else
    std::snprintf(buf, sizeof buf, "%llu s",
                  static_cast<unsigned long long>(t));
  return buf;
}

bool moving(const transfer_progress::direction& d) {
  return d.first_s > 0 && d.done < d.expected;
}

std::string direction_text(const char* name,
                           const transfer_progress::direction& d, double now) {
  auto done = std::min(d.done, d.expected);
  if (done >= d.expected)
    return std::string{name} + " done";
  std::string out = std::string{name} + " " + human_bytes(done) + " / " +
                    human_bytes(d.expected);
  auto elapsed = now - d.first_s;
  auto rate = elapsed > 0 ? static_cast<double>(done) / elapsed : 0.0;
  if (rate <= 0)
    return out;
  return out + ", " + human_bytes(rate) + "/s, ETA " +
         human_seconds(static_cast<double>(d.expected - done) / rate);
}

} // namespace

std::string transfer_line(const transfer_progress::snapshot& s, double now,
                          double after_s) {
  bool show = false;
  for (const auto* d : {&s.down, &s.up})
    show = show || (moving(*d) && now - d->first_s >= after_s);
  if (!show)
    return {};
  std::string out = "round " + std::to_string(s.round) + ":";
  const char* separator = " ";
  for (auto [name, d] : {std::pair{"down", &s.down}, std::pair{"up", &s.up}})
    if (d->first_s > 0 && d->expected > 0) {
      out += separator + direction_text(name, *d, now);
      separator = "  |  ";
    }
  return out;
}

} // namespace fedcaf
