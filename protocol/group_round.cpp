#include "protocol/group_round.hpp"

namespace fedcaf {

group_round::sit_out_step group_round::sit_out(bool announced,
                                               round_roster& roster) {
  sit_out_step step;
  step.first = !sitting_out_;
  if (announced && step.first) {
    // Whoever has not offered yet leaves now (and is refused if it does):
    // the round is lost already, only uploads under way are awaited.
    roster.leave_unoffered();
    sitting_out_ = true;
    step.cut = true;
  }
  step.waits = announced && roster.awaiting_updates();
  return step;
}

std::string group_round::waits_note(const std::string& why) {
  return why + "; the relay sits its parent's round out once the updates "
               "under way have closed";
}

std::string group_round::sits_out_note(const std::string& why,
                                       const sit_out_step& step,
                                       uint32_t round) {
  return (step.first ? why
                     : "round " + std::to_string(round) +
                           ": the updates under way have closed") +
         "; the relay sits its parent's round out (its group offers "
         "nothing) and takes the next";
}

std::optional<relay_step> group_round::settle(uint64_t bytes, double weight,
                                              const round_roster& roster,
                                              uint32_t min_clients) {
  if (sitting_out_ || weight <= 0)
    return std::nullopt;
  if (!streaming_) {
    auto clients = static_cast<uint32_t>(roster.participants().size()) + kept_;
    if (clients < min_clients)
      return std::nullopt; // the round is sat out (check_round)
    streaming_ = true;
    stream_clients_ = clients;
    stream_loss_ = roster.mean_offered_loss();
  }
  return relay_step{weight, stream_loss_, stream_clients_, bytes};
}

} // namespace fedcaf
