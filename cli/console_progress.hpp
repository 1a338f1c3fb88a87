#pragma once
// The console's progress line: while a round's model or updates move for
// more than a second, one line below the log shows bytes, rate and ETA per
// direction, redrawn in place four times a second. Only when stderr is a
// terminal and the log level shows info lines; on a pipe or in a file
// nothing is drawn and the log stays as it is.

#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "fedcaf/progress.hpp"

namespace fedcaf::cli {

class console_progress {
public:
  console_progress();
  /// Stops drawing and removes the line.
  ~console_progress();
  console_progress(const console_progress&) = delete;
  console_progress& operator=(const console_progress&) = delete;

  /// What the actors count into; null when nothing is drawn (no terminal),
  /// so that they count nothing.
  std::shared_ptr<transfer_progress> meter() const { return meter_; }

private:
  void draw_until_stopped();

  std::shared_ptr<transfer_progress> meter_;
  double after_s_ = default_shown_after_s;
  std::mutex mtx_;
  std::condition_variable wake_;
  bool stop_ = false; ///< guarded by mtx_
  std::thread drawer_;
};

} // namespace fedcaf::cli
