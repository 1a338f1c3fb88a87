#include "actors/server_publication.hpp"

#include "actors/messages.hpp"
#include "fedcaf/checkpoint.hpp"
#include "fedcaf/log.hpp"
#include "fedcaf/stopwatch.hpp"

namespace fedcaf {

namespace {

/// What the reporter needs of a published round (its model aside).
round_outcome
outcome_of(round_result& done,
           std::vector<std::pair<std::string, std::string>> excluded) {
  return {done.round,
          done.clients,
          done.loss,
          done.dp_sgd_epsilon,
          std::move(done.missing),
          std::move(done.contributors),
          std::move(done.staleness),
          std::move(excluded),
          std::move(done.relay_weights)};
}

} // namespace

server_publication::server_publication(server_core& core, ender stop, ender end)
    : core_(core), stop_(std::move(stop)), end_(std::move(end)) {}

caf::typed_response_promise<bool> server_publication::finish(
    round_result done,
    std::vector<std::pair<std::string, std::string>> excluded) {
  auto rp = core_.self_->make_response_promise<bool>();
  auto model = done.model;
  auto record = core_.reporter_.open_record(
      outcome_of(done, std::move(excluded)), *model);
  // The previous round's evaluations are as complete as they will be.
  core_.reporter_.print_held(core_.stamp());
  core_.tally_.serve(done.round);
  auto started = core_.round_started_;
  if (core_.options_.async) { // the next version's figures start now
    core_.round_started_ = core_.now();
    core_.reporter_.start_traffic();
  }
  evaluate(std::move(record), started, rp, std::move(model));
  return rp;
}

frame server_publication::evaluated(const std::string& id,
                                    const msg::evaluation& e) {
  auto of = core_.tally_.add(id, e);
  if (!of)
    return core_.refuse(of.err());
  core_.reporter_.evaluated(id, e.round, e.sample_count);
  if (core_.reporter_.note_evaluations(**of, core_.tally_.all_answered(**of),
                                       core_.tally_.complete(**of),
                                       core_.stamp()) &&
      core_.tally_.final_pass())
    end_("");
  return msg::encode(msg::evaluation{e.round, e.sample_count, {}});
}

void server_publication::overdue() {
  if (!core_.tally_.final_pass() || core_.stopping_)
    return;
  log_line("server", core_.tally_.overdue_line());
  end_("");
}

void server_publication::begin_final_pass() {
  const auto& f = core_.rounds_.evaluate_only(core_.tally_.current().round + 1);
  core_.tally_.begin_final_pass(core_.registry_.connected_count());
  core_.reporter_.final_evaluation_started();
  core_.registry_.for_each_connected([this, &f](const auto&, const auto& c) {
    core_.self_->send(c.handle, round_atom::value, f);
  });
  log_line("server", "asking " + std::to_string(core_.tally_.expected()) +
                         " clients to evaluate the final model");
  // A relay's side answers its parent before the parent's own limit (by
  // default the same): three quarters of it, so that one silent child
  // cannot cost its siblings' figures.
  auto limit = core_.options_.evaluation_timeout;
  if (core_.options_.relay)
    limit = limit * 3 / 4;
  core_.self_->delayed_send(core_.self_, limit, evaluated_atom::value);
}

void server_publication::evaluate(round_record record,
                                  server_core::time_point started,
                                  caf::typed_response_promise<bool> rp,
                                  snapshot_ptr model) {
  auto done = [this, rp, record, started](const evaluation_result& e) mutable {
    if (e.evaluated) {
      record.test_accuracy = e.accuracy;
      record.test_loss = e.loss;
      core_.rounds_.set_previous({record.round, e.accuracy, e.loss, true});
    }
    auto round = record.round;
    core_.reporter_.finish_round(std::move(record), core_.seconds_from(started),
                                 unix_seconds(), core_.stamp());
    if (!e.save_failure.empty()) {
      stop_(e.save_failure);
      rp.deliver(false);
    } else {
      checkpoint_then(round, rp);
    }
  };
  core_.self_
      ->request(core_.peers_.evaluator, caf::infinite, eval_atom::value,
                std::move(model))
      .then(done, [done](caf::error&) mutable { done(evaluation_result{}); });
}

void server_publication::checkpoint_then(uint32_t round,
                                         caf::typed_response_promise<bool> rp) {
  const auto& o = core_.options_;
  const auto& c = o.checkpoint;
  if (c.dir.empty() || o.async ||
      (round % c.every_rounds != 0 && round != o.num_rounds)) {
    rp.deliver(true);
    return;
  }
  checkpoint_state state;
  state.round = round;
  state.config_yaml = o.config_yaml;
  state.config_digest = config_digest(o.config_yaml);
  state.resumed_from = o.resumed_from;
  state.report_rounds =
      core_.report_ ? rounds_json(core_.report_->rounds) : "[]";
  core_.self_
      ->request(core_.peers_.aggregator, caf::infinite, checkpoint_atom::value,
                std::move(state))
      .then(
          [this, rp, round](const std::string& failure) mutable {
            if (failure.empty())
              rp.deliver(true);
            else
              checkpoint_failed(round, failure, rp);
          },
          [this, rp, round](caf::error& e) mutable {
            checkpoint_failed(round, core_.self_->system().render(e), rp);
          });
}

void server_publication::checkpoint_failed(
    uint32_t round, const std::string& why,
    caf::typed_response_promise<bool> rp) {
  auto line = "the checkpoint of round " + std::to_string(round) +
              " could not be written: " + why + " (the last good one stays)";
  core_.reporter_.event("checkpoint_failed", "", line);
  if (core_.options_.checkpoint.on_error == checkpoint_failure::go_on) {
    log_line(log_level::error, "server", line + "; the run goes on");
    rp.deliver(true);
    return;
  }
  stop_(line);
  rp.deliver(false);
}

} // namespace fedcaf
