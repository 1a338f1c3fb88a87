#include "fedcaf/work_pool.hpp"

#include <algorithm>

namespace fedcaf {

work_pool::work_pool(unsigned threads) {
  for (unsigned i = 1; i < threads; ++i)
    helpers_.emplace_back([this] { serve(); });
}

work_pool::~work_pool() {
  {
    std::lock_guard lock{mutex_};
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : helpers_)
    t.join();
}

void work_pool::run(unsigned parts, const std::function<void(unsigned)>& f) {
  if (parts == 0)
    return;
  if (helpers_.empty() || parts == 1) {
    for (unsigned i = 0; i < parts; ++i)
      f(i);
    return;
  }
  {
    std::lock_guard lock{mutex_};
    job_ = &f;
    parts_ = parts;
    next_ = 0;
    finished_ = 0;
    ++run_;
  }
  // As many helpers as there are parts beside the caller's first: the
  // others sleep on (a helper still awake sees the run by itself).
  auto wanted = std::min<size_t>(parts - 1, helpers_.size());
  for (size_t i = 0; i < wanted; ++i)
    wake_.notify_one();
  take_parts();
  std::unique_lock lock{mutex_};
  done_.wait(lock, [this] { return finished_ == parts_; });
  job_ = nullptr;
}

void work_pool::take_parts() {
  std::unique_lock lock{mutex_};
  while (job_ && next_ < parts_) {
    auto part = next_++;
    const auto* job = job_;
    lock.unlock();
    (*job)(part);
    lock.lock();
    if (++finished_ == parts_)
      done_.notify_all();
  }
}

void work_pool::serve() {
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock lock{mutex_};
      wake_.wait(lock, [&] { return stop_ || run_ != seen; });
      if (stop_)
        return;
      seen = run_;
    }
    take_parts();
  }
}

} // namespace fedcaf
