#include "protocol/log_pacer.hpp"

namespace fedcaf {

namespace {
constexpr const char* others = "other sources";
}

std::string log_pacer::summary(const std::string& source, const entry& e,
                               time_point now) const {
  auto s = std::chrono::duration_cast<std::chrono::seconds>(now - e.started);
  return std::to_string(e.counted) + " more refused from " + source +
         " in the last " + std::to_string(std::max<int64_t>(1, s.count())) +
         " s (logged: the first " + std::to_string(limits_.lines) +
         " per source every " + std::to_string(limits_.period.count()) + " s)";
}

void log_pacer::sweep(time_point now, std::vector<std::string>& summaries) {
  if (now - swept_ < limits_.period)
    return;
  swept_ = now;
  for (auto it = sources_.begin(); it != sources_.end();) {
    if (now - it->second.started <= limits_.period) {
      ++it;
      continue;
    }
    if (it->second.counted > 0)
      summaries.push_back(summary(it->first, it->second, now));
    it = sources_.erase(it);
  }
}

log_pacer::verdict log_pacer::note(const std::string& source, time_point now) {
  std::lock_guard<std::mutex> lock{mutex_};
  verdict v;
  sweep(now, v.summaries);
  auto it = sources_.find(source);
  if (it == sources_.end()) {
    auto key =
        sources_.size() < limits_.max_sources ? source : std::string{others};
    it = sources_.try_emplace(key, entry{now, 0, 0}).first;
  }
  auto& e = it->second;
  if (now - e.started > limits_.period) {
    if (e.counted > 0)
      v.summaries.push_back(summary(it->first, e, now));
    e = entry{now, 0, 0};
  }
  v.log = ++e.events <= limits_.lines;
  if (!v.log)
    ++e.counted;
  return v;
}

std::vector<std::string> log_pacer::flush(time_point now) {
  std::lock_guard<std::mutex> lock{mutex_};
  std::vector<std::string> out;
  swept_ = time_point{};
  sweep(now, out);
  return out;
}

size_t log_pacer::sources() const {
  std::lock_guard<std::mutex> lock{mutex_};
  return sources_.size();
}

} // namespace fedcaf
