#include "protocol/client_secagg_flow.hpp"

#include <cstdlib>
#include <cstring>

namespace fedcaf {

msg::frame client_secagg_flow::start(uint32_t round, uint64_t sample_count) {
  round_ = round;
  awaiting_ = awaiting::roster;
  const char* fault = std::getenv("FEDCAF_FAULT");
  auto is = [fault](const char* name) {
    return fault && std::strcmp(fault, name) == 0;
  };
  lie_ = is("secagg_garbage_shares")  ? lie::garbage_shares
         : is("secagg_zero_upload")   ? lie::zero_upload
         : is("secagg_random_upload") ? lie::random_upload
         : is("secagg_wrong_reveal")  ? lie::wrong_reveal
         : is("secagg_false_receipt") ? lie::false_receipt
                                      : lie::none;
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
  case awaiting::settled:
    return on_settled(reply);
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
  if (lie_ == lie::garbage_shares)
    for (auto& sh : shares->shares)
      for (auto& b : sh.sealed)
        b ^= 0x5a;
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
  auto receipt = participant_->receive_shares(*relayed);
  if (!receipt)
    return receipt.err();
  awaiting_ = awaiting::settled;
  if (lie_ == lie::false_receipt) // says two shares that opened did not
    for (size_t i = 0; i < relayed->shares.size() && i < 2; ++i)
      receipt->unopened.push_back(relayed->shares[i].peer);
  auto round = "round " + std::to_string(round_);
  step s;
  for (const auto& bad : participant_->unopened())
    s.warnings.push_back(round + ": the secure aggregation share from " + bad +
                         " did not open; the server is told");
  s.next = msg::encode(*receipt);
  s.what = "secure aggregation receipt";
  return s;
}

result<client_secagg_flow::step>
client_secagg_flow::on_settled(const msg::frame& reply) {
  awaiting_ = awaiting::nothing;
  if (auto out = sits_out(reply))
    return std::move(*out);
  auto answer = msg::decode<msg::secagg_receipt>(reply);
  if (!answer)
    return answer.err();
  step s;
  auto round = "round " + std::to_string(round_);
  if (!answer->disputed.empty()) { // its shares are disputed: prove them
    auto defence = participant_->defend(*answer);
    if (!defence) {
      s.sit_out = "secure aggregation: " + defence.err().message;
      return s;
    }
    awaiting_ = awaiting::settled;
    s.next = msg::encode(*defence);
    s.what = "secure aggregation defence";
    s.note = round + ": " + std::to_string(answer->disputed.size()) +
             " neighbours said its secure aggregation share did not open; "
             "revealing those shares' keys to the server";
    return s;
  }
  if (auto ok = participant_->settle(*answer); !ok) {
    s.sit_out = "secure aggregation: " + ok.err().message;
    return s;
  }
  s.note = round + ": secure aggregation keys and shares exchanged with " +
           std::to_string(participant_->masked_against()) +
           " neighbours; sending the masked update";
  return s;
}

uint64_t client_secagg_flow::mask_in_place(uint64_t first_element,
                                           std::span<std::byte> values) const {
  if (!participant_)
    return 0;
  auto clipped = participant_->mask_in_place(first_element, values);
  if (lie_ == lie::zero_upload)
    std::memset(values.data(), 0, values.size());
  if (lie_ == lie::random_upload) // uniform, as a masked update looks
    for (size_t i = 0; i < values.size(); ++i)
      values[i] =
          static_cast<std::byte>((first_element * 4 + i) * 2654435761u >> 13);
  return clipped;
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
  if (lie_ == lie::wrong_reveal)
    for (auto* list : {&reveal->self_seed_shares, &reveal->mask_key_shares})
      for (auto& sh : *list)
        sh.y[7] ^= 0x40;
  return msg::encode(*reveal);
}

} // namespace fedcaf
