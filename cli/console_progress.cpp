#include "console_progress.hpp"

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <string>

#include "fedcaf/log.hpp"

namespace fedcaf::cli {

namespace {

/// FEDCAF_PROGRESS_AFTER_S (seconds, >= 0) when set and valid, so that a
/// test on a fast machine still sees the line of a short transfer; a value
/// that is not such a number is named in a warning and the default kept.
double shown_after_s() {
  const char* text = std::getenv("FEDCAF_PROGRESS_AFTER_S");
  if (text == nullptr)
    return default_shown_after_s;
  char* end = nullptr;
  double v = std::strtod(text, &end);
  if (end != text && *end == '\0' && std::isfinite(v) && v >= 0)
    return v;
  log_line(log_level::warning, "console",
           std::string{"FEDCAF_PROGRESS_AFTER_S="} + text +
               " is not a number of seconds >= 0; the progress line waits " +
               "the default second");
  return default_shown_after_s;
}

} // namespace

console_progress::console_progress() {
  if (!log_on_terminal() || current_log_level() > log_level::info)
    return;
  meter_ = std::make_shared<transfer_progress>();
  after_s_ = shown_after_s();
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
  std::unique_lock<std::mutex> lock{mtx_};
  while (!wake_.wait_for(lock, std::chrono::milliseconds{250},
                         [this] { return stop_; })) {
    auto line =
        transfer_line(meter_->read(), transfer_progress::now(), after_s_);
    if (line != shown) {
      log_status(line);
      shown = std::move(line);
    }
  }
}

} // namespace fedcaf::cli
