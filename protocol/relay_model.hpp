#pragma once
// What passes between a relay's two halves (see docs/design.md, "Trees of
// aggregators"): the parent's model of a round, handed down to the
// children's side as it arrives; how far it has arrived, one truth for its
// server and its aggregator; each step of a sum that streams up; and the
// answer that goes back up. Value types, and one thread-safe flag.

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fedcaf/error.hpp"
#include "fedcaf/model_snapshot.hpp"

namespace fedcaf {

class relay_residency;

/// How far a relay's model of the round has arrived: one truth for "the
/// relay's model is not whole yet", set by its server as its download
/// brings the last byte (or is given up, or the run ends: then it never
/// is), and read by both the server's and the aggregator's refusal of an
/// offer (before, nobody holds the whole model: no honest child offers).
/// Thread-safety: safe (an atomic).
class model_arrival {
public:
  /// `whole`: every byte is in already (a model handed over whole).
  explicit model_arrival(bool whole = false)
      : state_(whole ? state::whole : state::arriving) {}

  /// Every byte is in now (unless given up before).
  void complete() {
    auto from = state::arriving;
    state_.compare_exchange_strong(from, state::whole,
                                   std::memory_order_acq_rel);
  }
  /// The model is given up: whole() never holds again.
  void give_up() { state_.store(state::given_up, std::memory_order_release); }
  /// True iff every byte is in and the model was not given up.
  bool whole() const {
    return state_.load(std::memory_order_acquire) == state::whole;
  }

  /// The refusal of client `id`'s offer while the model is not whole.
  static error early_offer(const std::string& id) {
    return {errc::unexpected_message,
            id + " offered an update before the relay's model of the round "
                 "had arrived whole"};
  }

private:
  enum class state : uint8_t { arriving, whole, given_up };
  std::atomic<state> state_;
};

/// Which positions of a streaming relay's sum (window and disk modes)
/// settled as int32 sums on its parent's exact grid, the others as float32
/// sums: written by the children's side's aggregator as each position
/// settles, before the upload may read its bytes (relay_step::ready), and
/// read by the upload, which flags a chunk of floats (Chunk.floatSums).
/// The side's positions are cut as the parent's chunks are or coarser
/// (its chunk size a multiple of the parent's), so each chunk of the
/// upload lies in one position.
/// Thread-safety: safe (an atomic flag per position).
class grid_positions {
public:
  /// `positions` positions of `position_bytes` bytes each (the last one
  /// may be shorter), none on the grid yet.
  grid_positions(uint64_t positions, uint64_t position_bytes)
      : flags_(std::make_unique<std::atomic<bool>[]>(positions)),
        count_(positions), position_bytes_(position_bytes) {}

  /// Position `seq` settled, on the grid or not.
  void settled(uint64_t seq, bool on_grid) {
    if (seq < count_)
      flags_[seq].store(on_grid, std::memory_order_release);
  }
  /// True iff the position holding model byte `model_offset` settled on
  /// the grid.
  bool on_grid(uint64_t model_offset) const {
    auto seq = model_offset / position_bytes_;
    return seq < count_ && flags_[seq].load(std::memory_order_acquire);
  }

private:
  std::unique_ptr<std::atomic<bool>[]> flags_;
  uint64_t count_;
  uint64_t position_bytes_;
};

/// The parent's model of a round as a relay's upstream half hands it to
/// its children's side: the model (layout and memory; while it arrives,
/// its bytes are written by the relay's download, through memory the
/// upstream half co-owns), how far it has arrived, and, in window mode,
/// which of its positions are resident. The model is handed on, never
/// kept by whoever hands it: the aggregator that adopts it takes its
/// memory (model_versions::adopt) and publishes it as its own snapshot.
struct relay_model {
  std::shared_ptr<model_snapshot> model;
  /// Set by the children's side's server (relay_flow); null: handed over
  /// whole.
  std::shared_ptr<model_arrival> arrival{};
  /// memory_mode window: the positions held (relay_residency); null in
  /// the other modes.
  std::shared_ptr<relay_residency> residency{};
  /// The parent folds this round's sum given as int32 on its exact grid
  /// (Welcome.gridSums, and the relay's chunks fit that grid).
  bool grid_sums = false;
  /// Set iff the sum may also go up on the grid position by position, as
  /// it settles (the parent reads Chunk.floatSums, and the side's chunks
  /// are whole multiples of the parent's): where each position went.
  std::shared_ptr<grid_positions> positions{};
};

/// The children's evaluations of the model a relay's round handed down
/// (their weighted means, trimmed as a flat server's are, and the weight
/// they stand for): the relay's own evaluation of that model upstream.
struct relay_evaluation {
  uint64_t samples = 0; ///< the evaluations' weights, summed
  std::vector<std::pair<std::string, double>> means;
};

/// A streaming relay's round as far as its sum has settled: its weight
/// and figures (fixed once position 0 settled), and how many bytes of its
/// sum, from the start, are settled and may go up.
struct relay_step {
  double weight = 0;
  double loss = 0;
  uint32_t clients = 0;
  uint64_t ready = 0;
  std::optional<relay_evaluation> evaluation{}; ///< none: nobody evaluated
};

/// What a relay's round of its children sends upstream (window and disk
/// modes: only where the round did not stream; weight 0: a round sat out).
struct relay_result {
  snapshot_ptr sums; ///< position by position: sum w_i x_i, at `weight`
  double weight = 0; ///< sum w_i over the updates that completed
  uint32_t clients = 0;
  double loss = 0;
  std::optional<relay_evaluation> evaluation{}; ///< none: nobody evaluated
};

} // namespace fedcaf
