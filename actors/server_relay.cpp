#include "actors/server_relay.hpp"

#include <algorithm>

#include "actors/errors.hpp"
#include "actors/messages.hpp"
#include "actors/wake_up.hpp"

namespace fedcaf {

namespace {

/// The children's figures as the relay's evaluation: their weighted means,
/// accuracy and loss first, at most as many names as one Evaluation may
/// carry (a child that reports many names crowds none of these out).
relay_evaluation evaluation_of(const figures_sum& sum) {
  auto m = sum.mean();
  std::stable_partition(m.means.begin(), m.means.end(), [](const auto& f) {
    return f.first == "accuracy" || f.first == "loss";
  });
  if (m.means.size() > msg::max_named_values)
    m.means.resize(msg::max_named_values);
  return relay_evaluation{m.samples, std::move(m.means)};
}

} // namespace

server_relay::server_relay(server_core& core, server_calls calls)
    : core_(core), calls_(std::move(calls)),
      flow_(core.options_.fetch_silence, port_of(),
            core.options_.deadline_from_open) {}

caf::result<relay_result> server_relay::take(relay_model m) {
  auto* self = core_.self_;
  // The sender hears the round's sum settle as it streams up (asked
  // before the promise takes the request over).
  auto courier = caf::actor_cast<relay_courier_actor>(self->current_sender());
  auto rp = self->make_response_promise<relay_result>();
  // Each answer carries the children's evaluation of the round's model
  // (sent before their updates, so in by then).
  parent_request parent{[this, rp](result<relay_result> r) mutable {
                          if (!r) {
                            rp.deliver(to_caf(r.err()));
                            return;
                          }
                          r->evaluation = children_evaluation();
                          rp.deliver(std::move(*r));
                        },
                        [this, courier](relay_step step) {
                          step.evaluation = children_evaluation();
                          caf::anon_send(courier, settled_atom::value, step);
                        }};
  flow_.take(std::move(m), std::move(parent), core_.now());
  return rp;
}

caf::result<relay_result> server_relay::evaluate_final(relay_model m) {
  auto rp = core_.self_->make_response_promise<relay_result>();
  // Asked by the parent, whatever the relay's own federated_evaluation.
  if (final_ || core_.stopping_ || core_.tally_.final_pass() ||
      core_.registry_.connected_count() == 0) {
    rp.deliver(relay_result{}); // nobody to ask: no figures
    return rp;
  }
  final_ = rp;
  core_.self_
      ->request(core_.peers_.aggregator, caf::infinite, adopt_atom::value,
                std::move(m))
      .then(
          [this](snapshot_ptr& model) {
            core_.exchange_.install(std::move(model));
            calls_.final_pass();
          },
          [this](caf::error&) { final_evaluated(); });
  return rp;
}

void server_relay::final_evaluated() {
  if (!final_)
    return;
  relay_result r;
  // The final pass's evaluations: of the model served now.
  if (const auto& of = core_.tally_.current(); !of.sum.empty())
    r.evaluation = evaluation_of(of.sum);
  std::exchange(final_, std::nullopt)->deliver(std::move(r));
}

caf::result<uint32_t> server_relay::sit_out(uint32_t round) {
  auto rp = core_.self_->make_response_promise<uint32_t>();
  flow_.sit_out(
      round,
      [rp](result<uint32_t> next) mutable {
        next ? rp.deliver(*next) : rp.deliver(to_caf(next.err()));
      },
      core_.now());
  return rp;
}

caf::result<frame> server_relay::fetch(const std::string& id,
                                       const msg::fetch& req,
                                       uint64_t position) {
  auto rp = core_.self_->make_response_promise<frame>();
  flow_.fetch(id, req, core_.exchange_.chunk_range(position), core_.now(),
              [rp](frame out) mutable { rp.deliver(std::move(out)); });
  return rp;
}

std::optional<relay_evaluation> server_relay::children_evaluation() const {
  // Round r's children evaluated the model it handed down, as r - 1's.
  auto round = core_.rounds_.round();
  const auto* of = round > 1 ? core_.tally_.evaluations_of(round - 1) : nullptr;
  if (!of || of->sum.empty())
    return std::nullopt;
  return evaluation_of(of->sum);
}

relay_port server_relay::port_of() {
  relay_port p;
  auto* self = core_.self_;
  p.adopt = [this](relay_model m) { adopt(std::move(m)); };
  p.open_round = calls_.open_round;
  p.sit_out = [this](uint32_t round) {
    core_.self_->send(core_.peers_.scheduler, sit_out_atom::value, round);
  };
  p.sat_out = [this](uint32_t round, bool was_open) {
    if (was_open)
      calls_.close_round(round);
    core_.reporter_.sat_out(round);
  };
  p.serve = calls_.serve;
  p.refuse = [this](const error& e) { return core_.refuse(e); };
  p.arrived = [this](uint64_t upto) {
    core_.self_->send(core_.peers_.aggregator, arrived_atom::value, upto);
  };
  p.pace_after = [this](std::chrono::milliseconds after) {
    core_.self_->delayed_send(core_.self_, after, pace_atom::value);
  };
  p.resident = wake_up<server_actor, uint64_t>(self, resident_atom::value);
  return p;
}

void server_relay::adopt(relay_model m) {
  core_.self_
      ->request(core_.peers_.aggregator, caf::infinite, adopt_atom::value,
                std::move(m))
      .then(
          [this](snapshot_ptr& model) {
            core_.exchange_.install(model);
            flow_.adopted(std::move(model), core_.now());
          },
          [this](caf::error& e) {
            calls_.stop("the parent's model could not be taken: " +
                        core_.self_->system().render(e));
          });
}

} // namespace fedcaf
