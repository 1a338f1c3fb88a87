#pragma once
// Why the program running a client leaves (a signal, its own code's
// exception, a wrong model), noted by the program's thread and read by the
// client actor: whatever ends the client afterwards (its trainer stopped
// first on the same stop, say), it ends with this goodbye, once.
// No CAF. Thread-safety: every member may be called from any thread.

#include <mutex>
#include <optional>

#include "messages/codec.hpp"

namespace fedcaf {

class departure {
public:
  /// The program leaves for `why`; the first reason given stands.
  void note(msg::goodbye why) {
    std::lock_guard<std::mutex> guard{mtx_};
    if (!why_)
      why_ = std::move(why);
  }

  /// The reason noted, if any.
  std::optional<msg::goodbye> noted() const {
    std::lock_guard<std::mutex> guard{mtx_};
    return why_;
  }

private:
  mutable std::mutex mtx_;
  std::optional<msg::goodbye> why_;
};

} // namespace fedcaf
