#include "protocol/secagg_coordinator.hpp"

#include "protocol/secagg_participant.hpp"

#include <algorithm>
#include <functional>
#include <numeric>
#include <optional>
#include <random>

namespace fedcaf {

namespace {

error refusal(errc code, const std::string& why) {
  return error{code, why};
}

} // namespace

namespace {

/// Steps `pick` (a sorted t-subset of 0..n-1) to the next one in
/// lexicographic order; false after the last.
bool next_subset(std::vector<size_t>& pick, size_t n) {
  for (size_t i = pick.size(); i-- > 0;)
    if (pick[i] < n - pick.size() + i) {
      ++pick[i];
      for (size_t j = i + 1; j < pick.size(); ++j)
        pick[j] = pick[j - 1] + 1;
      return true;
    }
  return false;
}

/// True iff n choose t is at most `most`.
bool subsets_at_most(size_t n, size_t t, size_t most) {
  double c = 1;
  for (size_t i = 0; i < t; ++i) {
    c = c * static_cast<double>(n - i) / static_cast<double>(i + 1);
    if (c > static_cast<double>(most) + 0.5)
      return false;
  }
  return true;
}

/// The secret that `valid` accepts, from the first `t` of `shares` or else
/// from another t-subset (at most 512 tried); the x of each share that
/// disagrees with it goes to `wrong`. Empty iff none is accepted.
std::optional<std::vector<uint8_t>>
robust_combine(const std::vector<secagg::share>& shares, uint32_t t,
               const std::function<bool(const std::vector<uint8_t>&)>& valid,
               std::vector<uint8_t>& wrong) {
  std::vector<size_t> pick(t);
  std::iota(pick.begin(), pick.end(), size_t{0});
  auto combine = [&](const std::vector<size_t>& which) {
    std::vector<secagg::share> subset;
    for (auto i : which)
      subset.push_back(shares[i]);
    return secagg::combine(subset, t);
  };
  std::optional<std::vector<uint8_t>> found;
  for (int tries = 0; !found && tries < 512; ++tries) {
    if (auto s = combine(pick); s && valid(*s))
      found = std::move(*s);
    else if (!next_subset(pick, shares.size()))
      break;
  }
  if (!found)
    return found;
  // A share outside the accepted set, with t - 1 of it: agrees iff honest.
  for (size_t j = 0; j < shares.size(); ++j) {
    if (std::find(pick.begin(), pick.end(), j) != pick.end())
      continue;
    auto with = pick;
    with.back() = j;
    auto s = combine(with);
    if (!s || *s != *found)
      wrong.push_back(shares[j].x);
  }
  return found;
}

} // namespace

secagg_coordinator::secagg_coordinator(secure_aggregation_config cfg,
                                       bool by_samples,
                                       uint64_t max_sample_size, uint64_t seed)
    : cfg_(cfg), by_samples_(by_samples), max_sample_size_(max_sample_size),
      seed_(seed) {}

void secagg_coordinator::start(uint32_t round,
                               const std::vector<std::string>& ids) {
  phase_ = phase::keys;
  round_ = round;
  expected_ = std::set<std::string>(ids.begin(), ids.end());
  members_.clear();
  by_index_.clear();
  in_sum_.clear();
  seeds_.clear();
  mask_keys_.clear();
  left_.clear();
}

result<void> secagg_coordinator::advertise(const std::string& id,
                                           const msg::secagg_keys& k) {
  if (k.round != round_)
    return refusal(errc::wrong_round, id + " advertised keys for round " +
                                          std::to_string(k.round) +
                                          " in round " +
                                          std::to_string(round_));
  if (members_.count(id))
    return refusal(errc::bad_sequence, id + " advertised its keys twice");
  if (phase_ != phase::keys || !expected_.count(id)) // e.g. back too late
    return refusal(errc::not_in_round,
                   id + " advertised keys after round " +
                       std::to_string(round_) +
                       "'s keys phase, or was not in it: it sits the round "
                       "out");
  if (k.share_key == k.mask_key)
    return refusal(errc::malformed_frame,
                   id + " advertised one key for both purposes");
  // A low-order key would make every neighbour's key agreement fail: it
  // is refused here, before anyone relies on it.
  auto probe = secagg::generate_key_pair();
  for (const auto* key : {&k.share_key, &k.mask_key})
    if (!secagg::agree(probe.secret, *key, "probe", round_))
      return refusal(errc::malformed_frame,
                     id + " advertised a public key of low order");
  members_[id].keys = k;
  return {};
}

bool secagg_coordinator::keys_complete() const {
  return phase_ == phase::keys && members_.size() == expected_.size();
}

uint32_t secagg_coordinator::threshold() const {
  auto k = static_cast<uint32_t>(by_index_.size()) - 1;
  if (cfg_.neighbours > 0 && cfg_.neighbours < k)
    k = cfg_.neighbours + cfg_.neighbours % 2;
  k = std::min<uint32_t>(k, static_cast<uint32_t>(by_index_.size()) - 1);
  // Never below 2 (one share would be the secret), never lowered from
  // what is configured (close_keys fails a round that cannot meet it).
  return std::max<uint32_t>(cfg_.threshold ? cfg_.threshold : k / 2 + 1, 2);
}

std::string secagg_coordinator::id_at(uint32_t index) const {
  return index < by_index_.size() ? by_index_[index] : "?";
}

result<std::map<std::string, msg::secagg_roster>>
secagg_coordinator::close_keys() {
  for (const auto& id : expected_)
    if (!members_.count(id))
      left_.push_back(id);
  for (const auto& [id, m] : members_)
    by_index_.push_back(id); // std::map: sorted by id
  if (by_index_.size() < 2)
    return refusal(errc::not_in_round,
                   "secure aggregation needs at least 2 clients, " +
                       std::to_string(by_index_.size()) + " advertised keys");
  auto n = static_cast<uint32_t>(by_index_.size());
  auto holders =
      std::min(cfg_.neighbours ? cfg_.neighbours + cfg_.neighbours % 2 : n - 1,
               n - 1) +
      1;
  if (threshold() > holders)
    return refusal(
        errc::not_in_round,
        "secure aggregation needs threshold " + std::to_string(threshold()) +
            " holders of each client's secrets; the " + std::to_string(n) +
            " clients that advertised keys give " + std::to_string(holders));
  auto graph = secagg::neighbour_graph(
      n, cfg_.neighbours ? cfg_.neighbours : n - 1, seed_ ^ round_);
  double total = 0;
  for (auto& [id, m] : members_) {
    auto samples = m.keys.sample_count;
    if (max_sample_size_)
      samples = std::min(samples, max_sample_size_);
    m.weight = by_samples_ ? static_cast<double>(samples) : 1.0;
    total += m.weight;
  }
  std::map<std::string, msg::secagg_roster> rosters;
  for (uint32_t i = 0; i < n; ++i) {
    auto& m = members_[by_index_[i]];
    m.index = i;
    m.neighbours = graph[i];
    m.weight = total > 0 ? m.weight / total : 1.0 / n;
  }
  for (uint32_t i = 0; i < n; ++i) {
    const auto& m = members_[by_index_[i]];
    msg::secagg_roster r{round_,
                         i,
                         m.weight,
                         threshold(),
                         cfg_.clipping_range,
                         cfg_.quantization_bits,
                         {}};
    for (auto v : m.neighbours) {
      const auto& p = members_[by_index_[v]];
      r.neighbours.push_back(
          {v, by_index_[v], p.keys.share_key, p.keys.mask_key});
    }
    rosters[by_index_[i]] = std::move(r);
  }
  phase_ = phase::shares;
  return rosters;
}

result<void> secagg_coordinator::submit_shares(const std::string& id,
                                               const msg::secagg_shares& s) {
  auto it = members_.find(id);
  if (phase_ != phase::shares || s.round != round_ || it == members_.end())
    return refusal(errc::wrong_round, id + " sent shares for round " +
                                          std::to_string(s.round) +
                                          " outside its shares phase");
  auto& m = it->second;
  if (m.shared)
    return refusal(errc::bad_sequence, id + " sent its shares twice");
  if (s.shares.size() != m.neighbours.size())
    return refusal(errc::malformed_frame,
                   id + " sent " + std::to_string(s.shares.size()) +
                       " shares for " + std::to_string(m.neighbours.size()) +
                       " neighbours");
  std::set<uint32_t> seen;
  for (const auto& sh : s.shares) {
    if (!std::binary_search(m.neighbours.begin(), m.neighbours.end(), sh.peer))
      return refusal(errc::not_authorized, id + " sealed a share for client " +
                                               std::to_string(sh.peer) + " (" +
                                               id_at(sh.peer) +
                                               "), not its neighbour");
    if (!seen.insert(sh.peer).second)
      return refusal(errc::malformed_frame,
                     id + " sealed two shares for " + id_at(sh.peer));
  }
  for (const auto& sh : s.shares)
    members_[by_index_[sh.peer]].sealed.push_back({m.index, sh.sealed});
  m.shared = true;
  return {};
}

bool secagg_coordinator::shares_complete() const {
  return phase_ == phase::shares &&
         std::all_of(members_.begin(), members_.end(), [](const auto& kv) {
           return kv.second.shared || kv.second.gone;
         });
}

std::map<std::string, msg::secagg_shares> secagg_coordinator::close_shares() {
  std::map<std::string, msg::secagg_shares> relays;
  for (auto& [id, m] : members_) {
    if (!m.shared) {
      left_.push_back(id);
      continue;
    }
    msg::secagg_shares r{round_, {}};
    for (const auto& sh : m.sealed)
      if (members_[by_index_[sh.peer]].shared)
        r.shares.push_back(sh);
    std::sort(r.shares.begin(), r.shares.end(),
              [](const auto& a, const auto& b) { return a.peer < b.peer; });
    relays[id] = std::move(r);
  }
  phase_ = phase::receipts;
  return relays;
}

result<void> secagg_coordinator::submit_receipt(const std::string& id,
                                                const msg::secagg_receipt& r) {
  auto it = members_.find(id);
  if (phase_ != phase::receipts || r.round != round_ || it == members_.end() ||
      !it->second.shared)
    return refusal(errc::wrong_round, id + " sent a receipt for round " +
                                          std::to_string(r.round) +
                                          " outside its receipts phase");
  auto& m = it->second;
  if (m.receipted)
    return refusal(errc::bad_sequence, id + " sent its receipt twice");
  std::set<uint32_t> unopened;
  for (auto v : r.unopened) {
    // Only a neighbour that shared relayed it a share.
    bool relayed =
        std::binary_search(m.neighbours.begin(), m.neighbours.end(), v) &&
        members_[by_index_[v]].shared;
    if (!relayed)
      return refusal(errc::not_authorized,
                     id + " complained of a share from client " +
                         std::to_string(v) + ", which relayed it none");
    if (!unopened.insert(v).second)
      return refusal(errc::malformed_frame,
                     id + " complained twice of " + id_at(v));
  }
  m.unopened = std::move(unopened);
  m.receipted = true;
  return {};
}

bool secagg_coordinator::receipts_complete() const {
  return phase_ == phase::receipts &&
         std::all_of(members_.begin(), members_.end(), [](const auto& kv) {
           return !kv.second.shared || kv.second.receipted || kv.second.gone;
         });
}

void secagg_coordinator::exclude(const std::string& id) {
  auto& m = members_[id];
  if (!m.shared)
    return;
  m.shared = false; // nobody masks against it, nobody asks it to reveal
  left_.push_back(id);
}

std::map<std::string, msg::secagg_receipt>
secagg_coordinator::close_receipts() {
  culprits_.clear();
  // A client that sent no receipt leaves, and so does one lost since (it
  // cannot get its answer, nor answer a dispute: it is not named for
  // complaints against it); nobody masks against them.
  for (auto& [id, m] : members_)
    if (m.shared && (!m.receipted || m.gone))
      exclude(id);
  // Each complaint "u's share did not open for v" is put to u: it reveals
  // that share's one-share secret (disputes), which opens that share and
  // no other. At most threshold - 1 of the complaints against one client
  // are put to it (drawn at random: with its own share, that many would
  // be its secrets); the others stay unresolved.
  std::mt19937_64 draw(seed_ ^ (uint64_t{round_} << 32) ^ 0x5eca9ULL);
  std::map<std::string, msg::secagg_receipt> challenges;
  for (auto& [id, m] : members_) {
    m.challenged.clear();
    m.defended = false;
    m.secrets.clear();
  }
  for (auto& [id, m] : members_) {
    if (!m.shared)
      continue;
    std::vector<uint32_t> accusers;
    for (const auto& [v_id, v] : members_)
      if (v.shared && v.unopened.count(m.index))
        accusers.push_back(v.index);
    if (accusers.empty())
      continue;
    std::shuffle(accusers.begin(), accusers.end(), draw);
    accusers.resize(std::min<size_t>(accusers.size(), threshold() - 1));
    m.challenged.insert(accusers.begin(), accusers.end());
    challenges[id] = {round_, {}, {}, {accusers.begin(), accusers.end()}, {}};
    std::sort(challenges[id].disputed.begin(), challenges[id].disputed.end());
  }
  phase_ = phase::disputes;
  return challenges;
}

result<void> secagg_coordinator::defend(const std::string& id,
                                        const msg::secagg_receipt& r) {
  auto it = members_.find(id);
  if (phase_ != phase::disputes || r.round != round_ || it == members_.end() ||
      it->second.challenged.empty())
    return refusal(errc::wrong_round, id + " sent share secrets for round " +
                                          std::to_string(r.round) +
                                          " that nobody disputed");
  auto& m = it->second;
  if (m.defended)
    return refusal(errc::bad_sequence, id + " answered its dispute twice");
  std::map<uint32_t, msg::key_bytes> secrets;
  for (const auto& s : r.share_secrets) {
    if (!m.challenged.count(s.peer))
      return refusal(errc::not_authorized,
                     id + " revealed the secret of its share for client " +
                         std::to_string(s.peer) + ", which was not disputed");
    if (!secrets.emplace(s.peer, s.secret).second)
      return refusal(errc::malformed_frame,
                     id + " revealed two secrets for " + id_at(s.peer));
  }
  m.secrets = std::move(secrets);
  m.defended = true;
  return {};
}

bool secagg_coordinator::disputes_complete() const {
  return phase_ == phase::disputes &&
         std::all_of(members_.begin(), members_.end(), [](const auto& kv) {
           const auto& m = kv.second;
           return m.challenged.empty() || m.defended || !m.shared || m.gone;
         });
}

bool secagg_coordinator::share_opens(const member& sender,
                                     const member& recipient) const {
  auto secret = sender.secrets.find(recipient.index);
  auto sealed = std::find_if(
      recipient.sealed.begin(), recipient.sealed.end(),
      [&sender](const auto& sh) { return sh.peer == sender.index; });
  if (secret == sender.secrets.end() || sealed == recipient.sealed.end())
    return false;
  // The secret must be the one whose public key leads the share: else a
  // sender could seal garbage under one key and reveal another.
  if (secagg::public_key_of(secret->second) != share_public_key(sealed->sealed))
    return false;
  return static_cast<bool>(open_share(secret->second, recipient.keys.share_key,
                                      sealed->sealed, round_, sender.index,
                                      recipient.index));
}

result<std::map<std::string, msg::secagg_receipt>>
secagg_coordinator::close_disputes() {
  // Each complaint put to its sender is settled by the share itself: it
  // opens (its accuser lied) or not, or the sender did not answer (it
  // lied, or its share cannot be shown). Who lied is named, with why.
  std::map<std::string, std::vector<std::string>> lies; // by client, why
  std::set<std::pair<uint32_t, uint32_t>> unresolved;   // (sender, accuser)
  std::set<std::string> lost;
  for (const auto& [id, m] : members_) {
    if (!m.shared)
      continue;
    for (const auto& [v_id, v] : members_) {
      if (!v.shared || !v.unopened.count(m.index))
        continue;
      if (!m.challenged.count(v.index))
        unresolved.insert({m.index, v.index});
      else if (!m.defended && m.gone)
        lost.insert(id); // it cannot answer: it leaves, unnamed
      else if (!m.defended || !m.secrets.count(v.index))
        lies[id].push_back("did not reveal the key of its share for " + v_id +
                           ", which said it did not open");
      else if (share_opens(m, v))
        lies[v_id].push_back("said that " + id +
                             "'s share did not open for it; revealed, "
                             "its key opens it");
      else
        lies[id].push_back("sealed " + v_id +
                           " a share that does not open under the key it "
                           "revealed");
    }
  }
  for (const auto& [id, whys] : lies) {
    auto why = whys.front();
    if (whys.size() > 1)
      why += " (and " + std::to_string(whys.size() - 1) + " more such)";
    culprits_.push_back({id, why});
  }
  for (const auto& c : culprits_)
    exclude(c.id);
  for (const auto& id : lost)
    exclude(id);
  // A complaint not put to its sender (past threshold - 1 against it):
  // unless the sender lied elsewhere, the accuser alone sits out, unnamed
  // (it will not mask against a share that did not open for it).
  for (const auto& [sender, accuser] : unresolved)
    if (members_[id_at(sender)].shared)
      exclude(id_at(accuser));
  return settle_rest();
}

result<std::map<std::string, msg::secagg_receipt>>
secagg_coordinator::settle_rest() {
  // A client left with fewer than threshold - 1 neighbours to mask against
  // would refuse its answer (secagg_participant::settle), and too few could
  // hold its secrets: it sits out too, until every one left has enough.
  for (bool again = true; again;) {
    again = false;
    for (auto& [id, m] : members_) {
      auto left = std::count_if(
          m.neighbours.begin(), m.neighbours.end(),
          [this](uint32_t v) { return members_[by_index_[v]].shared; });
      if (m.shared && static_cast<uint32_t>(left) + 1 < threshold()) {
        exclude(id);
        again = true;
      }
    }
  }
  size_t remain =
      std::count_if(members_.begin(), members_.end(),
                    [](const auto& kv) { return kv.second.shared; });
  phase_ = phase::upload;
  if (remain < std::max<uint32_t>(threshold(), 2))
    return refusal(errc::not_in_round,
                   "secure aggregation: " + std::to_string(remain) +
                       " clients remain after the receipts, fewer than "
                       "the threshold " +
                       std::to_string(threshold()));
  std::map<std::string, msg::secagg_receipt> answers;
  for (const auto& [id, m] : members_) {
    if (!m.shared)
      continue;
    msg::secagg_receipt r{round_, {}, {}, {}, {}};
    for (auto v : m.neighbours)
      if (!members_[by_index_[v]].shared)
        r.excluded.push_back(v);
    answers[id] = std::move(r);
  }
  return answers;
}

void secagg_coordinator::lost(const std::string& id) {
  if (phase_ == phase::keys) {
    if (expected_.erase(id) && !members_.count(id))
      left_.push_back(id);
    members_.erase(id);
    return;
  }
  auto it = members_.find(id);
  if (it == members_.end())
    return;
  if (phase_ == phase::shares && !it->second.shared)
    it->second.gone = true; // the phase does not wait; it leaves at close
  if (phase_ == phase::receipts || phase_ == phase::disputes)
    it->second.gone = true; // its receipt's answer, or a dispute, is lost
  if (phase_ == phase::unmask)
    it->second.asked = false; // nothing more from it
}

uint8_t secagg_coordinator::x_of(const member& owner, uint32_t holder) const {
  if (holder == owner.index) // the share it keeps
    return static_cast<uint8_t>(owner.neighbours.size() + 1);
  auto at = std::lower_bound(owner.neighbours.begin(), owner.neighbours.end(),
                             holder);
  if (at == owner.neighbours.end() || *at != holder)
    return 0;
  return static_cast<uint8_t>(at - owner.neighbours.begin() + 1);
}

result<std::map<std::string, msg::secagg_unmask>>
secagg_coordinator::open_unmask(const std::set<std::string>& in_sum) {
  for (const auto& id : in_sum) {
    auto it = members_.find(id);
    if (it == members_.end() || !it->second.shared)
      return refusal(errc::internal,
                     id + "'s update is in the sum but it did not share");
  }
  in_sum_ = in_sum;
  std::map<std::string, msg::secagg_unmask> asks;
  for (const auto& id : in_sum_) {
    auto& m = members_[id];
    msg::secagg_unmask ask{round_, {m.index}, {}, {}, {}}; // its own share
    for (auto v : m.neighbours) {
      const auto& other = members_[by_index_[v]];
      if (!other.shared)
        continue;
      (in_sum_.count(by_index_[v]) ? ask.in_sum : ask.dropped).push_back(v);
    }
    m.asked = true;
    asks[id] = std::move(ask);
  }
  phase_ = phase::unmask;
  return asks;
}

result<void> secagg_coordinator::reveal(const std::string& id,
                                        const msg::secagg_unmask& u) {
  auto it = members_.find(id);
  if (phase_ != phase::unmask || u.round != round_ || it == members_.end() ||
      !it->second.asked)
    return refusal(errc::wrong_round, id +
                                          " revealed shares it was not "
                                          "asked for in round " +
                                          std::to_string(u.round));
  auto& m = it->second;
  if (m.revealed)
    return refusal(errc::bad_sequence, id + " revealed its shares twice");
  auto check = [&](const msg::revealed_share& r, bool self) -> result<void> {
    auto owner_id = id_at(r.owner);
    auto owner = members_.find(owner_id);
    bool wanted = owner != members_.end() && owner->second.shared &&
                  in_sum_.count(owner_id) == (self ? 1u : 0u) &&
                  x_of(owner->second, m.index) != 0;
    if (!wanted)
      return refusal(errc::not_authorized,
                     id + " revealed a " + (self ? "self-seed" : "mask-key") +
                         " share of client " + std::to_string(r.owner) +
                         " that it was not asked for");
    if (r.x != x_of(owner->second, m.index))
      return refusal(errc::malformed_frame,
                     id + " revealed a share of " + owner_id + " at x " +
                         std::to_string(r.x) + ", not its own");
    return {};
  };
  std::set<uint32_t> seen;
  for (const auto* list : {&u.self_seed_shares, &u.mask_key_shares})
    for (const auto& r : *list) {
      if (auto ok = check(r, list == &u.self_seed_shares); !ok)
        return ok;
      if (!seen.insert(r.owner).second)
        return refusal(errc::malformed_frame,
                       id + " revealed two shares of " + id_at(r.owner));
    }
  for (const auto& r : u.self_seed_shares)
    seeds_[r.owner].push_back({r.x, {r.y.begin(), r.y.end()}});
  for (const auto& r : u.mask_key_shares)
    mask_keys_[r.owner].push_back({r.x, {r.y.begin(), r.y.end()}});
  m.revealed = true;
  return {};
}

bool secagg_coordinator::unmask_complete() const {
  return phase_ == phase::unmask &&
         std::all_of(members_.begin(), members_.end(), [](const auto& kv) {
           return !kv.second.asked || kv.second.revealed;
         });
}

std::string secagg_coordinator::holder_at(const member& owner,
                                          uint8_t x) const {
  if (x == owner.neighbours.size() + 1)
    return id_at(owner.index);
  return x >= 1 && x <= owner.neighbours.size()
             ? id_at(owner.neighbours[x - 1])
             : "client at x " + std::to_string(x);
}

result<secagg::unmask_plan> secagg_coordinator::close_unmask() {
  culprits_.clear();
  std::vector<secagg::round_client> clients;
  std::string short_of;
  for (const auto& [id, m] : members_) {
    if (!m.shared)
      continue;
    secagg::round_client c{m.index,  m.keys.mask_key,       m.neighbours,
                           m.weight, in_sum_.count(id) > 0, {},
                           {}};
    auto& shares = (c.in_sum ? seeds_ : mask_keys_)[m.index];
    if (shares.size() < threshold()) {
      short_of += (short_of.empty() ? "" : ", ") + id + " (" +
                  std::to_string(shares.size()) + " of " +
                  std::to_string(threshold()) + " shares)";
      continue;
    }
    // A wrong share (a survivor that lies) would leave masks in the model:
    // a self seed must hash to its owner's commitment, a mask key give the
    // public key its owner advertised. With more shares than the
    // threshold, a set that does is sought, and the holders whose shares
    // disagree with it are named.
    auto& secret = c.in_sum ? c.self_seed : c.mask_secret;
    auto valid = [&](const std::vector<uint8_t>& s) {
      std::copy(s.begin(), s.end(), secret.begin());
      return c.in_sum
                 ? secagg::commitment_of(secret) == m.keys.self_seed_commitment
                 : secagg::public_key_of(secret) == m.keys.mask_key;
    };
    std::vector<uint8_t> wrong;
    auto found = robust_combine(shares, threshold(), valid, wrong);
    for (auto x : wrong)
      culprits_.push_back(
          {holder_at(m, x), "revealed a wrong share of " + id + "'s " +
                                (c.in_sum ? "self seed" : "mask key")});
    if (!found) {
      // Every threshold-subset tried, and threshold honest holders among
      // them if fewer than threshold lie: the owner dealt wrong shares.
      if (shares.size() + 1 >= 2 * threshold() &&
          subsets_at_most(shares.size(), threshold(), 512))
        culprits_.push_back({id,
                             std::string{"dealt shares of its "} +
                                 (c.in_sum ? "self seed" : "mask key") +
                                 " from which no " +
                                 std::to_string(threshold()) + " of " +
                                 std::to_string(shares.size()) +
                                 " revealed give what it committed to",
                             true});
      phase_ = phase::idle;
      return refusal(errc::bad_checksum,
                     "round " + std::to_string(round_) + ": no " +
                         std::to_string(threshold()) + " of the " +
                         std::to_string(shares.size()) + " shares of " + id +
                         (c.in_sum ? "'s self seed give its commitment"
                                   : "'s mask key give its advertised key") +
                         " (holders revealed wrong shares)");
    }
    valid(*found);
    clients.push_back(std::move(c));
  }
  phase_ = phase::idle;
  if (!short_of.empty()) {
    std::string missing;
    for (const auto& [id, m] : members_)
      if (m.shared && !in_sum_.count(id))
        missing += (missing.empty() ? "" : ", ") + id;
    return refusal(errc::not_in_round,
                   "round " + std::to_string(round_) +
                       ": too few survivors to unmask (threshold " +
                       std::to_string(threshold()) +
                       "); missing: " + (missing.empty() ? "none" : missing) +
                       "; secrets short of shares: " + short_of);
  }
  return secagg::make_unmask_plan(clients, round_);
}

secagg::quantizer secagg_coordinator::quantizer() const {
  return {cfg_.clipping_range, cfg_.quantization_bits};
}

const char* to_string(secagg_coordinator::phase p) {
  static constexpr const char* names[] = {
      "idle", "keys", "shares", "receipts", "disputes", "upload", "unmask"};
  return names[static_cast<size_t>(p)];
}

} // namespace fedcaf
