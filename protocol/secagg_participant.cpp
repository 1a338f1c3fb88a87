#include "protocol/secagg_participant.hpp"

#include <algorithm>

namespace fedcaf {

std::vector<uint8_t> share_context(uint32_t round, uint32_t from, uint32_t to) {
  std::vector<uint8_t> ad(12);
  for (int i = 0; i < 4; ++i) {
    ad[i] = static_cast<uint8_t>(round >> (8 * i));
    ad[4 + i] = static_cast<uint8_t>(from >> (8 * i));
    ad[8 + i] = static_cast<uint8_t>(to >> (8 * i));
  }
  return ad;
}

result<sealed_for> seal_share(const secagg::share_payload& p,
                              const secagg::key32& recipient_key,
                              uint32_t round) {
  auto one = secagg::generate_key_pair();
  auto key = secagg::agree(one.secret, recipient_key, "share", round);
  if (!key)
    return key.err();
  sealed_for out{{one.public_key.begin(), one.public_key.end()}, one.secret};
  auto body =
      secagg::seal(*key, secagg::encode(p), share_context(round, p.from, p.to));
  out.sealed.insert(out.sealed.end(), body.begin(), body.end());
  return out;
}

secagg::key32 share_public_key(std::span<const uint8_t> sealed) {
  secagg::key32 k{};
  if (sealed.size() >= k.size())
    std::copy_n(sealed.begin(), k.size(), k.begin());
  return k;
}

result<secagg::share_payload> open_share(const secagg::key32& secret,
                                         const secagg::key32& other,
                                         std::span<const uint8_t> sealed,
                                         uint32_t round, uint32_t from,
                                         uint32_t to) {
  auto key = secagg::agree(secret, other, "share", round);
  if (!key || sealed.size() < secagg::key32{}.size())
    return error{errc::bad_checksum, "does not open"};
  auto plain = secagg::open_sealed(*key, sealed.subspan(secagg::key32{}.size()),
                                   share_context(round, from, to));
  if (!plain)
    return error{errc::bad_checksum, "does not open"};
  auto p = secagg::decode_share_payload(*plain);
  if (!p || p->from != from || p->to != to)
    return error{errc::malformed_frame, "malformed"};
  return *p;
}

secagg_participant::secagg_participant(uint32_t round, uint64_t sample_count)
    : round_(round), sample_count_(sample_count),
      share_keys_(secagg::generate_key_pair()),
      mask_keys_(secagg::generate_key_pair()),
      self_seed_(secagg::random_seed()) {}

msg::secagg_keys secagg_participant::keys() const {
  return {round_, share_keys_.public_key, mask_keys_.public_key, sample_count_,
          secagg::commitment_of(self_seed_)};
}

result<msg::secagg_shares>
secagg_participant::seal_shares(const msg::secagg_roster& roster) {
  if (roster.round != round_)
    return error{errc::wrong_round, "a roster for round " +
                                        std::to_string(roster.round) +
                                        " in round " + std::to_string(round_)};
  if (roster.threshold < 2 || roster.threshold > roster.neighbours.size() + 1)
    return error{errc::not_authorized,
                 "a roster with threshold " + std::to_string(roster.threshold) +
                     " for " + std::to_string(roster.neighbours.size()) +
                     " neighbours (one share would be a secret)"};
  // x = place + 1 for each neighbour, and k + 1 for the share it keeps
  // (so that a client and its neighbours are the k + 1 holders).
  std::vector<uint8_t> xs;
  for (size_t j = 0; j <= roster.neighbours.size(); ++j)
    xs.push_back(static_cast<uint8_t>(j + 1));
  auto mask_shares = secagg::split(mask_keys_.secret, roster.threshold, xs);
  auto seed_shares = secagg::split(self_seed_, roster.threshold, xs);
  auto own = roster.neighbours.size();
  own_ = {roster.index, roster.index, xs[own], {}, {}};
  std::copy(mask_shares[own].y.begin(), mask_shares[own].y.end(),
            own_.mask_key_share.begin());
  std::copy(seed_shares[own].y.begin(), seed_shares[own].y.end(),
            own_.self_seed_share.begin());
  msg::secagg_shares out{round_, {}};
  share_secrets_.clear();
  defended_ = false;
  for (size_t j = 0; j < roster.neighbours.size(); ++j) {
    const auto& peer = roster.neighbours[j];
    secagg::share_payload p{roster.index, peer.index, xs[j], {}, {}};
    std::copy(mask_shares[j].y.begin(), mask_shares[j].y.end(),
              p.mask_key_share.begin());
    std::copy(seed_shares[j].y.begin(), seed_shares[j].y.end(),
              p.self_seed_share.begin());
    auto sealed = seal_share(p, peer.share_key, round_);
    if (!sealed)
      return error{sealed.err().code,
                   peer.client_id + ": " + sealed.err().message};
    share_secrets_[peer.index] = sealed->secret;
    out.shares.push_back({peer.index, std::move(sealed->sealed)});
  }
  roster_ = roster;
  quantizer_.emplace(roster.clipping_range, roster.quantization_bits);
  return out;
}

result<msg::secagg_receipt>
secagg_participant::receive_shares(const msg::secagg_shares& relayed) {
  if (!roster_ || relayed.round != round_)
    return error{errc::wrong_round, "shares before the roster, or of round " +
                                        std::to_string(relayed.round)};
  const auto& r = *roster_;
  masks_ = {self_seed_, {}};
  pairs_.clear();
  held_.clear();
  unopened_.clear();
  unopened_indices_.clear();
  held_[r.index] = own_;
  for (const auto& sh : relayed.shares) {
    auto peer = std::find_if(r.neighbours.begin(), r.neighbours.end(),
                             [&](const auto& p) { return p.index == sh.peer; });
    if (peer == r.neighbours.end())
      return error{errc::not_authorized, "a share from client " +
                                             std::to_string(sh.peer) +
                                             ", not a neighbour"};
    auto seed =
        secagg::agree(mask_keys_.secret, peer->mask_key, "mask", round_);
    if (!seed)
      return error{seed.err().code,
                   peer->client_id + "'s mask key: " + seed.err().message};
    // Until settle(): against every sender (as the server counts them).
    pairs_[sh.peer] = {*seed, secagg::pair_sign(r.index, sh.peer)};
    masks_.pairwise.push_back(pairs_[sh.peer]);
    if (auto p = open_share(share_keys_.secret, share_public_key(sh.sealed),
                            sh.sealed, round_, sh.peer, r.index))
      held_[sh.peer] = *p;
    else { // said in the receipt: the server excludes it, or this client
      unopened_.push_back(peer->client_id + " (" + p.err().message + ")");
      unopened_indices_.insert(sh.peer);
    }
  }
  return msg::secagg_receipt{
      round_, {unopened_indices_.begin(), unopened_indices_.end()}, {}, {}, {}};
}

result<void> secagg_participant::settle(const msg::secagg_receipt& answer) {
  if (!roster_ || answer.round != round_)
    return error{errc::wrong_round,
                 "a receipt answer for round " + std::to_string(answer.round)};
  std::set<uint32_t> excluded(answer.excluded.begin(), answer.excluded.end());
  for (auto v : unopened_indices_)
    if (!excluded.count(v))
      return error{errc::not_authorized, "the server keeps client " +
                                             std::to_string(v) +
                                             ", whose share did not open"};
  masks_.pairwise.clear();
  for (const auto& [v, pair] : pairs_)
    if (!excluded.count(v))
      masks_.pairwise.push_back(pair);
  auto least = std::max<uint32_t>(roster_->threshold, 2) - 1;
  if (masks_.pairwise.size() < least)
    return error{errc::not_authorized,
                 "the server left " + std::to_string(masks_.pairwise.size()) +
                     " neighbours to mask against, fewer than threshold - 1 "
                     "(" +
                     std::to_string(least) + ")"};
  return {};
}

result<msg::secagg_receipt>
secagg_participant::defend(const msg::secagg_receipt& challenge) {
  if (!roster_ || challenge.round != round_)
    return error{errc::wrong_round,
                 "a dispute for round " + std::to_string(challenge.round)};
  if (defended_)
    return error{errc::bad_sequence, "a second dispute in one round"};
  std::set<uint32_t> asked(challenge.disputed.begin(),
                           challenge.disputed.end());
  if (asked.size() + 1 > roster_->threshold)
    return error{errc::not_authorized,
                 "the server asked for the secrets of " +
                     std::to_string(asked.size()) +
                     " shares, more than threshold - 1 (" +
                     std::to_string(roster_->threshold - 1) + ")"};
  msg::secagg_receipt out{round_, {}, {}, {}, {}};
  for (auto v : asked) {
    auto it = share_secrets_.find(v);
    if (it == share_secrets_.end())
      return error{errc::not_authorized, "the server asked for a share for "
                                         "client " +
                                             std::to_string(v) +
                                             ", which it sealed none"};
    out.share_secrets.push_back({v, it->second});
  }
  defended_ = true;
  return out;
}

bool secagg_participant::unopened_index(uint32_t index) const {
  return unopened_indices_.count(index) > 0;
}

void secagg_participant::mask(uint64_t first_element,
                              std::span<const float> update,
                              std::span<uint32_t> out) const {
  secagg::mask_chunk(*quantizer_, roster_->weight, masks_, first_element,
                     update, out);
}

uint64_t secagg_participant::mask_in_place(uint64_t first_element,
                                           std::span<std::byte> values) const {
  return secagg::mask_chunk_in_place(*quantizer_, roster_->weight, masks_,
                                     first_element, values);
}

result<msg::secagg_unmask>
secagg_participant::reveal(const msg::secagg_unmask& ask) {
  if (ask.round != round_)
    return error{errc::wrong_round,
                 "an unmask request for round " + std::to_string(ask.round)};
  msg::secagg_unmask out{round_, {}, {}, {}, {}};
  // Which secret of each owner this answer reveals, on top of what earlier
  // answers of the round revealed: never both of one client, even across
  // requests.
  auto revealed = revealed_;
  for (const auto* list : {&ask.in_sum, &ask.dropped})
    for (auto owner : *list) {
      bool self_secret = list == &ask.in_sum;
      auto [at, fresh] = revealed.emplace(owner, self_secret);
      if (!fresh && at->second != self_secret)
        return error{errc::not_authorized,
                     "the server asked for both secrets of client " +
                         std::to_string(owner)};
      auto it = held_.find(owner);
      if (it == held_.end() && unopened_index(owner))
        continue; // its share did not open: nothing to reveal
      if (it == held_.end())
        return error{errc::not_authorized,
                     "the server asked for a share of client " +
                         std::to_string(owner) + ", which it does not hold"};
      bool self = list == &ask.in_sum;
      if (owner == roster_->index && !self)
        return error{errc::not_authorized,
                     "the server asked for this client's own mask key"};
      const auto& y =
          self ? it->second.self_seed_share : it->second.mask_key_share;
      (self ? out.self_seed_shares : out.mask_key_shares)
          .push_back({owner, it->second.x, y});
    }
  revealed_ = std::move(revealed);
  return out;
}

} // namespace fedcaf
