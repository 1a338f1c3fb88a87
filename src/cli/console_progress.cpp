#include "console_progress.hpp"

#include <chrono>
#include <string>

#include "fedcaf/log.hpp"

namespace fedcaf::cli {

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
  std::unique_lock<std::mutex> lock{mtx_};
  while (!wake_.wait_for(lock, std::chrono::milliseconds{250},
                         [this] { return stop_; })) {
    auto line = transfer_line(meter_->read(), transfer_progress::now());
    if (line != shown) {
      log_status(line);
      shown = std::move(line);
    }
  }
}

} // namespace fedcaf::cli
