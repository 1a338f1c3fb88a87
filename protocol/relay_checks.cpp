#include "protocol/relay_checks.hpp"

#include "fedcaf/log.hpp"
#include "protocol/relay_residency.hpp"

namespace fedcaf {

relay_checks::relay_checks(const chunk_plan& plan, bool streams)
    : plan_(plan), streams_(streams) {}

// -- the parent's model ----------------------------------------------------------

bool relay_checks::adopt(const relay_model& m,
                         std::function<void(uint64_t)> resident,
                         std::function<void()> sent_up) {
  forget_globals(); // of the model before
  given_up_logged_ = false;
  arrival_ = m.arrival;
  // The residency of the children's plan, which the checks go by.
  residency_ =
      m.residency && m.residency->plan().chunk_count() == plan_.chunk_count()
          ? m.residency
          : nullptr;
  measuring_ = arrival_ && !arrival_->whole();
  measured_ = 0;
  if (residency_) {
    residency_->add_waker(std::move(resident));
    residency_->set_sum_waker(std::move(sent_up));
    if (!measuring_)
      residency_->measured_below(plan_.chunk_count());
  }
  return measuring_;
}

std::optional<error> relay_checks::refuse_offer(const std::string& id) const {
  if (arrival_ && !arrival_->whole())
    return model_arrival::early_offer(id);
  return std::nullopt;
}

std::pair<uint64_t, uint64_t> relay_checks::measurable(uint64_t upto) const {
  auto to = measured_;
  if (!residency_ || !measuring_)
    return {to, to};
  while (to < plan_.chunk_count() &&
         plan_.extent(to).model_offset + plan_.extent(to).bytes <= upto)
    ++to;
  return {measured_, to};
}

void relay_checks::measured(uint64_t to) {
  measured_ = std::max(measured_, to);
  if (residency_)
    residency_->measured_below(measured_);
}

void relay_checks::measured_all() {
  measuring_ = false;
  measured(plan_.chunk_count());
}

bool relay_checks::has_global() const {
  return !residency_ || !residency_->abandoned();
}

// -- g at a position, for the checks ---------------------------------------------

bool relay_checks::global_at(uint64_t seq) {
  if (present_.count(seq))
    return true;
  if (!held_g_.insert(seq).second)
    return false; // asked already
  if (!residency_->want(seq, relay_residency::check))
    return false;
  present_.insert(seq);
  return true;
}

bool relay_checks::filled(uint64_t seq) {
  if (!held_g_.count(seq))
    return false;
  if (residency_ && residency_->abandoned() && !given_up_logged_) {
    given_up_logged_ = true;
    log_line(log_level::warning, "aggregator",
             "the parent's model of the round could not be fetched again "
             "(its round is over, or the relay left it): the children's "
             "updates of this round are taken without the distance check "
             "and their sum goes nowhere");
  }
  present_.insert(seq);
  return true;
}

void relay_checks::forget_globals() {
  if (residency_)
    for (auto seq : held_g_)
      residency_->release(seq, relay_residency::check);
  held_g_.clear();
  present_.clear();
}

// -- settling ------------------------------------------------------------------------

bool relay_checks::may_settle(uint64_t seq) {
  // No more sums wait to go up than the cache, and g is in where nobody
  // delivered (sent_up and resident wake the aggregator).
  return !residency_ || (residency_->may_settle() && global_at(seq));
}

void relay_checks::settling(uint64_t seq) {
  if (residency_)
    residency_->hold_sum(seq);
}

void relay_checks::settled(uint64_t seq) {
  if (!residency_)
    return;
  residency_->release(seq, relay_residency::check);
  held_g_.erase(seq);
  present_.erase(seq);
}

// -- a streaming relay's round --------------------------------------------------------

bool relay_checks::stream_opened(uint32_t round) {
  if (!streams_ || round == stream_round_)
    return false;
  stream_round_ = round;
  stream_weight_ = 0;
  return true;
}

std::optional<double> relay_checks::stream_scale(uint64_t seq, double w) {
  if (!streams_ || !has_global()) // a round given up: its sum (checked in
    return std::nullopt;          // part) never goes up
  if (seq == 0)
    stream_weight_ = w;
  if (stream_weight_ <= 0)
    return std::nullopt; // nothing in position 0: the round sits out
  if (w == stream_weight_)
    return 1.0;
  return w > 0 ? stream_weight_ / w : stream_weight_;
}

void relay_checks::scale_sum(const chunk_plan& plan, byte_buffer& bytes,
                             const std::vector<double>& weights,
                             double weight) {
  for (uint64_t seq = 0; seq < plan.chunk_count() && seq < weights.size();
       ++seq) {
    if (weights[seq] == weight || weights[seq] <= 0)
      continue;
    const auto& e = plan.extent(seq);
    scale_floats(bytes.bytes().subspan(e.model_offset, e.bytes),
                 static_cast<float>(weight / weights[seq]));
    bytes.release(e.model_offset, e.bytes);
  }
}

void relay_checks::scale_floats(std::span<std::byte> values, float factor) {
  auto* x = reinterpret_cast<float*>(values.data());
  for (size_t i = 0; i < values.size() / sizeof(float); ++i)
    x[i] *= factor;
}

} // namespace fedcaf
