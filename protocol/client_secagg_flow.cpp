#include "protocol/client_secagg_flow.hpp"

namespace fedcaf {

msg::frame client_secagg_flow::start(uint32_t round, uint64_t sample_count) {
  round_ = round;
  awaiting_ = awaiting::roster;
  participant_.emplace(round, sample_count);
  return msg::encode(participant_->keys());
}

std::optional<client_secagg_flow::step>
client_secagg_flow::sits_out(const msg::frame& reply) {
  auto refused = msg::error_in(reply);
  if (!refused || refused->code != errc::not_in_round)
    return std::nullopt;
  step s;
  s.sit_out = refused->message;
  return s;
}

result<client_secagg_flow::step>
client_secagg_flow::on_reply(const msg::frame& reply) {
  switch (awaiting_) {
  case awaiting::roster:
    return on_roster(reply);
  case awaiting::relayed:
    return on_relayed(reply);
  default:
    return error{errc::unexpected_message,
                 "a secure aggregation answer nobody asked for"};
  }
}

result<client_secagg_flow::step>
client_secagg_flow::on_roster(const msg::frame& reply) {
  if (auto out = sits_out(reply)) {
    awaiting_ = awaiting::nothing;
    return std::move(*out);
  }
  auto roster = msg::decode<msg::secagg_roster>(reply);
  if (!roster)
    return roster.err();
  auto shares = participant_->seal_shares(*roster);
  if (!shares)
    return shares.err();
  step s;
  s.next = msg::encode(*shares);
  s.what = "secure aggregation shares";
  awaiting_ = awaiting::relayed;
  return s;
}

result<client_secagg_flow::step>
client_secagg_flow::on_relayed(const msg::frame& reply) {
  if (auto out = sits_out(reply)) {
    awaiting_ = awaiting::nothing;
    return std::move(*out);
  }
  auto relayed = msg::decode<msg::secagg_shares>(reply);
  if (!relayed)
    return relayed.err();
  if (auto ok = participant_->receive_shares(*relayed); !ok)
    return ok.err();
  awaiting_ = awaiting::nothing;
  auto round = "round " + std::to_string(round_);
  step s;
  for (const auto& bad : participant_->unopened())
    s.warnings.push_back(round + ": the secure aggregation share from " + bad +
                         " is not held; that client may not be " + "unmasked");
  s.note = round + ": secure aggregation keys and shares exchanged with " +
           std::to_string(relayed->shares.size()) +
           " neighbours; sending the masked update";
  return s;
}

uint64_t client_secagg_flow::mask_in_place(uint64_t first_element,
                                           std::span<std::byte> values) const {
  if (!participant_)
    return 0;
  return participant_->mask_in_place(first_element, values);
}

result<msg::frame> client_secagg_flow::answer_unmask(const msg::frame& ask) {
  auto asked = msg::decode<msg::secagg_unmask>(ask);
  if (!asked || !participant_)
    return error{errc::unexpected_message,
                 "an unmask request it cannot answer"};
  auto reveal = participant_->reveal(*asked);
  if (!reveal) // never both secrets of one client
    return error{reveal.err().code,
                 "refused to reveal: " + reveal.err().message};
  return msg::encode(*reveal);
}

} // namespace fedcaf
