#pragma once
// The server's side of one SecAgg+ round (Bell et al. 2020), without CAF:
// the server actor feeds it the clients' frames and delivers what it
// returns. It only relays: it sees public keys, sealed shares it cannot
// open, and at the end the shares that remove the masks of the sum.
//
// Phases: keys (every chosen client advertises two public keys) -> shares
// (each seals one share of its secrets per neighbour; the server keeps them
// for their recipients) -> receipts (each says whose relayed shares did not
// open; the liars are excluded before anyone masks) -> upload (masked updates, by the aggregator) ->
// unmask (survivors reveal self-seed shares of the clients in the sum and
// mask-key shares of those lost after sharing) -> done. A client that does
// not finish a setup phase (lost, or late at its deadline) leaves the
// round; nobody masks against one that left before the share phase ended.
// Thread-safety: none; owned by the server actor.

#include <map>
#include <set>
#include <string>
#include <vector>

#include "fedcaf/config/server_sections.hpp"
#include "fedcaf/error.hpp"
#include "fedcaf/secagg_masking.hpp"
#include "messages/codec.hpp"

namespace fedcaf {

/// Who leaves a round over complaints about shares.
struct share_verdict {
  std::set<uint32_t> culprits; ///< disputed by most of its neighbours
  std::set<uint32_t> unsure;   ///< word against word: they sit out
};

/// `complaints[u]`: the clients u says sealed it a share that does not
/// open. Each complaint is a disputed pair {u, v} (one of them lies; a
/// complaint cannot be checked). The client in the most disputed pairs is
/// a culprit if they are two or more and more than half of its
/// `neighbours` (so that fewer colluders than half a client's neighbours
/// cannot make it one), and its pairs are settled; until there is none.
/// Both clients of every pair left are unsure. One liar thus takes out
/// itself, or itself and the few clients it disputes with, never a
/// majority's word against an honest client.
share_verdict
judge_share_complaints(const std::map<uint32_t, std::set<uint32_t>>& complaints,
                       const std::map<uint32_t, size_t>& neighbours);

class secagg_coordinator {
public:
  enum class phase { idle, keys, shares, receipts, upload, unmask };

  /// A client excluded from the round for what it did, and why.
  struct culprit {
    std::string id;
    std::string why;
  };

  /// `by_samples`: weights from advertised sample counts (each capped at
  /// `max_sample_size` if not 0); else equal.
  secagg_coordinator(secure_aggregation_config cfg, bool by_samples,
                     uint64_t max_sample_size, uint64_t seed);

  /// Opens round `round` for `ids`, the chosen clients connected now.
  void start(uint32_t round, const std::vector<std::string>& ids);
  phase current() const { return phase_; }
  uint32_t round() const { return round_; }

  /// Client `id`'s keys. Fails (refusal to send back) iff it is not in the
  /// keys phase of this round, or advertised already.
  result<void> advertise(const std::string& id, const msg::secagg_keys& k);
  /// True iff every client of the phase advertised or left.
  bool keys_complete() const;
  /// Ends the keys phase: the roster of each client that advertised (the
  /// others leave). Fails iff fewer than threshold (or 2) clients remain.
  result<std::map<std::string, msg::secagg_roster>> close_keys();

  /// Client `id`'s sealed shares: exactly one per neighbour. Fails, naming
  /// what is wrong, iff it is not in the shares phase, sent them already,
  /// or a share is for a client that is not its neighbour, or twice.
  result<void> submit_shares(const std::string& id,
                             const msg::secagg_shares& s);
  bool shares_complete() const;
  /// Ends the shares phase: for each client that shared, the shares its
  /// neighbours that shared sealed for it (the clients it masks against).
  std::map<std::string, msg::secagg_shares> close_shares();

  /// Client `id`'s receipt: the neighbours whose relayed share did not
  /// open for it. Fails iff it is not in the receipts phase, sent one
  /// already, or names a client that did not relay it a share.
  result<void> submit_receipt(const std::string& id,
                              const msg::secagg_receipt& r);
  bool receipts_complete() const;
  /// Ends the receipts phase: every complaint ("X's share did not open for
  /// me") names a pair of which one lies. The client in the most such
  /// pairs, if in two or more, is a culprit and excluded, until none is
  /// left; the two clients of each pair left (one word against one) both
  /// sit the round out, unnamed. Those excluded and those that sent no
  /// receipt leave the round (left()); nobody masks against them. Returns
  /// each remaining client's answer (the neighbours not to mask against),
  /// or fails iff fewer than max(threshold, 2) clients remain.
  result<std::map<std::string, msg::secagg_receipt>> close_receipts();

  /// Client `id` is gone: it leaves the setup phases; in the upload and
  /// unmask phases it counts as lost after sharing (its update is not in
  /// the sum) unless the aggregator says it is.
  void lost(const std::string& id);

  /// Opens the unmask phase once the masked updates of `in_sum` are in the
  /// sum: what to ask of each survivor. Fails iff a client in `in_sum` did
  /// not share.
  result<std::map<std::string, msg::secagg_unmask>>
  open_unmask(const std::set<std::string>& in_sum);
  /// Client `id`'s revealed shares. Fails iff it was not asked, or reveals
  /// a share it was not asked for, of another x than its own, or twice.
  result<void> reveal(const std::string& id, const msg::secagg_unmask& u);
  bool unmask_complete() const;
  /// Ends the round: the secrets reconstructed and the plan that removes
  /// the masks. Fails naming the clients whose secrets got fewer than
  /// threshold shares.
  result<secagg::unmask_plan> close_unmask();

  /// The round's quantizer (the clients' clipping and bits).
  secagg::quantizer quantizer() const;
  /// Clients that left this round during setup (they sit it out).
  const std::vector<std::string>& left() const { return left_; }

  /// The clients excluded for lying in this round, with why: at
  /// close_receipts, those whose shares did not open for two or more
  /// neighbours (or that said so of two or more); at close_unmask, the
  /// holders whose revealed shares disagreed with the secret their owner
  /// advertised ("X revealed a wrong share of Y's self seed").
  const std::vector<culprit>& culprits() const { return culprits_; }

private:
  struct member {
    msg::secagg_keys keys;
    uint32_t index = 0;
    std::vector<uint32_t> neighbours; ///< indices, sorted
    double weight = 0;
    bool shared = false;
    bool gone = false; ///< lost in the shares phase before sharing
    std::vector<msg::sealed_share> sealed; ///< to it, by sender index
    bool asked = false, revealed = false;
    bool receipted = false;
    std::set<uint32_t> unopened; ///< indices whose share did not open for it
  };

  uint32_t threshold() const;
  std::string id_at(uint32_t index) const;
  /// Takes `id` out of the round after sharing, before anyone masks.
  void exclude(const std::string& id);
  /// x of `holder`'s share of `owner`'s secrets: its place among owner's
  /// neighbours + 1; 0 iff not a neighbour.
  /// The client holding `owner`'s share at `x`.
  std::string holder_at(const member& owner, uint8_t x) const;
  uint8_t x_of(const member& owner, uint32_t holder) const;

  secure_aggregation_config cfg_;
  bool by_samples_;
  uint64_t max_sample_size_;
  uint64_t seed_;
  phase phase_ = phase::idle;
  uint32_t round_ = 0;
  std::set<std::string> expected_; ///< keys phase: who may advertise
  std::map<std::string, member> members_;
  std::vector<std::string> by_index_;
  std::set<std::string> in_sum_;
  /// Revealed shares by owner index: self seeds, mask keys.
  std::map<uint32_t, std::vector<secagg::share>> seeds_, mask_keys_;
  std::vector<std::string> left_;
  std::vector<culprit> culprits_;
};

/// "idle", "keys", "shares", "receipts", "upload" or "unmask".
const char* to_string(secagg_coordinator::phase p);

} // namespace fedcaf
