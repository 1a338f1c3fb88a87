#pragma once
// What a scheduler's deadlines decide, without CAF: which clients a round's
// deadline cuts off (those that never offered leave the round at once, the
// streams of those still uploading are ended by the aggregator), and
// whether the run starts or fails when the registration deadline passes,
// naming the clients that never came. Pure functions of the sets the
// scheduler keeps; the scheduler keeps the timers.
// Thread-safety: value types and pure functions only.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "fedcaf/error.hpp"

namespace fedcaf {

/// Returns "a, b, c" for the ids in order.
std::string join_ids(const std::set<std::string>& ids);

/// What a round's deadline does with the clients that have not delivered.
struct deadline_cut {
  /// on_deadline: wait and fewer than min_clients delivered: nobody is cut
  /// yet; the round waits until min_clients have delivered.
  bool wait = false;
  std::set<std::string> not_offered; ///< leave the round now
  std::set<std::string> uploading;   ///< their streams are to be ended
};

/// The deadline of a round passed. `participants` may still deliver,
/// `offered` offered their update, `closed` delivered it whole. Every
/// participant that has not delivered is cut off (never offered: leaves
/// now; still uploading: its stream is ended), unless `wait` and fewer
/// than `min_clients` delivered.
deadline_cut cut_at_deadline(const std::set<std::string>& participants,
                             const std::set<std::string>& offered,
                             const std::set<std::string>& closed,
                             uint32_t min_clients, bool wait);

/// The log line of round `round`'s deadline passed with `delivered`
/// updates, fewer than `min_clients`: the round waits for min_clients.
std::string waiting_for_min_clients(uint32_t round, size_t delivered,
                                    uint32_t min_clients);

/// The log line of round `round`'s deadline passed while `ids` uploaded.
std::string uploads_cut_at_deadline(uint32_t round,
                                    const std::set<std::string>& ids);

/// The refusal of client `id` (registered from `from`) that had not
/// offered by round `round`'s deadline.
error not_offered_by_deadline(const std::string& id, const std::string& from,
                              uint32_t round);

/// Why an upload still under way at the round deadline `deadline` ends.
error upload_past_deadline(std::chrono::milliseconds deadline);

/// What the registration deadline decides.
struct registration_verdict {
  bool start = false;  ///< the run starts with the registered clients
  std::string message; ///< for the log: who came, who never did, why
};

/// The registration deadline `after` passed with `registered` in, of
/// `num_clients`. The run starts iff at least `min_clients` registered;
/// the message names the ids of `expected` that never came (or, with no
/// expected ids, how many are missing).
registration_verdict
registration_deadline_passed(const std::set<std::string>& registered,
                             const std::vector<std::string>& expected,
                             uint32_t num_clients, uint32_t min_clients,
                             std::chrono::milliseconds after);

} // namespace fedcaf
