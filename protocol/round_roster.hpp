#pragma once
// A SyncScheduler's rounds as sets of client ids, without CAF: who is
// registered (and from where), who takes part in the open round (drawn with
// the seed), who offered, whose update closed, who left it, and what each
// offer reported; and what follows from them: how a drop leaves the round,
// whom the deadline cuts (protocol/round_deadline.hpp), whose updates are
// collected again, and the figures a round publishes. The scheduler keeps
// the timers, the requests and the sends, and asks the roster. See
// docs/design.md, "State machines" and "Sampling and idle clients".
// Thread-safety: none; owned by the scheduler actor.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "fedcaf/error.hpp"
#include "protocol/absences.hpp"
#include "protocol/offer_admission.hpp"
#include "protocol/population.hpp"
#include "protocol/round_deadline.hpp"

namespace fedcaf {

class round_roster {
public:
  /// How rounds are drawn and how a dropped client's upload is treated.
  struct terms {
    /// Clients per round (0: every registered one), drawn with the seed.
    uint32_t clients_per_round = 0;
    uint64_t sampling_seed = 42;
    /// A streaming relay: a dropped client's chunks stay in the sum.
    bool stream_sums = false;
    /// partial_updates: keep: what a client dropped mid-upload delivered
    /// stays in the round.
    bool keep_partial = false;
    /// A simulation's population (null: none): rounds are drawn from its
    /// ids, registered or not, and a registered member not drawn leaves
    /// as a round starts (retired: the server sends it away).
    std::shared_ptr<const population> members;
  };

  /// What one offer of the round reported, and the weight it was given.
  struct offered_figures {
    double train_loss = 0;
    double dp_epsilon = 0;
    double weight = 1;
  };

  explicit round_roster(terms t) : terms_(t) {}

  // -- registration ----------------------------------------------------------

  /// Client `id` registered from `from` (its address, or in-process); it
  /// is heard from (see absences).
  void join(const std::string& id, const std::string& from);
  /// `id` offered (for any round): it is heard from (see absences).
  void heard_from(const std::string& id) { absences_.heard_from(id); }
  /// `id`'s update of the open round was refused (`why`, of `code`): it
  /// leaves the round, with a miss where it was silent, too slow or a lie
  /// (timeout, poisoned_update; a restarted process's other update is
  /// none). Returns the log line, or nullopt iff it was no participant.
  std::optional<std::string> rejected(const std::string& id,
                                      const std::string& why, errc code);
  /// "round r: the N chunks of ID's update folded before its refusal stay
  /// in the sum ...".
  static std::string kept_note(uint32_t round, const std::string& id,
                               uint64_t folded);
  /// `id`'s update of the open round was rejected (a lie, or too slow or
  /// silent: cut at the deadline or the idle timeout): a miss, as for no
  /// offer by the deadline. Returns its misses in a row.
  uint32_t missed(const std::string& id) {
    return absences_.missed(id, round_);
  }
  /// `id`'s rounds missed in a row (see absences).
  uint32_t misses(const std::string& id) const { return absences_.misses(id); }
  /// `id` is registered no more (dropped); it stays known to the run (a
  /// population's member is drawn no more).
  void unregister(const std::string& id);
  /// Joined and not dropped.
  const std::set<std::string>& registered() const { return registered_; }
  /// Where `id` registered from ("" if it never did).
  std::string address_of(const std::string& id) const;

  // -- the open round --------------------------------------------------------

  /// Opens round `r`: its participants are every registered client, or
  /// clients_per_round of them drawn with the seed and `r` (reproducible),
  /// less those passed over for missing rounds (see absences) unless that
  /// leaves fewer than `least` (min_clients: then the draw is over every
  /// registered client, as the round could not go on without them); the
  /// last round's offers, closes, figures and misses are forgotten. With a
  /// population, the draw is over its members not dropped (the same draw
  /// as over them registered), and the registered members not drawn are
  /// registered no more (retired: one that missed a round is passed over
  /// until heard from, which a member sent away never is).
  void start(uint32_t r, uint32_t least = 0);
  /// The open round (0 before the first).
  uint32_t round() const { return round_; }
  /// May still deliver to the open round.
  const std::set<std::string>& participants() const { return participants_; }
  const std::set<std::string>& offered() const { return offered_; }
  /// Offered and delivered whole.
  const std::set<std::string>& closed() const { return closed_; }
  /// True iff every participant's update has closed.
  bool all_closed() const { return closed_.size() == participants_.size(); }
  /// True iff fewer updates closed than there are participants.
  bool awaiting_updates() const {
    return closed_.size() < participants_.size();
  }
  /// Left the open round.
  const std::set<std::string>& missing() const { return missing_; }

  /// The open round as `id`'s offer sees it (see admit_round_offer).
  round_view view_of(const std::string& id, bool finalizing,
                     bool sitting_out) const;

  /// Offer `o` was admitted with `weight`. A repeated offer (a resume)
  /// keeps the figures of the first: its stream keeps the weight it was
  /// opened with. Its loss counts within +-max_figure_magnitude, so that
  /// the round's weighted sum of losses stays finite (two finite 1e308
  /// losses would make a relay's mean infinite, which its parent refuses).
  void offer(const msg::offer& o, double weight);
  /// `id`'s update closed: returns false iff it did not offer in this
  /// round (then nothing changes).
  bool close(const std::string& id);

  /// `id` leaves the open round (it is missing): returns true iff it was a
  /// participant.
  bool leave(const std::string& id);
  /// Forgets `id`'s offer, its close and its figures (rejected).
  void forget(const std::string& id);

  /// What a drop of a participant leaves to the scheduler.
  enum class dropped {
    not_in_round,    ///< not a participant: nothing changes
    before_offer,    ///< it never offered: a position awaits one fewer
    whole_streamed,  ///< a streaming relay's child, update whole: kept
    cut_streamed,    ///< a streaming relay's child mid-upload: ask, keep
    partial_kept,    ///< partial_updates: keep, mid-upload: ask, keep
    partial_dropped, ///< partial_updates: discard, mid-upload: ask, decide
    collect_again,   ///< its update is in the sum: collect the others again
    forgotten,       ///< finalizing: its update is in the model already
  };
  /// Participant `id` was dropped (lost for good): it leaves the round,
  /// with its offer (its figures stay where its data stays in the sum:
  /// kept or streamed). `finalizing`: the round's updates are in.
  dropped drop(const std::string& id, bool finalizing);

  /// The round's deadline passed: returns whom it cuts (see
  /// cut_at_deadline); those that never offered leave the round now, each
  /// with a miss on record (see absences). A cut
  /// that waits (`wait` and fewer than `min_clients` delivered) leaves the
  /// round overdue, until the next cut.
  deadline_cut cut_at_deadline(uint32_t min_clients, bool wait);
  /// True iff the deadline passed and the round waits for min_clients.
  bool overdue() const { return overdue_; }
  /// `ids` had no stream when their uploads were ended: those still
  /// participants leave the round, with their offers.
  void leave_without_stream(const std::vector<std::string>& ids);
  /// A relay's round sat out: the participants that have not offered
  /// leave it (the round is lost; only uploads under way are awaited).
  void leave_unoffered();

  /// The updates in the sum are collected again: returns the clients that
  /// had offered (to send theirs again, in order); nobody has offered or
  /// closed now (their figures stay: a repeated offer keeps them).
  std::vector<std::string> collect_again();

  // -- log lines -------------------------------------------------------------

  /// "round r failed: only ..." of `num_clients`, naming who is missing:
  /// the participants are fewer than `min_clients`.
  std::string short_of_clients(uint32_t num_clients,
                               uint32_t min_clients) const;
  /// "round r cannot start: ...": fewer than `min_clients` registered.
  std::string cannot_start(uint32_t min_clients) const;
  /// The log line of `id` dropped from round `round` (`how`: kept,
  /// cut_streamed or partial_dropped) with `chunks` of its update in the
  /// sum: kept, or (partial_dropped) dropped before sending a chunk.
  static std::string dropped_note(uint32_t round, const std::string& id,
                                  dropped how, uint64_t chunks);
  /// "round r: `gone` left: `why`; collecting the updates of ... again",
  /// naming those that offered.
  std::string collecting_again(const std::string& gone,
                               const std::string& why) const;

  // -- the figures -----------------------------------------------------------

  /// The offers' mean training loss (those whose data is in the sum).
  double mean_offered_loss() const;
  /// The weights of the closed updates, summed.
  double closed_weight() const;

  /// What a round publishes.
  struct round_figures {
    uint32_t clients = 0; ///< closed updates
    double loss = 0;      ///< their mean training loss
    /// The largest DP-SGD epsilon, a kept partial update's client included.
    double dp_epsilon = 0;
    /// Every client the run has known that is not in the round's model.
    std::vector<std::string> missing;
    std::vector<std::string> contributors; ///< closed, in order
    /// The contributors in `relays` and their offers' weights.
    std::vector<std::pair<std::string, double>> relay_weights;
  };
  /// The open round's figures; `relays`: server_configs.relays.
  round_figures figures(const std::map<std::string, uint64_t>& relays) const;

private:
  std::set<std::string> sample(uint32_t r, uint32_t least) const;
  /// The ids of a draw of `terms_.clients_per_round` from `pool` (all of
  /// it iff it is not larger), with the round's seed.
  template <class T, class Id>
  std::set<std::string> draw(uint32_t r, std::vector<T> pool, Id id) const;
  /// The population's members to draw round `r` from (see start).
  std::vector<uint32_t> member_pool(uint32_t r, uint32_t least) const;
  offered_figures figures_of(const std::string& id) const;

  terms terms_;
  /// Every client that ever joined (none with a population: its rounds'
  /// missing are those drawn and not in the model).
  std::set<std::string> known_;
  /// A population's members dropped (drawn no more).
  std::set<uint32_t> excluded_;
  std::set<std::string> registered_;             ///< joined and not dropped
  std::map<std::string, std::string> addresses_; ///< where each registered
  uint32_t round_ = 0;
  bool overdue_ = false; ///< deadline passed, waiting for min_clients
  std::set<std::string> participants_; ///< may still deliver to this round
  std::set<std::string> missing_;      ///< left this round
  std::set<std::string> offered_;
  std::set<std::string> closed_;
  std::map<std::string, offered_figures> figures_;
  absences absences_; ///< who missed rounds, passed over for a while
};

} // namespace fedcaf
