#pragma once
// The rounds the server announces, without CAF: the open round, the
// clients chosen for it, the RoundStart they were sent, who must be asked
// again to resend, and what a client that comes back is sent. The server
// actor sends the frames it returns.
// open(r) -> (resend r)* -> close -> open(r + 1) ... -> evaluate_only;
// with the AsyncScheduler the rounds stay open: each task is a RoundStart.
// Thread-safety: none; owned by the server actor.

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "messages/codec.hpp"
#include "protocol/model_exchange.hpp"

namespace fedcaf {

class round_announcement {
public:
  /// Announces the model `exchange` serves. REQUIRES: `exchange` outlives
  /// this object.
  explicit round_announcement(const model_exchange& exchange)
      : exchange_(&exchange) {}

  /// Opens round `round` for the clients `chosen`; forgets who was to be
  /// asked to resend. Returns the round's announcement.
  const msg::frame& open(uint32_t round,
                         const std::vector<std::string>& chosen);
  /// AsyncScheduler: returns the announcement of a task of round `round`
  /// on the model served now. Opens the rounds iff none is open.
  msg::frame task(uint32_t round);
  /// Returns the announcement that collects round `round`'s updates again
  /// iff it is the open round, else nullopt.
  std::optional<msg::frame> resend(uint32_t round) const;
  /// Client `id` could not be asked to resend: it is, once it is back.
  void resend_later(const std::string& id) { resend_pending_.insert(id); }
  /// Returns what client `id`, back, is sent: in the final evaluation,
  /// its announcement unless `evaluated` (it answered already); else
  /// `task` (AsyncScheduler: its own RoundStart) iff not null or empty;
  /// else the open round's announcement (the resend one iff it missed
  /// that) iff the round is open and chose it; else nullopt.
  std::optional<msg::frame> again(const std::string& id, bool evaluated,
                                  const msg::frame* task);
  /// Returns the announcement that asks for an evaluation of the final
  /// model (round `round`); no round is open from now on.
  const msg::frame& evaluate_only(uint32_t round);
  /// The open round ended; `keep_open` (AsyncScheduler): tasks go on.
  void close(bool keep_open) { open_ = keep_open; }
  /// The run ended: nothing is open, the final evaluation neither.
  void end() { open_ = final_pass_ = false; }

  /// The figures announcements carry from now on: the last evaluation.
  void set_previous(const msg::metrics& m) { previous_ = m; }
  const msg::metrics& previous() const { return previous_; }
  uint32_t round() const { return round_; }
  bool is_open() const { return open_; }
  /// The clients chosen for the open (or last) round.
  const std::set<std::string>& chosen() const { return chosen_; }
  /// The last announcement made by open() or evaluate_only().
  const msg::frame& current() const { return frame_; }

private:
  const model_exchange* exchange_;
  uint32_t round_ = 0;
  bool open_ = false;
  bool final_pass_ = false; ///< evaluate_only() was announced
  std::set<std::string> chosen_;
  std::set<std::string> resend_pending_; ///< lost while asked to resend
  msg::frame frame_;
  msg::metrics previous_;
};

} // namespace fedcaf
