#include "actors/aggregator_rounds.hpp"

#include "actors/errors.hpp"
#include "actors/messages.hpp"
#include "fedcaf/log.hpp"
#include "fedcaf/stopwatch.hpp"
#include "protocol/relay_checks.hpp"

namespace fedcaf {

namespace {

/// `next`, its error logged.
result<snapshot_ptr> logged(result<snapshot_ptr> next) {
  if (!next)
    log_line(log_level::error, "aggregator", to_string(next.err()));
  return next;
}

} // namespace

aggregator_rounds::aggregator_rounds(aggregator_core& core,
                                     std::function<void()> forget,
                                     std::function<bool()> held_in_part)
    : core_(core), forget_(std::move(forget)),
      held_in_part_(std::move(held_in_part)) {}

caf::result<snapshot_ptr> aggregator_rounds::finalize(uint32_t round,
                                                      double sum_weight) {
  if (!core_.secure()) {
    auto next = logged(publish_round(round, sum_weight));
    if (!next)
      return to_caf(next.err());
    return *next;
  }
  auto rp = core_.self_->make_response_promise<snapshot_ptr>();
  auto deliver = [rp](result<snapshot_ptr> next) mutable {
    if (!next)
      rp.deliver(to_caf(next.err()));
    else
      rp.deliver(*next);
  };
  core_.self_
      ->request(core_.server_, caf::infinite, unmask_atom::value, round,
                core_.ledger_.in_sum())
      .then(
          [this, deliver, round,
           sum_weight](secagg::unmask_plan& plan) mutable {
            auto ok = unmask(plan);
            // In range or not, for the trace of an upload out of range
            // (other failures say nothing about the uploads).
            if (ok || ok.err().code == errc::poisoned_update)
              core_.self_->send(core_.server_, unmasked_atom::value, round,
                                static_cast<bool>(ok));
            deliver(ok ? logged(publish_round(round, sum_weight))
                       : skip(round, ok.err().message));
          },
          [this, deliver, round](caf::error& e) mutable {
            deliver(skip(round, caf::to_string(e)));
          });
  return rp;
}

std::string aggregator_rounds::checkpoint(checkpoint_state state) {
  const auto& model = core_.models_.current();
  const auto& optimizer = core_.optimizer_;
  state.model_version = core_.models_.version();
  state.optimizer_steps = optimizer ? optimizer->steps() : 0;
  std::vector<std::pair<std::string, const byte_buffer*>> moments;
  if (optimizer)
    for (const auto& [name, buffer] : optimizer->moments())
      moments.emplace_back(name, buffer);
  auto started = steady_clock::now();
  auto ok = write_checkpoint(
      core_.options_.checkpoint, state,
      {&model.layout, &model.bytes, model.bytes.mapped_file()}, moments);
  if (!ok)
    return ok.err().message;
  log_line(log_level::debug, "aggregator",
           "checkpoint of round " + std::to_string(state.round) + " in " +
               std::to_string(seconds_since(started)) + " s");
  return {};
}

result<snapshot_ptr> aggregator_rounds::publish_round(uint32_t round,
                                                      double sum_weight) {
  if (auto open = core_.ledger_.open_count(); open > 0)
    return error{errc::internal,
                 std::to_string(open) + " streams still open at finalize"};
  auto* optimizer = core_.optimizer_.get();
  if (optimizer) // FedBuff: the updates in this step, cut-off ones too
    optimizer->set_updates(core_.ledger_.updates());
  // A relay's sum goes up as int32 on its parent's grid where it can.
  core_.acc_->grid_sums_of(core_.relay_grid_ ? sum_weight : 0);
  auto bytes = core_.acc_->finalize(core_.models_.current().bytes, optimizer);
  if (!bytes)
    return bytes.err();
  // The new model was measured (its norm, for the next round's update
  // bound) chunk by chunk as it was made, where every chunk was (not a
  // secure round's ring sums) and nothing rescales it after (a relay's).
  auto squares = core_.acc_->take_measured();
  bool measured = squares.size() == core_.plan_.chunk_count();
  if (measured) { // in the order measure_global adds them: the same bits
    auto& checker = core_.checker_;
    checker.measure_begin();
    for (double s : squares)
      checker.add_squares(s);
  }
  return publish(round, std::move(*bytes), sum_weight, {}, measured,
                 core_.acc_->sums_on_grid());
}

snapshot_ptr aggregator_rounds::publish(uint32_t round, byte_buffer bytes,
                                        double sum_weight, std::string failure,
                                        bool measured, bool grid) {
  model_snapshot next;
  next.failure = std::move(failure);
  next.trimmed_values = core_.ledger_.by_client(core_.acc_->take_trimmed());
  bool held_in_part = held_in_part_(); // its sums went up, given back
  forget_();
  core_.checker_.forget_round();
  next.bytes = std::move(bytes);
  next.grid_sums = grid; // every position of sum_weight: nothing to scale
  auto weights = core_.acc_->take_position_weights();
  if (sum_weight > 0 && !core_.streams_sums() && !grid) // streamed: scaled
    relay_checks::scale_sum(core_.plan_, next.bytes, weights, sum_weight);
  auto published = core_.models_.publish(round, std::move(next));
  // A relay's next round adopts (and measures) its parent's model; a
  // streamed sum, part int32 on the grid, is no model to measure.
  if (held_in_part || grid || core_.streams_sums())
    return published;
  if (measured)
    core_.checker_.measure_end();
  else
    core_.checker_.measure_global(published->bytes);
  return published;
}

result<void> aggregator_rounds::unmask(const secagg::unmask_plan& plan) {
  auto started = core_.now();
  secagg::quantizer q{core_.options_.secagg_clipping_range,
                      core_.options_.secagg_quantization_bits};
  if (auto ok = core_.acc_->unmask(q, plan, core_.models_.current().bytes,
                                   core_.optimizer_.get());
      !ok)
    return ok;
  std::chrono::duration<double> took = core_.now() - started;
  log_line(log_level::debug, "aggregator",
           "unmasked " + std::to_string(plan.contributors) + " updates (" +
               std::to_string(plan.self_seeds.size() + plan.pairwise.size()) +
               " masks) in " + std::to_string(took.count()) + " s");
  return {};
}

result<snapshot_ptr> aggregator_rounds::skip(uint32_t round,
                                             const std::string& why) {
  auto bytes = core_.acc_->keep(core_.models_.current().bytes);
  if (!bytes) {
    error e{errc::internal, "round " + std::to_string(round) + ": " + why +
                                "; " + bytes.err().message};
    log_line(log_level::error, "aggregator", e.message);
    return e;
  }
  log_line(log_level::error, "aggregator",
           "round " + std::to_string(round) + ": secure aggregation failed: " +
               why + "; the global model stays as it was");
  return publish(round, std::move(*bytes), 0,
                 "secure aggregation failed: " + why);
}

} // namespace fedcaf
