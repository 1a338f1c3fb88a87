#pragma once
// How the server finishes each round the scheduler publishes (its record,
// the evaluator's test of the model, the report, a checkpoint where one is
// due, then whether the run goes on) and the run's federated evaluation
// (the clients' figures of each model, the final model's pass).
// Thread-safety: none; part of the server actor (actors/server_core.hpp).

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <caf/all.hpp>

#include "actors/server_core.hpp"

namespace fedcaf {

class server_publication {
public:
  /// Ends the run with its reason ("": done).
  using ender = std::function<void(const std::string&)>;

  /// `stop` ends the run (a successful one with federated evaluation asks
  /// for the final pass first: begin_final_pass); `end` ends it at once.
  server_publication(server_core& core, ender stop, ender end);

  /// Round `done` is published (its model installed, or a relay's sum
  /// answered); `excluded`: the clients its SecAgg+ left out, with why.
  /// Returns the promise answered once the model is tested, reported and
  /// (where due) checkpointed: true iff the run goes on.
  caf::typed_response_promise<bool>
  finish(round_result done,
         std::vector<std::pair<std::string, std::string>> excluded);

  /// Client `id`'s evaluation `e` of the model served now or of the one
  /// before: folded into that round's client_metrics, once per client.
  frame evaluated(const std::string& id, const msg::evaluation& e);
  /// The final model's evaluation took too long: the run ends with what
  /// came.
  void overdue();
  /// Asks every connected client to evaluate the final model, for at most
  /// evaluation_timeout.
  void begin_final_pass();

private:
  /// Has the evaluator test the model of `record`'s round, then finishes
  /// the round (started at `started`) and answers `rp`.
  void evaluate(round_record record, server_core::time_point started,
                caf::typed_response_promise<bool> rp, snapshot_ptr model);
  /// Writes round `round`'s checkpoint where one is due (the aggregator
  /// writes the model and its optimizer's state), then answers `rp`: go
  /// on, or not where the checkpoint failed and on_error is stop.
  void checkpoint_then(uint32_t round, caf::typed_response_promise<bool> rp);
  void checkpoint_failed(uint32_t round, const std::string& why,
                         caf::typed_response_promise<bool> rp);

  server_core& core_;
  ender stop_;
  ender end_;
};

} // namespace fedcaf
