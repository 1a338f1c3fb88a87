#pragma once
// The clients of a simulation that exist as ids until they are drawn for a
// round, without CAF: `fedcaf simulate` with clients_per_round below
// num_clients (flat, or a simulated relay's block), or `fedcaf relay`
// whose children are all simulated. Member i (from 0) is
// <prefix><first + i + 1> (prefix "Client"; a relay's children: "<relay
// id>-Client"), trained on partition first + i, as a client spawned at the
// start would be; nothing else of it is kept. The scheduler
// draws a round's clients from the ids; the server has the drawn ones that
// are not registered spawned (summoned), and sends those registered and not
// drawn away (retired) as the next round opens. See docs/design.md,
// "A population of simulated clients".
// Thread-safety: immutable; shared by the scheduler and the server.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace fedcaf {

class population {
public:
  /// Clients <prefix><first + 1> .. <prefix><first + count>.
  /// REQUIRES: first + count < 2^32.
  population(uint32_t first, uint32_t count, std::string prefix = "Client");

  /// The members.
  uint32_t size() const { return count_; }
  /// The first member's partition (its index in the whole run).
  uint32_t first() const { return first_; }
  /// Member `i`'s id. REQUIRES: i < size().
  std::string id_of(uint32_t i) const;
  /// Returns i iff `id` is member i's id (the prefix and a decimal number
  /// without leading zeros), else nullopt.
  std::optional<uint32_t> index_of(const std::string& id) const;
  /// Every member, in the order of their ids as strings (as a
  /// std::set<std::string> of them orders them: Client1, Client10, ...),
  /// so that a draw over it draws what a draw over the same clients,
  /// registered, would. 4 bytes a member.
  const std::vector<uint32_t>& in_id_order() const { return order_; }

private:
  std::string prefix_;
  uint32_t first_;
  uint32_t count_;
  std::vector<uint32_t> order_;
};

} // namespace fedcaf
