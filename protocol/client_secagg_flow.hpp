#pragma once
// A client's SecAgg+ steps in one round, around its secagg_participant:
//   start: keys out -> (roster in) shares out -> (relayed shares in)
//   receipt out -> (the neighbours excluded in) ready; or, if neighbours
//   said its shares did not open, (disputed in) defence out -> (excluded
//   in) ready
// then the masked update (through mask_in_place); later, the server's
// unmask request answered. The server may answer any step with
// not_in_round: the client then sits the round out. It sends nothing: the
// client actor sends the frames it returns and hands it the answers.
// Thread-safety: none; owned by the client actor.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "messages/codec.hpp"
#include "protocol/secagg_participant.hpp"

namespace fedcaf {

class client_secagg_flow {
public:
  /// What the client does after the server's answer to a step.
  struct step {
    /// Set iff the client sits the round out: the server's reason.
    std::optional<std::string> sit_out;
    /// Else the frame to send next; empty after the shares: the masked
    /// update goes next.
    msg::frame next;
    /// What `next` carries, for a failed request ("secure aggregation
    /// shares").
    const char* what = "";
    /// Lines for the log: warnings about shares not held, then a note.
    std::vector<std::string> warnings;
    std::string note;
  };

  /// Starts round `round` with fresh keys for an update of `sample_count`
  /// samples; returns the keys frame to send. Forgets any earlier round.
  msg::frame start(uint32_t round, uint64_t sample_count);

  /// Takes the server's answer to the last frame sent: the roster after
  /// the keys (on_roster), the relayed shares after the shares
  /// (on_relayed). Returns the next step, or an error iff that step fails
  /// or no answer is awaited.
  result<step> on_reply(const msg::frame& reply);

  /// Masks a chunk's float32 values in place (secagg_participant::
  /// mask_in_place) and returns the values clipped; leaves them as they are
  /// iff no round has started. REQUIRES: `values` 4-byte aligned; masks
  /// that unmask need on_relayed to have succeeded.
  uint64_t mask_in_place(uint64_t first_element,
                         std::span<std::byte> values) const;

  /// Answers the server's unmask request `ask`. Returns the frame to send,
  /// or an error (its message for the log) iff there is no round to unmask,
  /// `ask` is malformed, or the participant refuses to reveal.
  result<msg::frame> answer_unmask(const msg::frame& ask);

private:
  /// Takes the answer to the keys: the roster. Returns the sealed shares to
  /// send, or an error iff the answer is another error, malformed, or
  /// unusable (secagg_participant::seal_shares).
  result<step> on_roster(const msg::frame& reply);

  /// Takes the answer to the shares: the shares relayed to this client.
  /// Returns the receipt to send (whose shares did not open), or an error
  /// iff the answer is another error, malformed, or a share is not from a
  /// neighbour.
  result<step> on_relayed(const msg::frame& reply);

  /// Takes the answer to the receipt: the neighbours not to mask against.
  /// Returns a step with no frame (the masked update goes next), or one
  /// that sits out iff the answer is unusable (secagg_participant::settle).
  /// An answer that names neighbours disputing this client's shares gets
  /// the defence (secagg_participant::defend) sent, and its answer taken
  /// here again.
  result<step> on_settled(const msg::frame& reply);

  /// Set iff `reply` refuses with not_in_round: the step that sits out.
  static std::optional<step> sits_out(const msg::frame& reply);

  /// Fault injection for tests of the server's defences (the environment
  /// variable FEDCAF_FAULT, read at start): this client lies.
  enum class lie {
    none,
    garbage_shares,
    zero_upload,
    random_upload,
    wrong_reveal,
    false_receipt
  };

  enum class awaiting { nothing, roster, relayed, settled };
  lie lie_ = lie::none;
  uint32_t round_ = 0;
  awaiting awaiting_ = awaiting::nothing;
  std::optional<secagg_participant> participant_;
};

} // namespace fedcaf
