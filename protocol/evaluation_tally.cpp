#include "protocol/evaluation_tally.hpp"

#include <algorithm>
#include <utility>

namespace fedcaf {

uint64_t evaluation_tally::capped(uint64_t samples) const {
  samples = std::min(samples, msg::max_evaluation_samples);
  return max_sample_size_ ? std::min(samples, max_sample_size_) : samples;
}

uint64_t evaluation_tally::offered(const std::string& id, uint64_t samples,
                                   bool partial_sum) {
  if (partial_sum)
    relays_.insert(id);
  auto weight = by_samples_ || partial_sum ? capped(samples) : 1;
  offered_[id] = weight;
  return weight;
}

uint64_t evaluation_tally::weight_of(const std::string& id,
                                     uint64_t claimed) const {
  if (!by_samples_ && relays_.count(id) == 0)
    return 1;
  auto weight = capped(claimed);
  if (auto it = offered_.find(id); it != offered_.end())
    weight = std::min(weight, it->second);
  return weight;
}

void evaluation_tally::serve(uint32_t round) {
  previous_ = std::move(current_);
  current_ = model_evaluations{round, {}, {}};
}

result<const model_evaluations*>
evaluation_tally::add(const std::string& id, const msg::evaluation& e) {
  auto* of = e.round == current_.round                  ? &current_
             : previous_ && e.round == previous_->round ? &*previous_
                                                        : nullptr;
  if (!of)
    return error{errc::wrong_round, id + " evaluated the model of round " +
                                        std::to_string(e.round) +
                                        "; the model served is " +
                                        std::to_string(current_.round) + "'s"};
  if (!of->by.insert(id).second)
    return error{errc::bad_sequence, id + " evaluated round " +
                                         std::to_string(e.round) +
                                         "'s model a second time"};
  of->sum.add(weight_of(id, e.sample_count), e.metrics);
  return of;
}

void evaluation_tally::begin_final_pass(size_t clients) {
  final_pass_ = true;
  expected_ = clients;
}

std::string evaluation_tally::initial_line(const model_evaluations& of) {
  auto m = of.sum.mean();
  std::string line = "clients' evaluation of the initial model:";
  for (const auto& [name, value] : m.means)
    line += " " + name + " " + std::to_string(value);
  return line;
}

std::string evaluation_tally::overdue_line() const {
  return "final evaluation: " + std::to_string(current_.by.size()) + " of " +
         std::to_string(expected_) + " clients answered within the time limit";
}

} // namespace fedcaf
