#include "protocol/round_roster.hpp"

#include <algorithm>
#include <random>

namespace fedcaf {

void round_roster::join(const std::string& id, const std::string& from) {
  registered_.insert(id);
  addresses_[id] = from;
  if (!terms_.members)
    known_.insert(id);
  absences_.heard_from(id);
}

void round_roster::unregister(const std::string& id) {
  registered_.erase(id);
  if (terms_.members)
    if (auto i = terms_.members->index_of(id))
      excluded_.insert(*i);
}

std::string round_roster::address_of(const std::string& id) const {
  auto it = addresses_.find(id);
  return it == addresses_.end() ? std::string{} : it->second;
}

void round_roster::start(uint32_t r, uint32_t least) {
  round_ = r;
  overdue_ = false;
  offered_.clear();
  closed_.clear();
  missing_.clear();
  figures_.clear();
  participants_ = sample(r, least);
  if (!terms_.members)
    return;
  for (auto it = registered_.begin(); it != registered_.end();) {
    if (participants_.count(*it)) {
      ++it;
      continue;
    }
    addresses_.erase(*it);
    it = registered_.erase(it);
  }
}

std::set<std::string> round_roster::sample(uint32_t r, uint32_t least) const {
  if (terms_.members)
    return draw(r, member_pool(r, least),
                [this](uint32_t i) { return terms_.members->id_of(i); });
  std::vector<std::string> ids;
  ids.reserve(registered_.size());
  for (const auto& id : registered_)
    if (absences_.size() == 0 || absences_.eligible(id, r))
      ids.push_back(id);
  if (ids.size() < least)
    ids.assign(registered_.begin(), registered_.end());
  return draw(r, std::move(ids), [](std::string& id) { return std::move(id); });
}

template <class T, class Id>
std::set<std::string> round_roster::draw(uint32_t r, std::vector<T> pool,
                                         Id id) const {
  auto k = terms_.clients_per_round;
  if (k == 0 || k >= pool.size())
    k = static_cast<uint32_t>(pool.size());
  else {
    std::mt19937_64 rng{terms_.sampling_seed * 1000003ull + r};
    // A partial Fisher-Yates shuffle: the first k are a uniform sample.
    for (uint32_t i = 0; i < k; ++i) {
      std::uniform_int_distribution<size_t> pick{i, pool.size() - 1};
      std::swap(pool[i], pool[pick(rng)]);
    }
  }
  std::set<std::string> out;
  for (uint32_t i = 0; i < k; ++i)
    out.insert(id(pool[i]));
  return out;
}

std::vector<uint32_t> round_roster::member_pool(uint32_t r,
                                                uint32_t least) const {
  const auto& members = *terms_.members;
  std::set<uint32_t> passed_over;
  absences_.for_each_passed_over(r, [&](const std::string& id) {
    if (auto i = members.index_of(id))
      passed_over.insert(*i);
  });
  std::vector<uint32_t> pool;
  pool.reserve(members.size());
  for (auto i : members.in_id_order())
    if (!excluded_.count(i) && !passed_over.count(i))
      pool.push_back(i);
  if (pool.size() >= least || passed_over.empty())
    return pool;
  pool.clear();
  for (auto i : members.in_id_order())
    if (!excluded_.count(i))
      pool.push_back(i);
  return pool;
}

round_view round_roster::view_of(const std::string& id, bool finalizing,
                                 bool sitting_out) const {
  return {round_,
          finalizing,
          sitting_out,
          registered_.count(id) > 0,
          participants_.count(id) > 0,
          missing_.count(id) > 0,
          offered_.count(id) > 0};
}

void round_roster::offer(const msg::offer& o, double weight) {
  offered_.insert(o.client_id);
  figures_.try_emplace(
      o.client_id,
      offered_figures{msg::bounded_loss(o.train_loss), o.dp_epsilon, weight});
}

bool round_roster::close(const std::string& id) {
  if (!offered_.count(id))
    return false;
  closed_.insert(id);
  absences_.delivered(id);
  return true;
}

std::optional<std::string> round_roster::rejected(const std::string& id,
                                                  const std::string& why,
                                                  errc code) {
  if (!leave(id))
    return std::nullopt;
  bool miss = code == errc::timeout || code == errc::poisoned_update;
  return "round " + std::to_string(round_) + ": " + id +
         " leaves the round: " + why +
         (miss ? "; " + passed_over_line(missed(id)) : "");
}

std::string round_roster::kept_note(uint32_t round, const std::string& id,
                                    uint64_t folded) {
  return "round " + std::to_string(round) + ": the " + std::to_string(folded) +
         " chunks of " + id +
         "'s update folded before its refusal stay in the sum (each passed "
         "every check); nobody uploads again";
}

bool round_roster::leave(const std::string& id) {
  if (!participants_.erase(id))
    return false;
  missing_.insert(id);
  return true;
}

void round_roster::forget(const std::string& id) {
  offered_.erase(id);
  closed_.erase(id);
  figures_.erase(id);
}

round_roster::dropped round_roster::drop(const std::string& id,
                                         bool finalizing) {
  if (!leave(id))
    return dropped::not_in_round;
  if (!offered_.count(id))
    return dropped::before_offer;
  bool whole = closed_.count(id) > 0;
  if (terms_.stream_sums) { // its figures stay: its data is in the sum
    offered_.erase(id);
    closed_.erase(id);
    return whole ? dropped::whole_streamed : dropped::cut_streamed;
  }
  if (!whole && terms_.keep_partial) {
    offered_.erase(id); // its figures stay: its data is in the model
    return dropped::partial_kept;
  }
  if (!whole && !finalizing) {
    offered_.erase(id);
    figures_.erase(id);
    return dropped::partial_dropped;
  }
  forget(id);
  return finalizing ? dropped::forgotten : dropped::collect_again;
}

deadline_cut round_roster::cut_at_deadline(uint32_t min_clients, bool wait) {
  auto cut = fedcaf::cut_at_deadline(participants_, offered_, closed_,
                                     min_clients, wait);
  overdue_ = cut.wait;
  for (const auto& id : cut.not_offered) {
    leave(id);
    absences_.missed(id, round_);
  }
  return cut;
}

void round_roster::leave_without_stream(const std::vector<std::string>& ids) {
  for (const auto& id : ids)
    if (leave(id)) {
      offered_.erase(id);
      figures_.erase(id);
    }
}

void round_roster::leave_unoffered() {
  for (auto it = participants_.begin(); it != participants_.end();)
    if (offered_.count(*it)) {
      ++it;
    } else {
      missing_.insert(*it);
      it = participants_.erase(it);
    }
}

std::vector<std::string> round_roster::collect_again() {
  std::vector<std::string> again(offered_.begin(), offered_.end());
  offered_.clear();
  closed_.clear();
  return again;
}

std::string round_roster::short_of_clients(uint32_t num_clients,
                                           uint32_t min_clients) const {
  return "round " + std::to_string(round_) + " failed: only " +
         std::to_string(participants_.size()) + " of " +
         std::to_string(num_clients) +
         " clients can still deliver (missing: " + join_ids(missing_) +
         "), min_clients is " + std::to_string(min_clients);
}

std::string round_roster::cannot_start(uint32_t min_clients) const {
  return "round " + std::to_string(round_) +
         " cannot start: " + std::to_string(participants_.size()) +
         " clients are registered, min_clients is " +
         std::to_string(min_clients);
}

std::string round_roster::dropped_note(uint32_t round, const std::string& id,
                                       dropped how, uint64_t chunks) {
  auto lost = "round " + std::to_string(round) + ": " + id + " was dropped ";
  if (how != dropped::partial_kept && how != dropped::cut_streamed)
    return lost + "before sending a chunk";
  return lost + "mid-upload; its " + std::to_string(chunks) +
         " delivered chunks " +
         (how == dropped::partial_kept ? "are kept"
                                       : "stay in the relay's sum");
}

std::string round_roster::collecting_again(const std::string& gone,
                                           const std::string& why) const {
  return "round " + std::to_string(round_) + ": " + gone + " left: " + why +
         "; collecting the updates of " + join_ids(offered_) + " again";
}

double round_roster::mean_offered_loss() const {
  double loss = 0;
  for (const auto& [id, f] : figures_)
    loss += f.train_loss;
  return loss / static_cast<double>(std::max<size_t>(1, figures_.size()));
}

round_roster::offered_figures
round_roster::figures_of(const std::string& id) const {
  auto it = figures_.find(id);
  return it == figures_.end() ? offered_figures{} : it->second;
}

double round_roster::closed_weight() const {
  double weight = 0;
  for (const auto& id : closed_)
    weight += figures_of(id).weight;
  return weight;
}

round_roster::round_figures
round_roster::figures(const std::map<std::string, uint64_t>& relays) const {
  round_figures out;
  out.clients = static_cast<uint32_t>(closed_.size());
  for (const auto& id : closed_)
    out.loss += figures_of(id).train_loss;
  out.loss /= std::max(1u, out.clients);
  for (const auto& [id, f] : figures_)
    out.dp_epsilon = std::max(out.dp_epsilon, f.dp_epsilon);
  for (const auto& id : known_)
    if (!closed_.count(id))
      out.missing.push_back(id);
  if (terms_.members) { // drawn, and not in the model
    std::set<std::string> drawn = participants_;
    drawn.insert(missing_.begin(), missing_.end());
    for (const auto& id : drawn)
      if (!closed_.count(id))
        out.missing.push_back(id);
  }
  out.contributors.assign(closed_.begin(), closed_.end());
  for (const auto& id : closed_)
    if (relays.count(id))
      out.relay_weights.emplace_back(id, figures_of(id).weight);
  return out;
}

} // namespace fedcaf
