#include "actors/aggregator_relay.hpp"

#include <cassert>
#include <unistd.h>

#include "actors/messages.hpp"
#include "actors/wake_up.hpp"
#include "fedcaf/dummy_trainer.hpp" // anonymous_file_buffer

namespace fedcaf {

aggregator_relay::aggregator_relay(aggregator_core& core, consumer consume,
                                   std::function<void()> advance)
    : core_(core), consume_(std::move(consume)), advance_(std::move(advance)),
      checks_(core.plan_, core.streams_sums()) {}

// -- the parent's model ---------------------------------------------------------

result<snapshot_ptr> aggregator_relay::adopt(relay_model m) {
  forget_globals();        // of the model before
  core_.acc_->new_model(); // a round sat out never finalized
  core_.relay_grid_ = m.grid_sums;
  // Streamed (window and disk modes): on the grid position by position.
  positions_ = m.grid_sums && core_.acc_->takes_grid() ? m.positions : nullptr;
  core_.acc_->emit_grid(positions_ != nullptr);
  bool arriving = m.arrival && !m.arrival->whole();
  const auto& plan = core_.options_.plan;
  auto adopted =
      core_.models_.adopt(std::move(m.model), // its only holder: taken
                          global_model_file(plan, ::getpid()), arriving);
  if (!adopted)
    return adopted;
  auto* self = core_.self_;
  core_.checker_.forget_anchor(); // the parent's model anchors itself
  auto measuring = checks_.adopt(
      m, wake_up<aggregator_actor, uint64_t>(self, resident_atom::value),
      wake_up<aggregator_actor>(self, sent_up_atom::value));
  if (!measuring)
    core_.checker_.measure_global((*adopted)->bytes);
  else if (checks_.residency()) // measured as it arrives (arrived())
    core_.checker_.measure_begin();
  return adopted;
}

void aggregator_relay::arrived(uint64_t upto) {
  if (!checks_.measuring())
    return;
  const auto& model = core_.models_.current().bytes;
  auto [from, to] = checks_.measurable(upto);
  for (auto seq = from; seq < to; ++seq)
    core_.checker_.measure_position(seq, model.bytes());
  checks_.measured(to);
  if (upto < core_.plan_.total_bytes())
    return;
  if (checks_.residency())
    core_.checker_.measure_end();
  else
    core_.checker_.measure_global(model);
  checks_.measured_all();
}

std::optional<error> aggregator_relay::refuse_offer(const std::string& id) {
  if (auto early = checks_.refuse_offer(id)) // nobody holds it whole yet
    return early;
  if (checks_.measuring()) // whole, its last bytes' word still on its way
    arrived(core_.plan_.total_bytes());
  return std::nullopt;
}

void aggregator_relay::opened(const upload_listener& notify, uint32_t round) {
  if (checks_.stream_opened(round)) // its positions settle for it
    stream_listener_ = notify;
}

// -- g held for the checks ----------------------------------------------------------

std::optional<aggregator_relay::promise>
aggregator_relay::park(const std::string& sender, const frame& f,
                       const upload_record& s, const msg::chunk_header& h) {
  if (!checks_.residency() || !core_.acc_->open(h.sequence))
    return std::nullopt;
  auto sid = h.stream_id;
  bool waits = parked_.any(sid);
  bool next = waits ? h.sequence == parked_.next_of(sid)
                    : static_cast<bool>(upload_ledger::check_next(s, h));
  if (!next || (!waits && checks_.global_at(h.sequence)))
    return std::nullopt;
  checks_.global_at(h.sequence); // asked for as early as it is known
  auto rp = core_.self_->make_response_promise<frame>();
  parked_.park(sid, {h.sequence, sender, f, rp});
  return rp;
}

namespace {

/// Answers parked chunk `p` with `out`, unless its credit is held (out
/// delegated: the promise waits with the others of its position).
void answer(aggregator_relay::promise& reply, caf::result<frame>& out) {
  if (out.flag == caf::rt_value)
    reply.deliver(out.value.get_as<frame>(0));
  else if (out.flag == caf::rt_error)
    reply.deliver(out.err);
}

} // namespace

void aggregator_relay::filled(uint64_t seq) {
  if (!checks_.filled(seq))
    return;
  parked_.release([this](uint64_t at) { return checks_.present(at); },
                  [this](auto& p) {
                    auto out = consume_(p.sender, p.frame, &p.reply);
                    answer(p.reply, out);
                  });
  advance_();
}

void aggregator_relay::unpark(uint64_t sid) {
  for (auto& p : parked_.take_stream(sid)) {
    auto out = consume_(p.sender, p.frame, &p.reply);
    answer(p.reply, out);
  }
}

void aggregator_relay::forget_globals() {
  checks_.forget_globals();
  while (auto sid = parked_.first()) // answered as a chunk that comes now
    unpark(*sid);
}

// -- settling ----------------------------------------------------------------------

void aggregator_relay::settled(uint64_t seq) {
  checks_.settled(seq);
  // A streaming relay: its weighted sum at `seq` is scaled to the round's
  // weight W, that of position 0 (where a child cut or refused since did
  // not deliver: times W over its own weight; where nobody did, it holds
  // g, which then weighs W), and the scheduler hears that the bytes up to
  // its end may go up.
  auto factor = checks_.stream_scale(seq, core_.acc_->settled_weight(seq));
  if (!factor || !stream_listener_)
    return; // nothing in position 0 (the round sits out), or given up
  const auto& e = core_.plan_.extent(seq);
  // int32 sums on the grid hold the round's weight: nothing to scale.
  bool on_grid = positions_ && core_.acc_->settled_on_grid(seq);
  assert(!on_grid || *factor == 1.0);
  if (positions_)
    positions_->settled(seq, on_grid);
  if (*factor != 1.0)
    relay_checks::scale_floats(
        core_.models_.current().bytes.bytes().subspan(e.model_offset, e.bytes),
        static_cast<float>(*factor));
  core_.self_->send(stream_listener_, settled_atom::value,
                    checks_.stream_round(), e.model_offset + e.bytes,
                    checks_.stream_weight());
}

} // namespace fedcaf
