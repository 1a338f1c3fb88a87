#pragma once
// The operator's record of what befell the run's clients and rounds: each
// event counted by its reason (for /metrics) and a log of the latest
// events (for the live page and /status). The server's reporter feeds it
// through live_status, which locks around it.
// Bounded whatever peers do: a reason is a short token (an errc name, a
// goodbye's reason, a fixed word), at most max_kinds (event, reason) pairs
// are counted apart (past them the reason reads "other"), the log keeps
// max_entries. Refused Hellos, which a stranger can send at will, go to a
// log of their own (max_refusals entries), so that they never push the
// events of the run's clients out; there and in the main log, an event
// that registered peers can repeat at will (registered, resumed, left)
// folds into the entry of the same event and reason among the latest
// fold_window entries, with a count. Texts from peers are cut and made
// printable.
// Thread-safety: none (one owner; live_status locks).

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <string_view>
#include <utility>

namespace fedcaf {

/// What befell a client or a round.
enum class run_event : uint8_t {
  registered, ///< a client joined the run
  resumed,    ///< a lost client came back within its grace
  refused,    ///< a Hello was refused: no client joined
  lost,       ///< a connection ended without a goodbye (grace runs)
  left,       ///< a client said goodbye: dropped at once
  dropped,    ///< a client is out of the run (grace over, or banned)
  rejected,   ///< a client's update was refused: it leaves the round
  excluded,   ///< secure aggregation found a client lying
  round_failed,
};
inline constexpr size_t run_event_count = 9;

/// "registered", "resumed", ..., "round_failed".
const char* to_string(run_event e);

/// One line of the log: `count` events of one kind and reason, the first
/// at `first_unix_s` by `client`, the last at `unix_s` by `last_client`
/// (empty: the same).
struct run_event_entry {
  double first_unix_s = 0;
  double unix_s = 0;
  run_event event = run_event::registered;
  std::string reason;
  std::string client;
  std::string last_client;
  uint64_t count = 1;
  std::string detail; ///< the first event's, for people
};

/// Counts by event and reason.
using run_event_counts = std::map<std::pair<run_event, std::string>, uint64_t>;

/// Counts `e` for `reason` (as reason_token makes it) in `counts`, which
/// holds at most run_events::max_kinds (event, reason) pairs (past them:
/// "other"). Returns the token it was counted under.
std::string count_event(run_event_counts& counts, run_event e,
                        std::string_view reason);

/// `counts` by the events' and the reasons' names: event -> reason ->
/// count (the report's `events`, /status' `events.counts`).
using named_event_counts =
    std::map<std::string, std::map<std::string, uint64_t>>;
named_event_counts by_name(const run_event_counts& counts);

class run_events {
public:
  /// The log's most entries (the oldest go first).
  static constexpr size_t max_entries = 256;
  /// The refusals' log's most entries.
  static constexpr size_t max_refusals = 32;
  /// How many of the latest entries a folding event may fold into.
  static constexpr size_t fold_window = 8;
  /// The most (event, reason) pairs counted apart.
  static constexpr size_t max_kinds = 128;
  /// The most bytes of a reason, of a client id and of a detail kept.
  static constexpr size_t max_reason_bytes = 40;
  static constexpr size_t max_client_bytes = 64;
  static constexpr size_t max_detail_bytes = 240;

  /// Counts `e` for `reason` (reason_token of it) and logs it, of client
  /// `client` (empty: of no client), `detail` for people, at `unix_s`.
  void note(run_event e, std::string_view reason, std::string_view client,
            std::string_view detail, double unix_s);

  /// Counts by event and reason.
  const run_event_counts& counts() const { return counts_; }
  /// Returns how many `e` were noted, whatever their reason.
  uint64_t total(run_event e) const;
  /// The latest entries but refusals, oldest first.
  const std::deque<run_event_entry>& log() const { return log_; }
  /// The latest refused Hellos, oldest first.
  const std::deque<run_event_entry>& refusals() const { return refusals_; }

private:
  run_event_counts counts_;
  std::deque<run_event_entry> log_;
  std::deque<run_event_entry> refusals_;
};

/// Returns `text` as a reason token: ASCII letters lowered, digits and '_'
/// kept, any other byte as '_', at most max_reason_bytes; "unknown" for an
/// empty text.
std::string reason_token(std::string_view text);

/// Appends the Prometheus text exposition of `counts` to `out`: a counter
/// family per event (docs/operations.md, "Live view"), by reason where
/// reasons tell events apart.
void append_prometheus(std::string& out, const run_event_counts& counts);

/// Returns `text` cut to `most` bytes (its last three "..." where it was
/// longer), each byte outside printable ASCII as '?'.
std::string printable_cut(std::string_view text, size_t most);

} // namespace fedcaf
