#pragma once
// A client's side of one SecAgg+ round, without CAF: the keys it
// advertises, the shares it seals for its neighbours, the masks it adds to
// each chunk, and the shares it reveals when asked. The client actor feeds
// it the server's frames and sends what it returns.
// Thread-safety: none; owned by the client actor.

#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "fedcaf/secagg_masking.hpp"
#include "messages/codec.hpp"

namespace fedcaf {

class secagg_participant {
public:
  /// Draws this round's key pairs and self-mask seed.
  secagg_participant(uint32_t round, uint64_t sample_count);

  /// What the client advertises.
  msg::secagg_keys keys() const;

  /// Takes the server's roster; returns one sealed share per neighbour.
  /// Fails iff the roster is for another round or a neighbour's key is
  /// unusable (a low-order X25519 key).
  result<msg::secagg_shares> seal_shares(const msg::secagg_roster& roster);

  /// Takes the shares relayed to it and returns its receipt: the senders
  /// whose share did not open (not sealed for this client in this round,
  /// or carrying another pair). Fails, naming the sender, iff a share is
  /// not from a neighbour or its mask key gives no pair key.
  result<msg::secagg_receipt> receive_shares(const msg::secagg_shares& relayed);

  /// Answers the server's `challenge.disputed`, the neighbours that said
  /// this client's share did not open for them: a second receipt with the
  /// secret of each of those shares (it opens that share and no other, so
  /// the server can tell which of the two lies). Fails, revealing nothing
  /// (the client sits the round out), iff the challenge is for another
  /// round, comes twice, names a client it sealed no share for, or more
  /// than threshold - 1 of them (with its own share, that many would be
  /// its secrets).
  result<msg::secagg_receipt> defend(const msg::secagg_receipt& challenge);

  /// The neighbours it masks against.
  size_t masked_against() const { return masks_.pairwise.size(); }

  /// The neighbours whose share did not open, with why (for the log).
  const std::vector<std::string>& unopened() const { return unopened_; }

  /// Takes the server's answer to the receipt: it masks against every
  /// sender of a relayed share but those `answer` excludes. Fails (and the
  /// client sits the round out) iff the answer is for another round, keeps
  /// a sender whose share did not open, or leaves fewer than threshold - 1
  /// neighbours to mask against (a server that excluded the others could
  /// unmask this client's update alone).
  result<void> settle(const msg::secagg_receipt& answer);

  /// Quantizes weight * `update` (elements [first_element, ...)) and adds
  /// the masks into `out`. REQUIRES: receive_shares succeeded.
  void mask(uint64_t first_element, std::span<const float> update,
            std::span<uint32_t> out) const;

  /// The same in place over a chunk's bytes (float32 in, little-endian
  /// masked words out); returns the values clipped to the quantizer's
  /// range. REQUIRES: as mask_chunk_in_place's.
  uint64_t mask_in_place(uint64_t first_element,
                         std::span<std::byte> values) const;

  /// Answers the server's unmask request. Fails (and reveals nothing) iff
  /// it names a client that is not a neighbour whose shares it holds, asks
  /// for both secrets of one client, or for this client's own mask key.
  result<msg::secagg_unmask> reveal(const msg::secagg_unmask& ask);

private:
  uint32_t round_;
  uint64_t sample_count_;
  secagg::key_pair share_keys_, mask_keys_;
  secagg::key32 self_seed_{};
  std::optional<msg::secagg_roster> roster_;
  std::optional<secagg::quantizer> quantizer_;
  secagg::client_masks masks_;
  /// The secret of each share it sealed, by recipient index.
  std::map<uint32_t, secagg::key32> share_secrets_;
  bool defended_ = false;
  /// The pairwise mask of each sender of a relayed share, by its index.
  std::map<uint32_t, secagg::signed_seed> pairs_;
  /// True iff the share of the client at `index` did not open.
  bool unopened_index(uint32_t index) const;

  /// The share of its own secrets it keeps (x = k + 1).
  secagg::share_payload own_{};
  /// The opened shares its neighbours sent it, and its own, by owner index.
  std::map<uint32_t, secagg::share_payload> held_;
  std::vector<std::string> unopened_;
  /// Owner index -> the secret of it revealed this round (true: self seed).
  std::map<uint32_t, bool> revealed_;
  std::set<uint32_t> unopened_indices_;
};

/// The associated data a share is sealed with: the round, the sender's and
/// the recipient's index (little-endian u32 each).
std::vector<uint8_t> share_context(uint32_t round, uint32_t from, uint32_t to);

/// A share sealed for one recipient: its bytes (a fresh one-share X25519
/// public key, then nonce, ciphertext and tag) and that key's secret, kept
/// to answer a dispute over this share alone.
struct sealed_for {
  std::vector<uint8_t> sealed;
  secagg::key32 secret{};
};

/// Seals `p` (from p.from to p.to) for the recipient whose share key is
/// `recipient_key`. Fails iff that key is of low order.
result<sealed_for> seal_share(const secagg::share_payload& p,
                              const secagg::key32& recipient_key,
                              uint32_t round);

/// The one-share public key that leads `sealed` (zeros iff it is short).
secagg::key32 share_public_key(std::span<const uint8_t> sealed);

/// Opens `sealed`, the share client `from` sealed for client `to`, with
/// X25519(`secret`, `other`): the recipient's share secret and the share's
/// own public key (share_public_key), or the share's secret (revealed in a
/// dispute) and the recipient's share key; both give the same key. Fails
/// (bad_checksum) iff it does not open, (malformed_frame) iff it carries
/// another pair. The recipient and the server judge a share alike.
result<secagg::share_payload> open_share(const secagg::key32& secret,
                                         const secagg::key32& other,
                                         std::span<const uint8_t> sealed,
                                         uint32_t round, uint32_t from,
                                         uint32_t to);

} // namespace fedcaf
