#include "protocol/refetch_queue.hpp"

#include "fedcaf/log.hpp"

namespace fedcaf {

refetch_queue::refetch_queue(std::string who, reader read, giver give)
    : who_(std::move(who)), read_(std::move(read)), give_(std::move(give)) {}

void refetch_queue::ask(uint32_t round, uint64_t offset, uint64_t bytes,
                        std::vector<std::pair<uint64_t, msg::frame>> fetches) {
  auto p = std::make_shared<part>();
  p->bytes.resize(bytes);
  p->left = fetches.size();
  p->round = round;
  for (auto& [seq, f] : fetches)
    queue_.push_back({seq, std::move(f), offset, p});
}

std::vector<refetch_queue::outgoing> refetch_queue::next(uint32_t round,
                                                         uint32_t window) {
  std::vector<outgoing> out;
  while (!queue_.empty() && in_flight_ < std::max(1u, window)) {
    auto r = std::move(queue_.front());
    queue_.pop_front();
    if (r.of->round != round)
      continue; // asked in a round before: nobody waits for it
    if (last_ && last_->round == r.of->round && last_->seq == r.seq) {
      took(r, last_->reply, round);
      continue;
    }
    auto [waiting, first] = waiting_.try_emplace(r.seq);
    waiting->second.push_back(r);
    if (!first)
      continue; // its chunk is on its way
    ++in_flight_;
    out.push_back({r.seq, r.frame, r.of->round, epoch_});
  }
  return out;
}

void refetch_queue::answered(const outgoing& sent, msg::frame reply,
                             uint32_t round) {
  if (sent.epoch != epoch_)
    return; // its connection is gone: asked again
  --in_flight_;
  // Kept without a copy: the next positions it covers use it.
  last_ = answer{sent.round, sent.seq, std::move(reply)};
  auto waiting = waiting_.extract(sent.seq);
  if (!waiting.empty())
    for (const auto& w : waiting.mapped())
      took(w, last_->reply, round);
}

void refetch_queue::failed(const outgoing& sent) {
  if (sent.epoch != epoch_)
    return;
  --in_flight_;
  auto waiting = waiting_.extract(sent.seq);
  if (!waiting.empty())
    for (auto& w : waiting.mapped())
      queue_.push_front(std::move(w));
}

void refetch_queue::lost() {
  ++epoch_;
  in_flight_ = 0;
  for (auto& [seq, waiting] : std::exchange(waiting_, {}))
    for (auto& w : waiting)
      queue_.push_front(std::move(w));
}

void refetch_queue::took(const request& r, const msg::frame& reply,
                         uint32_t round) {
  auto& p = *r.of;
  if (p.failed || round != p.round)
    return;
  if (auto ok = read_(r.seq, reply, r.offset, p.bytes); !ok) {
    p.failed = true;
    log_line(log_level::warning, who_,
             "fetching model bytes again: " + ok.err().message);
    return give_(r.offset, {});
  }
  if (--p.left == 0)
    give_(r.offset, p.bytes);
}

} // namespace fedcaf
