#include "actors/aggregator_core.hpp"

#include <thread>

namespace fedcaf {

aggregator_core::aggregator_core(std::shared_ptr<model_snapshot> initial,
                                 aggregator_options options,
                                 std::unique_ptr<accumulator> acc,
                                 std::unique_ptr<server_optimizer> optimizer)
    : layout_(initial->layout), digest_(digest(initial->layout)),
      options_(std::move(options)), acc_(std::move(acc)),
      optimizer_(std::move(optimizer)), plan_(acc_->plan()),
      models_(std::move(initial)),
      checker_(layout_, plan_, options_.plan, options_.rule_cfg,
               options_.compression),
      ledger_(plan_.chunk_count(), options_.window, rate_window(options_)),
      refusals_("aggregator", options_.refusals) {
  // The published model stays within half of what one client's update
  // may carry (max_abs(1)), so that honest updates near it pass, whatever
  // a server optimizer or a client at the bound made of it.
  acc_->set_value_limit(static_cast<float>(checker_.max_abs(1.0) / 2));
  checker_.measure_global(models_.current().bytes);
  // Each new model is measured chunk by chunk as it is made (publish_round);
  // not a relay's, whose positions are rescaled after they settle, and
  // which adopts and measures its parent's model instead.
  if (!options_.plan.partial_sums)
    acc_->observe_results([this](uint64_t seq, std::span<const std::byte> m) {
      return checker_.position_squares(seq, m);
    });
}

result<checked_chunk>
aggregator_core::fold_measured(const upload_record& s, const msg::chunk_view& c,
                               std::span<const std::byte> g, bool grid) {
  const auto& h = c.header;
  if (options_.fold_delay.count() > 0)
    std::this_thread::sleep_for(options_.fold_delay);
  // Below the positions a reset overwrote: the chunk sent before, read
  // the same way, judged by its first pass's distance (g there is gone).
  auto again =
      checker_.first_pass(s.client_id, c, acc_->overwritten_below(), grid);
  if (!again)
    return again.err();
  auto d = grid ? acc_->fold_grid(h.sequence, c.bytes, s.weight, g)
                : acc_->fold_measured(h.sequence, c.bytes, s.weight, s.summed,
                                      g, checker_.bound_of(s));
  if (!d) // poisoned (named as inspect() names it), else bad input
    return d.err().code != errc::poisoned_update
               ? error{errc::internal, d.err().message}
           : grid ? d.err()
                  : checker_.fold_refusal(s, c, d.err());
  auto judged = checker_.judge(s, c, again->value_or(*d), grid);
  if (!judged && grid)
    acc_->unfold_grid(h.sequence, c.bytes);
  else if (!judged)
    acc_->unfold(h.sequence, c.bytes, s.weight, s.summed, g);
  return judged;
}

} // namespace fedcaf
