#pragma once
// The server's side of one SecAgg+ round (Bell et al. 2020), without CAF:
// the server actor feeds it the clients' frames and delivers what it
// returns. It only relays: it sees public keys, sealed shares it cannot
// open, and at the end the shares that remove the masks of the sum.
//
// Phases: keys (every chosen client advertises two public keys) -> shares
// (each seals one share of its secrets per neighbour, each under a key of
// its own; the server keeps them for their recipients) -> receipts (each
// says whose relayed shares did not open) -> disputes (each client so
// accused reveals the key of each disputed share, which opens that share
// alone: the server sees who lied, and excludes it before anyone masks) ->
// upload (masked updates, by the aggregator) ->
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

class secagg_coordinator {
public:
  enum class phase { idle, keys, shares, receipts, disputes, upload, unmask };

  /// A client excluded from the round for what it did, and why.
  struct culprit {
    std::string id;
    std::string why;
    /// At close_unmask: it lied for sure (a dealer whose shares give no
    /// secret its commitment accepts), not merely named.
    bool counted = false;
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
  /// Ends the receipts phase (those that sent no receipt leave) and opens
  /// the disputes: each complaint "u's share did not open for v" is put to
  /// u (at most threshold - 1 of those against one client, drawn at
  /// random). Returns, for each client disputed, the second receipt it
  /// must answer (`disputed`: the accusers); empty iff none is.
  std::map<std::string, msg::secagg_receipt> close_receipts();

  /// Client `id`'s answer to its dispute: the secret of each disputed
  /// share. Fails iff it is not disputed, answered already, or reveals a
  /// secret for a share not disputed, or two for one.
  result<void> defend(const std::string& id, const msg::secagg_receipt& r);
  /// True iff every disputed client answered or was lost.
  bool disputes_complete() const;
  /// Ends the disputes: a share the revealed secret opens (its public key
  /// the one that leads the share, with the recipient's share key) names
  /// its accuser a liar; one it does not open, or no answer, names its
  /// sender (culprits()); both leave the round, and so does a client lost
  /// while disputed (unnamed). An accuser whose complaint was not put to
  /// its sender sits out unnamed, unless that sender lied. Then, as long
  /// as any is, a client left with fewer than threshold - 1 neighbours
  /// sits out too. Returns each remaining client's answer (the neighbours
  /// not to mask against), or fails iff fewer than max(threshold, 2)
  /// clients remain.
  result<std::map<std::string, msg::secagg_receipt>> close_disputes();

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

  /// The clients whose updates are in the sum being unmasked.
  const std::set<std::string>& in_sum() const { return in_sum_; }
  /// The round's threshold (valid from close_keys on).
  uint32_t threshold() const;

  /// The round's quantizer (the clients' clipping and bits).
  secagg::quantizer quantizer() const;
  /// Clients that left this round during setup (they sit it out).
  const std::vector<std::string>& left() const { return left_; }

  /// The clients excluded for lying in this round, with why: at
  /// close_disputes, those whose share did not open under the secret they
  /// revealed (or that revealed none), and those that said a share that
  /// opens did not; at close_unmask, the
  /// holders whose revealed shares disagreed with the secret their owner
  /// advertised ("X revealed a wrong share of Y's self seed"), and (counted)
  /// an owner none of whose shares' threshold-subsets gives the secret it
  /// committed to, where every subset was tried and at least threshold of
  /// the holders are honest if fewer than threshold lie (2 threshold - 1
  /// shares or more): it dealt them wrong.
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
    std::set<uint32_t> unopened;   ///< indices whose share did not open for it
    std::set<uint32_t> challenged; ///< accusers whose complaint it answers
    bool defended = false;
    std::map<uint32_t, msg::key_bytes> secrets; ///< revealed, by recipient
  };

  /// True iff the share `sender` sealed for `recipient` opens under the
  /// secret `sender` revealed for it.
  bool share_opens(const member& sender, const member& recipient) const;
  /// The end of the disputes: those left with too few neighbours sit out;
  /// the answers.
  result<std::map<std::string, msg::secagg_receipt>> settle_rest();

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
