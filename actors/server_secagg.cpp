#include "actors/server_secagg.hpp"

#include <random>

#include "actors/errors.hpp"
#include "actors/messages.hpp"

namespace fedcaf {

namespace {

/// How long the SecAgg+ phases wait, from the server's options.
secagg_timeouts secagg_timeouts_of(const server_options& o) {
  return {o.secagg_keys_timeout, o.secagg_phase_timeout};
}

} // namespace

server_secagg::server_secagg(server_core& core,
                             std::function<void(const std::string&)> stop)
    : core_(core), stop_(std::move(stop)),
      flow_(core.options_.secure_aggregation, core.options_.secagg_by_samples,
            core.options_.max_sample_size, std::random_device{}(),
            secagg_timeouts_of(core.options_), core.refusals_, port_of(),
            core.options_.secagg_least_in_sum) {}

void server_secagg::start(uint32_t round, const std::set<std::string>& chosen,
                          const std::vector<std::string>& reached) {
  flow_.start(round, chosen, reached);
  note_phase();
}

caf::result<frame> server_secagg::receive(const std::string& id,
                                          const frame& f) {
  if (auto answer = flow_.receive(id, f)) {
    note_phase();
    return std::move(*answer);
  }
  auto rp = core_.self_->make_response_promise<frame>();
  flow_.hold(id, [rp](frame answer) mutable { rp.deliver(std::move(answer)); });
  note_phase();
  return rp;
}

void server_secagg::expire(uint32_t round, uint32_t phase) {
  flow_.expire(round, phase);
  note_phase();
}

caf::result<secagg::unmask_plan>
server_secagg::unmask(uint32_t round, const std::vector<std::string>& in_sum) {
  auto rp = core_.self_->make_response_promise<secagg::unmask_plan>();
  auto ask = [this](const std::string& id, frame f) {
    return core_.tell(id, secagg_atom::value, std::move(f));
  };
  auto ok = flow_.open_unmask(
      round, in_sum, ask, [rp](result<secagg::unmask_plan> p) mutable {
        p ? rp.deliver(std::move(*p)) : rp.deliver(to_caf(p.err()));
      });
  if (!ok)
    rp.deliver(to_caf(ok.err()));
  note_phase();
  return rp;
}

void server_secagg::lost(const std::string& id) {
  flow_.lost(id);
  note_phase();
}

void server_secagg::unmasked(uint32_t round, bool in_range) {
  flow_.unmasked(round, in_range);
}

void server_secagg::poisoned(const std::string& id, const std::string& why) {
  flow_.blame(id, why, false); // no masked update of its in the sum
}

secagg_port server_secagg::port_of() {
  auto deadline = [this](auto after, uint32_t round, uint32_t phase) {
    core_.self_->delayed_send(core_.self_, after, phase_end_atom::value, round,
                              phase);
  };
  auto send_away = [this](const auto& id, uint32_t round, const auto& why) {
    core_.self_->send(core_.peers_.scheduler, reject_atom::value, id, round,
                      uint64_t{0}, error{errc::not_in_round, why});
  };
  auto culprit = [this](const auto& id, uint32_t, const auto& why,
                        uint32_t times) {
    core_.reporter_.event("excluded", id, why);
    core_.reporter_.note(run_event::excluded, "secure_aggregation", id, why);
    if (times < 2)
      return;
    auto gone = error{errc::not_authorized, "dropped from the run: "
                                            "excluded from two rounds"};
    core_.reporter_.event("dropped", id, gone.message);
    core_.reporter_.note(run_event::dropped, "excluded_twice", id,
                         gone.message);
    if (auto connection = core_.registry_.ban(id))
      core_.self_->send(*connection, reject_atom::value, msg::encode(gone));
    core_.self_->send(core_.peers_.scheduler, drop_atom::value, id);
  };
  return {deadline, send_away, [this](const auto& why) { stop_(why); },
          culprit};
}

void server_secagg::note_phase() {
  core_.reporter_.secagg_phase(to_string(flow_.current()));
}

} // namespace fedcaf
