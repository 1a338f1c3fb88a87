#pragma once
// Clients that were chosen for a round and offered nothing by its deadline,
// without CAF: a client that misses a round is not chosen again until it is
// heard from (it registers again, or offers for a round it is not in: a late
// offer), and then not before 2^(m-1) rounds have passed after its m-th
// miss in a row (at most max_rounds_passed_over). An update delivered
// forgets its misses. A client that stays connected and never offers costs
// the run one deadline; one that reconnects or offers late every round
// costs a deadline in rounds 1, 3, 6, 11, ... (fewer and fewer). See
// docs/design.md, "Sampling and idle clients".
// Thread-safety: none; owned by the scheduler's round_roster.

#include <cstdint>
#include <map>
#include <string>

namespace fedcaf {

class absences {
public:
  /// The most rounds a client is passed over for after a miss.
  static constexpr uint32_t max_rounds_passed_over = 64;

  /// `id` was chosen for round `r` and offered nothing by its deadline.
  /// Returns its misses in a row.
  uint32_t missed(const std::string& id, uint32_t r);
  /// `id` delivered an update: its misses are forgotten.
  void delivered(const std::string& id) { records_.erase(id); }
  /// `id` was heard from: it registered again, or offered.
  void heard_from(const std::string& id);
  /// True iff `id` may be chosen for round `r`: it missed no round, or it
  /// was heard from since its last miss and the rounds it is passed over
  /// for have passed.
  bool eligible(const std::string& id, uint32_t r) const;
  /// Calls `f(id)` for every client not eligible for round `r`.
  template <class F> void for_each_passed_over(uint32_t r, F&& f) const {
    for (const auto& [id, rec] : records_)
      if (!eligible(id, r))
        f(id);
  }
  /// `id`'s misses in a row (0: none).
  uint32_t misses(const std::string& id) const;
  /// The rounds a client is passed over for after its `misses`-th miss in a
  /// row, once heard from: 2^(misses-1), at most max_rounds_passed_over.
  static uint32_t rounds_passed_over(uint32_t misses);
  /// Clients with misses on record.
  size_t size() const { return records_.size(); }

private:
  struct record {
    uint32_t misses = 0;
    uint32_t last_round = 0; ///< the round of the last miss
    bool heard = false;      ///< heard from since the last miss
  };
  std::map<std::string, record> records_;
};

/// "1 round missed in a row: not chosen again until it is heard from
/// (registers again or offers), then after 1 round".
std::string passed_over_line(uint32_t misses);

/// "round r: the deadline passed without an update from A (1 round missed
/// in a row): not chosen again until it is heard from (...), then after 1
/// round".
std::string passed_over_note(uint32_t round, const std::string& id,
                             uint32_t misses);

} // namespace fedcaf
