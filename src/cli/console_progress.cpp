#include "console_progress.hpp"

#include <chrono>
#include <cstdlib>
#include <string>

#include "fedcaf/log.hpp"

namespace fedcaf::cli {

namespace {

/// How long a direction moves before the line is drawn: one second, or
/// FEDCAF_PROGRESS_AFTER_S (seconds, >= 0) so that a test on a fast machine
/// still sees the line of a short transfer.
double shown_after_s() {
  const char* text = std::getenv("FEDCAF_PROGRESS_AFTER_S");
  if (text == nullptr)
    return 1.0;
  char* end = nullptr;
  double v = std::strtod(text, &end);
  return end != text && *end == '\0' && v >= 0 ? v : 1.0;
}

} // namespace

console_progress::console_progress() {
  if (!log_on_terminal() || current_log_level() > log_level::info)
    return;
  meter_ = std::make_shared<transfer_progress>();
  drawer_ = std::thread{[this] { draw_until_stopped(); }};
}

console_progress::~console_progress() {
  if (!drawer_.joinable())
    return;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    stop_ = true;
  }
  wake_.notify_one();
  drawer_.join();
  log_status("");
}

void console_progress::draw_until_stopped() {
  std::string shown;
  const double after_s = shown_after_s();
  std::unique_lock<std::mutex> lock{mtx_};
  while (!wake_.wait_for(lock, std::chrono::milliseconds{250},
                         [this] { return stop_; })) {
    auto line =
        transfer_line(meter_->read(), transfer_progress::now(), after_s);
    if (line != shown) {
      log_status(line);
      shown = std::move(line);
    }
  }
}

} // namespace fedcaf::cli
