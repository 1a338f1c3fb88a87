#pragma once
// Federated evaluation on the server, without CAF: the clients' evaluations
// of the model served now and of the one before it (an evaluation sent
// after the upload may arrive once the round is published), one per client
// and model, each weighted as its client's update is (1 under equal
// weights; under sample_size the capped count of its last offer, or of the
// evaluation if less), never by the evaluation's own claim alone; and the
// final pass, in which every connected client evaluates the last model.
// Thread-safety: none; owned by the server actor.

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "fedcaf/error.hpp"
#include "fedcaf/report.hpp"
#include "messages/codec.hpp"

namespace fedcaf {

/// The clients' evaluations of the model of one round (0: the initial).
struct model_evaluations {
  uint32_t round = 0;
  std::set<std::string> by; ///< one evaluation per client
  figures_sum sum;
};

class evaluation_tally {
public:
  /// Claimed sample counts are capped at `max_sample_size` (0: no cap);
  /// `by_samples`: updates are weighted by them (client_weights_mode
  /// sample_size), else equally.
  evaluation_tally(uint64_t max_sample_size, bool by_samples)
      : max_sample_size_(max_sample_size), by_samples_(by_samples) {}

  /// Returns a claimed sample count as a figure's weight: at most
  /// max_sample_size (if set) and 2^40 (so that weighted sums stay finite
  /// and exact).
  uint64_t capped(uint64_t samples) const;

  /// Client `id` offered an update of `samples` claimed samples: returns
  /// the weight the aggregator gives it (1, or capped(samples) under
  /// sample_size; a relay's partial sum: its weight, the clients under it
  /// under equal weights), which its figures and later evaluations weigh at
  /// most.
  uint64_t offered(const std::string& id, uint64_t samples,
                   bool partial_sum = false);

  /// The weight of an evaluation of `claimed` samples by `id`: 1 under
  /// equal weights (a relay's: as under sample_size, its children's
  /// evaluations' weight); under sample_size capped(claimed), and at most
  /// the weight of `id`'s last offer, if it made one.
  uint64_t weight_of(const std::string& id, uint64_t claimed) const;

  /// The model served now goes to `clients` clients: as many evaluations
  /// of it are expected.
  void expect(size_t clients) { expected_ = clients; }
  size_t expected() const { return expected_; }

  /// Round `round`'s model is served now; the one served until now keeps
  /// taking evaluations, the one before it no longer does.
  void serve(uint32_t round);
  /// The evaluations of the model served now.
  const model_evaluations& current() const { return current_; }
  /// The evaluations of round `round`'s model, if it is the one served now
  /// or the one before; else null.
  const model_evaluations* evaluations_of(uint32_t round) const {
    if (current_.round == round)
      return &current_;
    return previous_ && previous_->round == round ? &*previous_ : nullptr;
  }

  /// Adds client `id`'s evaluation `e`. Returns the evaluations of its
  /// model so far. Fails (wrong_round) iff `e` is of neither the model
  /// served now nor the one before, (bad_sequence) iff `id` evaluated that
  /// model already.
  result<const model_evaluations*> add(const std::string& id,
                                       const msg::evaluation& e);

  /// Returns true iff every expected client evaluated `of`'s model.
  bool all_answered(const model_evaluations& of) const {
    return of.by.size() >= expected_;
  }
  /// Returns true iff `of` is the model served now and all answered.
  bool complete(const model_evaluations& of) const {
    return &of == &current_ && all_answered(of);
  }

  /// The run's last model goes to `clients` connected clients to evaluate.
  void begin_final_pass(size_t clients);
  /// Returns true iff the final model is being evaluated.
  bool final_pass() const { return final_pass_; }

  /// Returns the log line of the clients' evaluation of the initial model:
  /// "clients' evaluation of the initial model: <name> <mean>...".
  static std::string initial_line(const model_evaluations& of);
  /// Returns the log line of a final evaluation that ran out of time:
  /// "final evaluation: <answered> of <expected> clients answered ...".
  std::string overdue_line() const;

private:
  uint64_t max_sample_size_;
  bool by_samples_;
  std::map<std::string, uint64_t> offered_; ///< per client: its last weight
  std::set<std::string> relays_; ///< clients that offered partial sums
  model_evaluations current_;    ///< of the model served now
  std::optional<model_evaluations> previous_;
  size_t expected_ = 0; ///< clients the model was sent to
  bool final_pass_ = false;
};

} // namespace fedcaf
