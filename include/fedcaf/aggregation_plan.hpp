#pragma once
// How the server side aggregates, decided once from server_configs: which
// accumulator, in whose memory, with which rule, under secure aggregation or
// not, and which deadlines the scheduler and the server keep. Every actor of
// the server side reads its part of one aggregation_plan; none derives these
// from the config again (LevelDB's SanitizeOptions is the precedent: options
// are made consistent in one pure function, before anything runs).
// Pure values: no state, no CAF.

#include <chrono>
#include <cstdint>
#include <string>

#include "fedcaf/aggregation_rule.hpp"
#include "fedcaf/config/server_sections.hpp"
#include "fedcaf/error.hpp"
#include "fedcaf/window_accumulator.hpp"

namespace fedcaf {

/// Where updates are summed.
enum class accumulator_kind {
  /// A model-sized running sum (fedavg_accumulator): ram mode, averaging
  /// rules. About 2 x model on the server.
  model_sum,
  /// `window` open chunk positions, each reduced when its contributors have
  /// delivered it (window_accumulator): window and disk modes, and the
  /// robust rules in ram mode.
  open_positions,
};

struct aggregation_plan {
  fedcaf::memory_mode memory_mode = fedcaf::memory_mode::ram;
  accumulator_kind accumulator = accumulator_kind::model_sum;
  /// open_positions: a position is averaged into the global model's own
  /// memory (window, disk), not into the next model's (robust rules in ram).
  bool in_place = false;
  /// disk: the global model lives in a file under storage_dir and every
  /// actor gives its pages back after use; the server optimizer's state
  /// files live there too. Empty otherwise.
  std::string storage_dir;
  /// window: a relay with this plan holds its parent's model position by
  /// position (relay_residency), with a download cache of this many chunks
  /// (stream_configs.window). 0: it holds the whole model (ram; disk, in
  /// files under storage_dir).
  uint32_t relay_cache_chunks = 0;
  /// The threads a chunk's checks, fold and settling use, the
  /// aggregator's own included (`fold_threads`; 0 there: a quarter of the
  /// host's cores, 1 to 16).
  uint32_t fold_threads = 1;
  /// open_positions: the updates each position waits for (sync rounds of at
  /// most this many clients); 0 for model_sum.
  uint32_t position_contributors = 0;
  /// The most updates folded into one chunk position in a round (the
  /// server's num_clients): bounds each element an update may carry, so the
  /// weighted sum stays finite.
  uint32_t max_contributors = 1;
  /// server_configs.aggregator, parsed.
  server_rule rule = server_rule::fedavg;
  /// TrimmedMean, Median: how a position's values become its value.
  position_rule robust;
  /// FedAsync, FedBuff: the AsyncScheduler, model versions instead of rounds.
  bool async = false;
  /// A server optimizer runs at finalize: an adaptive or momentum rule, or
  /// DP-FedAvg's noise on FedAvg.
  bool server_optimizer = false;
  /// SecAgg+: updates arrive masked and quantized and are summed in Z_2^32
  /// (ram: a model-sized sum; window: the open positions).
  bool secure = false;
  /// A relay (fedcaf relay): a round's result is each position's weighted
  /// sum (and its weight), sent upstream as a partial sum, not a mean.
  bool partial_sums = false;
  /// A relay whose positions settle one by one in the model's memory
  /// (window, disk): each goes up the moment it settles, its sum streamed
  /// to the parent from position 0 on (docs/design.md, "Trees of
  /// aggregators").
  bool streams_sums() const {
    return partial_sums && accumulator == accumulator_kind::open_positions &&
           in_place && !secure;
  }
  /// The updates are summed as integers on the exact grid (a mean's sum
  /// in every memory mode, unmasked; not a robust rule's), where a relay's
  /// int32 sums on that grid are folded as they are (Welcome.gridSums).
  bool sums_on_grid() const {
    return !secure &&
           (accumulator == accumulator_kind::model_sum || !robust.robust());
  }
  client_weighting weights = client_weighting::equal;
  deadline_action on_deadline = deadline_action::fail;
  partial_updates partial = partial_updates::discard;
  /// The scheduler's round deadline: clients that have not offered by then
  /// sit the round out. Zero under secure aggregation, where nobody offers
  /// before the keys are set: there round_deadline_s ends the keys phase
  /// (secagg_keys_deadline) instead. Zero: none.
  std::chrono::milliseconds scheduler_deadline{0};
  /// Secure aggregation: round_deadline_s, from the round's start to the
  /// end of the keys phase. Zero: none.
  std::chrono::milliseconds secagg_keys_deadline{0};
};

/// Returns the plan for `server`, or an error (bad_config, naming the keys)
/// iff its choices cannot run together. load_config refuses the same
/// combinations with the config's file and key first; this is the check for
/// callers that build a server_config by hand.
result<aggregation_plan> plan_aggregation(const server_config& server);

/// disk mode: the file that holds process `pid`'s global model under the
/// plan's storage_dir. Returns "" iff the plan keeps the model in memory
/// (ram, window).
std::string global_model_file(const aggregation_plan& plan, int pid);

} // namespace fedcaf
