#pragma once
// When a relay's children's side may open a round, without CAF: its rounds
// follow its parent's, so a round the scheduler chose waits for the
// parent's model, and a round short of min_clients is sat out only once
// that model is in (children may come meanwhile). The server keeps the
// response promises and acts on what the gate answers; see docs/design.md,
// "Trees of aggregators".
// Thread-safety: none; owned by the server actor.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace fedcaf {

class relay_gate {
public:
  /// A round the scheduler chose, held until the parent's model is in.
  struct held_start {
    uint32_t round = 0;
    std::vector<std::string> chosen;
  };

  /// The scheduler chose round `round`: returns true iff it opens now (the
  /// parent's model is in); else it is held for model_in().
  bool start(uint32_t round, std::vector<std::string> chosen);

  /// What the parent's model, now in place, releases: the round start held
  /// for it (start() it again: it opens), or the round whose sit-out
  /// waited for it (to be chosen again), or nothing.
  struct released {
    std::optional<held_start> start;
    std::optional<uint32_t> choose_again;
  };
  released model_in();

  /// What a sit-out of round `round` does now.
  enum class sitting { waits, now_open_round, now };
  /// waits: the parent's model is not in yet (a start held for it is
  /// dropped: the round is chosen again then); now_open_round: the round is
  /// open and is to be closed; now: the model is in, the round never
  /// opened. Either `now` answers the parent's model with no sum.
  sitting sit_out(uint32_t round);

  /// The round was published (its sum answers the parent's model).
  void published() { open_ = false; }

  /// True iff a round of the children is open.
  bool is_open() const { return open_; }

  /// The parent's model in place never came whole: no round opens on it
  /// (a start waits for the next model).
  void withdraw() { ready_ = false; }

  /// Returns the round of a sit-out waiting for the model, and forgets it
  /// (the run ends, or model_in took it).
  std::optional<uint32_t> take_waiting_sit_out();

private:
  bool ready_ = false; ///< the parent's model of the next round is in
  bool open_ = false;  ///< a round of the children is open
  std::optional<held_start> held_;
  std::optional<uint32_t> waiting_sit_out_;
};

} // namespace fedcaf
