#pragma once
// How a client ends: the goodbye it says (at most one, only where the
// server can take it; none of its own making after the server's Done,
// though a reason the program noted is still said) and what its report
// says of the end. A reason the program noted (a signal, its own code's
// exception: departure) stands over whatever ends the client next, which
// then leaves with it rather than failing. The client actor sends and
// quits as this says. No CAF. Thread-safety: one actor's.

#include <atomic>
#include <memory>
#include <optional>

#include "fedcaf/error.hpp"
#include "messages/codec.hpp"
#include "protocol/departure.hpp"

namespace fedcaf {

class client_departure {
public:
  /// `leaving`: where the program notes why it leaves (null: it never
  /// does); `done_heard`: set as the server's Done arrives, before the
  /// actor reads it (null: never).
  client_departure(std::shared_ptr<const departure> leaving,
                   std::shared_ptr<const std::atomic<bool>> done_heard);

  /// The server said Done: the run is over, no goodbye goes after it.
  void run_over() { run_over_ = true; }

  /// Returns true iff a goodbye may go now: none went yet and the server
  /// can take it (`reachable`: connected, not registering again). From a
  /// true answer on, one went.
  bool may_say(bool reachable);

  /// The reason the program noted, if any.
  std::optional<msg::goodbye> noted() const;

  /// The reason the program noted iff the client has not left yet: it
  /// leaves with it, whatever else ended it.
  std::optional<msg::goodbye> leaves_instead() const;

  /// The client leaves for `why` (nullopt: a goodbye that did not decode).
  /// Returns what its report ends with (cancelled: why, and whether its
  /// goodbye reached the server).
  error left(const std::optional<msg::goodbye>& why);

  /// True iff the client, giving up on `e`, should wait instead: it was
  /// cancelled by the server's Done, which comes next and ends it.
  bool done_coming(const error& e) const;

  /// The goodbye to say as the client gives up on `e` (its trainer or
  /// model failed, or its round cannot go on); nullopt iff none goes: the
  /// run is over, or it leaves with the program's reason.
  std::optional<msg::goodbye> giving_up(const error& e) const;

  /// The goodbye to say as an exception `e` escapes the client's handler;
  /// nullopt iff the run is over.
  std::optional<msg::goodbye> exception(const error& e) const;

private:
  std::shared_ptr<const departure> leaving_;
  std::shared_ptr<const std::atomic<bool>> done_heard_;
  bool said_ = false;     ///< a goodbye went
  bool left_ = false;     ///< left() ran: its error is the report's
  bool run_over_ = false; ///< the server said Done: nobody to leave
};

} // namespace fedcaf
