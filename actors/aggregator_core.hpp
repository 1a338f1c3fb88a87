#pragma once
// What the parts of the aggregator actor share: its handle, options, the
// accumulator and server optimizer, the published models, the checks a
// chunk passes and the ledger of the round's uploads, with the few helpers
// they all use. Private to the aggregator's implementation
// (actors/aggregator.cpp and its parts, aggregator_relay and
// aggregator_rounds); other actors see actors/aggregator.hpp only.
// Thread-safety: none; the aggregator actor's.

#include <chrono>
#include <map>
#include <memory>
#include <span>
#include <string>

#include <caf/all.hpp>

#include "actors/aggregator_options.hpp"
#include "actors/interfaces.hpp"
#include "fedcaf/accumulator.hpp"
#include "protocol/chunk_checker.hpp"
#include "protocol/model_versions.hpp"
#include "protocol/upload_ledger.hpp"

namespace fedcaf {

struct aggregator_core {
  using promise = caf::typed_response_promise<frame>;

  /// The aggregator of models laid out as `initial`, whose version it
  /// continues, summing in `acc` and stepping with `optimizer` (null:
  /// FedAvg).
  aggregator_core(std::shared_ptr<model_snapshot> initial,
                  aggregator_options options, std::unique_ptr<accumulator> acc,
                  std::unique_ptr<server_optimizer> optimizer);

  /// The window the minimum rate is measured over; zero: no minimum.
  static std::chrono::milliseconds rate_window(const aggregator_options& o) {
    return o.min_rate_bytes_per_s > 0 ? o.rate_window
                                      : std::chrono::milliseconds{};
  }

  /// The actor's clock: virtual time under CAF's test coordinator.
  upload_record::time_point now() const { return self_->clock().now(); }
  /// The global model's bytes, as the round's updates are checked against.
  std::span<const std::byte> model() const {
    return models_.current().bytes.bytes();
  }
  bool secure() const { return options_.plan.secure; }
  /// A relay whose sum streams up as its positions settle.
  bool streams_sums() const { return options_.plan.streams_sums(); }
  /// Forgets the round's streams and who listens to them.
  void forget_streams() {
    ledger_.forget();
    listeners_.clear();
  }
  /// Folds chunk `c` of stream `s` as it came against the global model
  /// `g` (empty: none held, a window-mode relay's round given up),
  /// measuring its distance in the same pass (a relay's int32 sums on the
  /// grid, `grid`: added as they are), and judges it: a chunk the
  /// distance refuses is taken back out of the sum, exactly. REQUIRES:
  /// admissible, `grid` (then s.grid) or measured_in_fold.
  result<checked_chunk> fold_measured(const upload_record& s,
                                      const msg::chunk_view& c,
                                      std::span<const std::byte> g, bool grid);
  frame refuse(const error& e) const { return refusals_.refuse(e); }
  frame refuse_from(const std::string& sender, const error& e) const {
    return refusals_.refuse(e, sender);
  }

  aggregator_actor::pointer self_ = nullptr;
  manifest layout_;
  uint64_t digest_;
  aggregator_options options_;
  std::unique_ptr<accumulator> acc_;            ///< the kind the plan names
  std::unique_ptr<server_optimizer> optimizer_; ///< null: FedAvg
  const chunk_plan& plan_;                      ///< the accumulator's
  model_versions models_; ///< the last published and the one before
  chunk_checker checker_;
  upload_ledger ledger_;
  /// Per stream: who is told how it ended (its scheduler).
  std::map<uint64_t, upload_listener> listeners_;
  aggregator_host server_; ///< asked for SecAgg+'s plan, told what settled
  refusal_log refusals_;
  /// A relay's: its parent folds this round's sum as int32 on the grid
  /// (relay_model::grid_sums).
  bool relay_grid_ = false;
};

} // namespace fedcaf
