#include "protocol/relay_residency.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace fedcaf {

namespace {

uint64_t page_bytes() {
  static const auto n = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  return n;
}

/// Each of `wakers` hears each of `positions` (outside the lock).
void wake_all(const std::vector<std::function<void(uint64_t)>>& wakers,
              const std::vector<uint64_t>& positions) {
  for (auto s : positions)
    for (const auto& w : wakers)
      w(s);
}

} // namespace

relay_residency::relay_residency(byte_buffer memory, chunk_plan plan,
                                 uint32_t cache)
    : memory_(std::move(memory)), plan_(std::move(plan)),
      cache_(std::max(1u, cache)), positions_(plan_.chunk_count()) {}

void relay_residency::set_asker(std::function<void(uint64_t, uint64_t)> ask) {
  std::lock_guard<std::mutex> lock{mutex_};
  ask_ = std::move(ask);
}

void relay_residency::add_waker(std::function<void(uint64_t)> wake) {
  std::lock_guard<std::mutex> lock{mutex_};
  wakers_.push_back(std::move(wake));
}

void relay_residency::set_download_waker(std::function<void()> wake) {
  std::lock_guard<std::mutex> lock{mutex_};
  download_waker_ = std::move(wake);
}

void relay_residency::set_sum_waker(std::function<void()> wake) {
  std::lock_guard<std::mutex> lock{mutex_};
  sum_waker_ = std::move(wake);
}

bool relay_residency::may_download(uint64_t offset, uint64_t bytes) {
  std::lock_guard<std::mutex> lock{mutex_};
  auto end = served_ + 2 * uint64_t{cache_}; // a window each side of the low
  auto limit = end >= plan_.chunk_count() ? plan_.total_bytes()
                                          : plan_.extent(end).model_offset;
  if (offset >= limit)
    return false;
  granted_ = std::max(granted_, offset + bytes);
  return true;
}

uint64_t relay_residency::served() const {
  std::lock_guard<std::mutex> lock{mutex_};
  return served_;
}

bool relay_residency::in_cache(uint64_t seq) const {
  return seq >= served_ && plan_.extent(seq).model_offset < granted_;
}

bool relay_residency::held_locked(uint64_t seq) const {
  return positions_[seq].needs != 0 || in_cache(seq);
}

void relay_residency::served_below(uint64_t seq) {
  advance(seq, 0);
}

void relay_residency::measured_below(uint64_t seq) {
  advance(0, seq);
}

void relay_residency::advance(uint64_t requested, uint64_t measured) {
  std::function<void()> wake;
  std::vector<uint64_t> woken;
  std::vector<std::function<void(uint64_t)>> wakers;
  {
    std::lock_guard<std::mutex> lock{mutex_};
    requested_ = std::max(requested_, requested);
    measured_ = std::max(measured_, measured);
    auto seq =
        std::min<uint64_t>(std::min(requested_, measured_), positions_.size());
    if (seq <= served_)
      return;
    auto from = std::exchange(served_, seq);
    for (auto s = from; s < seq; ++s) {
      auto& p = positions_[s];
      if (p.needs != 0) {
        p.resident = true; // it keeps the bytes the download wrote
        if (std::exchange(p.asked, false))
          woken.push_back(s); // asked for before the download had it
        continue;
      }
      p.resident = false;
      give_back(s);
    }
    wake = download_waker_;
    wakers = wakers_;
  }
  wake_all(wakers, woken);
  if (wake)
    wake();
}

void relay_residency::download_complete() {
  std::vector<uint64_t> woken;
  std::vector<std::function<void(uint64_t)>> wakers;
  {
    std::lock_guard<std::mutex> lock{mutex_};
    downloaded_ = true;
    for (uint64_t s = 0; s < positions_.size(); ++s)
      if (positions_[s].asked && in_cache(s)) { // it is in after all
        positions_[s].asked = false;
        woken.push_back(s);
      }
    wakers = wakers_;
  }
  wake_all(wakers, woken);
}

bool relay_residency::want(uint64_t seq, need why) {
  std::function<void(uint64_t, uint64_t)> ask;
  uint64_t offset = 0, bytes = 0;
  {
    std::lock_guard<std::mutex> lock{mutex_};
    auto& p = positions_[seq];
    p.needs |= why;
    if (p.resident || abandoned_ || (downloaded_ && in_cache(seq)))
      return true;
    if (p.asked)
      return false;
    p.asked = true;
    ask = ask_;
    offset = plan_.extent(seq).model_offset;
    bytes = plan_.extent(seq).bytes;
  }
  if (ask)
    ask(offset, bytes);
  return false;
}

bool relay_residency::would_ask(uint64_t seq) const {
  std::lock_guard<std::mutex> lock{mutex_};
  bool known = seq < positions_.size();
  bool resident = known && positions_[seq].resident;
  bool asked = known && positions_[seq].asked;
  return !(resident || asked || abandoned_ || (downloaded_ && in_cache(seq)));
}

void relay_residency::pin(uint64_t seq, need why) {
  std::lock_guard<std::mutex> lock{mutex_};
  positions_[seq].needs |= why;
}

void relay_residency::release(uint64_t seq, need why) {
  std::lock_guard<std::mutex> lock{mutex_};
  auto& p = positions_[seq];
  p.needs &= static_cast<uint8_t>(~why);
  if (p.needs == 0 && !in_cache(seq)) {
    p.resident = false;
    give_back(seq);
  }
}

std::vector<uint64_t> relay_residency::fill(uint64_t offset,
                                            std::span<const std::byte> bytes) {
  std::vector<uint64_t> made;
  std::vector<std::function<void(uint64_t)>> wakers;
  {
    std::lock_guard<std::mutex> lock{mutex_};
    auto [first, last] = touching(offset, std::max<uint64_t>(bytes.size(), 1));
    for (auto s = first; s < last; ++s) {
      auto& p = positions_[s];
      const auto& e = plan_.extent(s);
      bool inside = e.model_offset >= offset &&
                    e.model_offset + e.bytes <= offset + bytes.size();
      if (!p.asked || !inside)
        continue;
      p.asked = false;
      if (p.needs == 0 || p.resident)
        continue;
      std::memcpy(memory_.data() + e.model_offset,
                  bytes.data() + (e.model_offset - offset), e.bytes);
      p.resident = true;
      made.push_back(s);
    }
    if (bytes.empty()) { // could not be fetched: the round is given up
      abandoned_ = true;
      for (uint64_t s = 0; s < positions_.size(); ++s)
        if (std::exchange(positions_[s].asked, false))
          made.push_back(s);
    }
    wakers = wakers_;
  }
  wake_all(wakers, made);
  return made;
}

void relay_residency::hold_sum(uint64_t seq) {
  std::lock_guard<std::mutex> lock{mutex_};
  if (abandoned_)
    return; // it goes nowhere
  auto& p = positions_[seq];
  if (!(p.needs & sum)) {
    ++sums_;
    sum_bytes_ += plan_.extent(seq).bytes;
  }
  p.needs |= sum;
  p.resident = true;
  p.spilled = false;
}

void relay_residency::upstream_chunk(uint64_t bytes) {
  std::lock_guard<std::mutex> lock{mutex_};
  upstream_chunk_ = std::max(upstream_chunk_, bytes);
}

bool relay_residency::may_settle() const {
  std::lock_guard<std::mutex> lock{mutex_};
  return abandoned_ || sums_ < cache_ ||
         sum_bytes_ < upstream_chunk_ + 2 * plan_.chunk_bytes();
}

void relay_residency::abandon() {
  std::vector<uint64_t> asked;
  std::vector<std::function<void(uint64_t)>> wakers;
  std::function<void()> sum_wake;
  {
    std::lock_guard<std::mutex> lock{mutex_};
    if (std::exchange(abandoned_, true))
      return;
    for (uint64_t s = 0; s < positions_.size(); ++s)
      if (std::exchange(positions_[s].asked, false))
        asked.push_back(s);
    wakers = wakers_;
    sum_wake = sum_waker_;
  }
  wake_all(wakers, asked);
  if (sum_wake)
    sum_wake();
}

bool relay_residency::abandoned() const {
  std::lock_guard<std::mutex> lock{mutex_};
  return abandoned_;
}

void relay_residency::sent(uint64_t offset, uint64_t bytes) {
  std::function<void()> wake;
  {
    std::lock_guard<std::mutex> lock{mutex_};
    auto [first, last] = touching(offset, bytes);
    for (auto s = first; s < last; ++s) {
      auto& p = positions_[s];
      const auto& e = plan_.extent(s);
      auto end = e.model_offset + e.bytes;
      if (!(p.needs & sum) || end > offset + bytes)
        continue; // its last bytes are still to go
      if (!p.spilled)
        spill_.write({memory_.data() + e.model_offset, e.bytes},
                     e.model_offset);
      p.spilled = true;
      p.needs &= static_cast<uint8_t>(~sum);
      --sums_;
      sum_bytes_ -= e.bytes;
      if (p.needs == 0 && !in_cache(s)) {
        p.resident = false;
        give_back(s);
      }
    }
    wake = sum_waker_;
  }
  if (wake)
    wake();
}

result<void> relay_residency::restore_sums(uint64_t offset, uint64_t bytes) {
  std::lock_guard<std::mutex> lock{mutex_};
  if (auto ok = spill_.status(); !ok)
    return error{errc::io_error,
                 "the relay's sum kept for a resend: " + ok.err().message};
  auto [first, last] = touching(offset, bytes);
  for (auto s = first; s < last; ++s) {
    auto& p = positions_[s];
    if (!p.spilled || (p.needs & sum))
      continue;
    const auto& e = plan_.extent(s);
    if (!p.resident)
      if (auto ok = spill_.read({memory_.data() + e.model_offset, e.bytes},
                                e.model_offset);
          !ok)
        return error{errc::io_error,
                     "the relay's sum kept for a resend: " + ok.err().message};
    p.needs |= sum;
    p.resident = true;
    ++sums_;
    sum_bytes_ += e.bytes;
  }
  return {};
}

uint64_t relay_residency::held(need why) const {
  std::lock_guard<std::mutex> lock{mutex_};
  return static_cast<uint64_t>(
      std::count_if(positions_.begin(), positions_.end(),
                    [why](const position& p) { return p.needs & why; }));
}

uint64_t relay_residency::pages_given_back() const {
  std::lock_guard<std::mutex> lock{mutex_};
  return given_back_;
}

std::pair<uint64_t, uint64_t> relay_residency::touching(uint64_t offset,
                                                        uint64_t bytes) const {
  // Positions lie in model order, back to back.
  auto n = positions_.size();
  uint64_t lo = 0, hi = n;
  while (lo < hi) { // the first whose end passes offset
    auto mid = (lo + hi) / 2;
    const auto& e = plan_.extent(mid);
    if (e.model_offset + e.bytes <= offset)
      lo = mid + 1;
    else
      hi = mid;
  }
  auto first = lo;
  auto last = first;
  while (last < n && plan_.extent(last).model_offset < offset + bytes)
    ++last;
  return {first, last};
}

void relay_residency::give_back(uint64_t seq) {
  const auto& e = plan_.extent(seq);
  if (e.bytes == 0)
    return;
  auto page = page_bytes();
  auto first = e.model_offset / page * page;
  auto end = e.model_offset + e.bytes;
  uint64_t run_start = 0, run_end = 0;
  for (auto at = first; at < end; at += page) {
    auto [a, b] = touching(at, page);
    bool free = true;
    for (auto s = a; s < b && free; ++s)
      free = !held_locked(s);
    if (free && run_end == at) {
      run_end = at + page;
    } else if (free) {
      if (run_end > run_start)
        memory_.discard_pages(run_start, run_end - run_start);
      run_start = at;
      run_end = at + page;
    }
    if (free)
      ++given_back_;
  }
  if (run_end > run_start)
    memory_.discard_pages(run_start, run_end - run_start);
}

} // namespace fedcaf
