#pragma once
// The checks an uploaded chunk passes before it touches the sum, without
// CAF: its place in the plan, its values once decoded (compressed uploads),
// finite and within what the sum can hold, and the update's distance from
// the global model within its bound (the least of max_update_norm and
// max_update_ratio * max(a, update_norm_floor), a being ||g|| grown by at
// most max_norm_growth per model, ||g|| measured once per model:
// measure_global) and the norm the client declared; then
// norm_bound's scaling towards the global model. A chunk that fails
// changes nothing here. The caller passes the global model's bytes; the
// checker owns no model memory (two chunk-sized scratch buffers only).
//
// The distance is measured against the global model's bytes at the chunk's
// place, except below `overwritten_below` (window and disk modes after a
// reset, where the model already holds the round's first average there):
// there it is the distance recorded when the client first sent that chunk,
// and the client must send the same bytes again (same checksum), so a
// resend cannot change an update that passed.
// Thread-safety: none; owned by the aggregator actor.

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "fedcaf/aggregation_plan.hpp"
#include "fedcaf/byte_buffer.hpp"
#include "fedcaf/chunk_plan.hpp"
#include "fedcaf/compression.hpp"
#include "fedcaf/config/aggregator_section.hpp"
#include "fedcaf/element.hpp"
#include "fedcaf/error.hpp"
#include "fedcaf/manifest.hpp"
#include "fedcaf/work_pool.hpp"
#include "messages/codec.hpp"
#include "protocol/upload_ledger.hpp"

namespace fedcaf {

/// A chunk of a client's update that passed the content checks: its
/// distance from the global model, and its checksum (verified on decoding),
/// recorded in place with max_update_norm.
struct checked_chunk {
  double distance_squared = 0;
  uint64_t checksum = 0;
  bool grid = false; ///< read as a relay's int32 sums on the grid
};

class chunk_checker {
public:
  /// Checks chunks of `plan` (which must outlive the checker) over models
  /// laid out as `layout`, under `p` (max_contributors, secure, in_place),
  /// `rule` (max_update_norm, norm_bound) and `z` (compressed uploads).
  /// REQUIRES: layout has one floating dtype.
  chunk_checker(const manifest& layout, const chunk_plan& plan,
                const aggregation_plan& p, const rule_config& rule,
                const compression_config& z);

  /// The largest chunk payload an upload may carry (compressed: the
  /// encoder's bound for a chunk).
  uint64_t max_payload() const { return max_payload_; }

  /// The largest magnitude an element of an update of `weight` may have:
  /// with every term of the weighted sum at most FLT_MAX / (max_contributors
  /// + 1), the sum of a position's max_contributors terms cannot overflow
  /// float32, whatever the weights (a finite but huge update would otherwise
  /// turn the sum, the published model and every later update into
  /// infinities).
  double max_abs(double weight) const;

  /// Measures the global model `global` (once per published model): the
  /// update bound becomes the least of max_update_norm and max_update_ratio
  /// * max(a, update_norm_floor) (each where set), where the anchor a is
  /// ||global|| for the first model, then min(||global||, max_norm_growth
  /// * max(a', update_norm_floor)) with a' the last model's anchor. Gives
  /// the pages of a file-backed model back as it goes (disk mode).
  void measure_global(const byte_buffer& global);

  /// The next model measured anchors the bound at its own ||g|| (a
  /// relay's parent's model: the parent's bound keeps it from ratcheting,
  /// and a relay's own first model is no model of the run).
  void forget_anchor() { anchor_norm_ = -1; }

  /// measure_global a position at a time, as a model arrives (a
  /// window-mode relay gives its positions back as they are served): the
  /// bound holds from measure_end() on, and until then the last one.
  void measure_begin() { squares_ = 0; }
  void measure_position(uint64_t seq, std::span<const std::byte> global);
  /// What measure_position(seq, global) adds, computed without adding it
  /// (safe on any thread); add_squares adds such a figure, in the same
  /// order as measure_position would.
  double position_squares(uint64_t seq,
                          std::span<const std::byte> global) const;
  void add_squares(double squares) { squares_ += squares; }
  void measure_end();

  /// The bound on an update's L2 distance from the global model that
  /// inspect() applies; 0: none.
  double update_bound() const { return bound_; }

  /// A line for the log: the distance of `s`'s update from the global model
  /// as measured, and its ratio to max(||g||, update_norm_floor).
  std::string distance_line(const upload_record& s) const;

  /// The factor `client_id`'s update of declared norm `declared_norm` is
  /// scaled by: norm_bound / declared_norm iff norm_bound is set and below
  /// it (logged), else 1.
  double scale_for(const std::string& client_id, double declared_norm) const;

  /// Compressed uploads: chunk `c` of stream `s` as the model's values, the
  /// global model's plus the delta it carries (valid until the next call);
  /// others as they came. The checksum stays the encoded bytes'. Returns an
  /// error iff the chunk is not the stream's next or does not decode.
  result<msg::chunk_view> expand(const upload_record& s,
                                 const msg::chunk_view& c,
                                 std::span<const std::byte> global);

  /// Returns ok iff chunk `c` lies in its slot of the plan (sequence,
  /// tensor index, offset, size).
  result<void> placed(const msg::chunk_view& c) const;

  /// The checks of an update's content (none under secure aggregation:
  /// masked words are uniform): finite values within max_abs(s.weight),
  /// and the distance from `global` so far within update_bound() and the
  /// norm `s` declared (poisoned_update; internal iff a chunk below
  /// `overwritten_below` has no record). Returns the chunk's distance.
  /// Without `measured`, the finite values only (a window-mode relay's
  /// round given up: g is gone, and its sum goes nowhere).
  /// REQUIRES: placed(c), c is `s`'s next chunk.
  /// `split`: the checks of a chunk in parts on its threads (the same
  /// verdict and distance, to the bit, as on one).
  result<checked_chunk>
  inspect(const upload_record& s, const msg::chunk_view& c,
          std::span<const std::byte> global, uint64_t overwritten_below,
          bool measured = true, work_split split = {}) const;

  /// True iff chunk `c` of `s` may be measured by the pass that folds it
  /// (accumulator::fold_measured) and judged after: folded as it came (no
  /// norm_bound scaling, no kept tensor in it), no declared norm to hold
  /// it to (whose comparison sums in float64 as the client does), not
  /// masked.
  bool measured_in_fold(const upload_record& s, const msg::chunk_view& c) const;

  /// A chunk below `overwritten_below` (window and disk modes after a
  /// reset: g there is gone) must be the one its client sent before, read
  /// the same way (`grid`: as int32 sums on the grid): returns that
  /// pass's distance, to judge it by, or nullopt where it is measured now
  /// (at or above it; no records kept: no bound). poisoned_update iff it
  /// differs; internal iff no record.
  result<std::optional<double>> first_pass(const std::string& id,
                                           const msg::chunk_view& c,
                                           uint64_t overwritten_below,
                                           bool grid) const;

  /// The magnitude bound inspect() holds the values of `s`'s chunks to:
  /// max_abs of its weight (a relay's sum: of 1). A fold that measures
  /// tests it too (fedavg_accumulator::fold_measured), in place of
  /// inspect(), and fold_refusal() names what it refused.
  double bound_of(const upload_record& s) const {
    return max_abs(s.summed ? 1.0 : s.weight);
  }
  /// The error of such a fold that refused chunk `c` of `s`: inspect()'s
  /// iff a value lies beyond bound_of(s) (NaN and infinities too), else
  /// `refused` (a value beyond the exact sum's range).
  error fold_refusal(const upload_record& s, const msg::chunk_view& c,
                     error refused) const;

  /// The distance checks of inspect(), for a chunk of `s` measured
  /// elsewhere at `distance_squared` from the global model (`grid`: read
  /// as int32 sums on the grid, as record() keeps it).
  result<checked_chunk> judge(const upload_record& s, const msg::chunk_view& c,
                              double distance_squared, bool grid = false) const;

  /// Chunk `c` of stream `s` as it is folded (valid until the next call):
  /// norm_bound, scaled towards the global model, g + scale (x - g);
  /// tensor_rules keep, the global model's values in its kept tensors; as
  /// it came where neither applies. REQUIRES: placed(c), `global` is the
  /// model the client received.
  msg::chunk_view bounded(const upload_record& s, const msg::chunk_view& c,
                          std::span<const std::byte> global);

  /// Chunk `seq` of `client_id`'s update was folded as `c`: recorded (in
  /// place with an update bound only) for a resend after a reset.
  void record(const std::string& client_id, uint64_t seq,
              const checked_chunk& c);

  /// Forgets the round's records.
  void forget_round() { first_pass_.clear(); }

private:
  /// The refusal's reason: the distance `so_far` (squared) passed bound_
  /// at chunk `seq`, and which key set it.
  std::string bound_exceeded(double so_far, uint64_t seq) const;

  result<checked_chunk> distance(const std::string& id,
                                 const msg::chunk_view& c,
                                 std::span<const std::byte> global,
                                 uint64_t overwritten_below, double k,
                                 work_split split) const;
  /// The first pass's distance of client `id`'s chunk `c`, read as
  /// `grid` says (first_pass()).
  result<double> recorded(const std::string& id, const msg::chunk_view& c,
                          bool grid) const;

  manifest layout_;
  const chunk_plan& plan_;
  dtype type_; ///< the model's one floating dtype
  uint32_t max_contributors_;
  bool secure_;
  bool in_place_;
  double max_update_norm_;
  double max_update_ratio_;
  double update_norm_floor_;
  double max_norm_growth_;
  double bound_ = 0; ///< update_bound()
  /// The norm max_update_ratio is taken of: ||g||, grown by at most
  /// max_norm_growth per measured model; negative before the first.
  double anchor_norm_ = -1;
  double global_norm_ = 0; ///< ||g|| of the model measure_global saw
  double squares_ = 0;     ///< ||g||^2 so far (measure_position)
  double norm_bound_;
  compression_config compression_;
  uint64_t max_payload_;
  std::vector<float> decoded_;    ///< compressed uploads: a chunk's values
  std::vector<std::byte> scaled_; ///< norm_bound: a chunk scaled back
  /// tensor_rules: the tensors whose values the server keeps, by index.
  std::vector<bool> kept_;
  bool any_kept_ = false;
  /// In place with an update bound: per client, its chunks of this round as
  /// first checked (kept across a reset, forgotten with the round).
  std::map<std::string, std::vector<checked_chunk>> first_pass_;
};

} // namespace fedcaf
