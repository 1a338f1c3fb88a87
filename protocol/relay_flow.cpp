#include "protocol/relay_flow.hpp"

#include <algorithm>
#include <set>

#include "fedcaf/log.hpp"
#include "protocol/relay_residency.hpp"

namespace fedcaf {

namespace {

/// The answer to a fetch of a model the relay no longer has.
error model_gone() {
  return {errc::not_in_round, "the relay's model of that round is gone"};
}

} // namespace

relay_flow::relay_flow(std::chrono::milliseconds fetch_silence, relay_port port,
                       std::chrono::milliseconds round_deadline)
    : fetch_silence_(fetch_silence), round_deadline_(round_deadline),
      port_(std::move(port)) {}

parent_request* relay_flow::parent() {
  if (auto* a = std::get_if<adopting>(&state_))
    return &a->parent;
  if (auto* r = std::get_if<in_round>(&state_))
    return &r->parent;
  if (auto* g = std::get_if<giving_up>(&state_))
    return &g->parent;
  return nullptr;
}

// -- the upstream half ---------------------------------------------------------

void relay_flow::take(relay_model m, parent_request parent, time_point now) {
  if (is_ended())
    return parent.reply(
        error{errc::unexpected_message, "the relay's run has ended"});
  if (next_) { // displaced by a newer one: it never comes whole
    next_->parent.reply(relay_result{});
    next_ = waiting_model{std::move(m), std::move(parent)};
    return;
  }
  if (parent_request* open = this->parent(); open != nullptr) {
    next_ = waiting_model{std::move(m), std::move(parent)};
    if (!download_.complete())
      give_up_download(now); // else the round under way ends first
    return;
  }
  adopt(std::move(m), std::move(parent), {}, now);
}

void relay_flow::adopt(relay_model m, parent_request parent,
                       const std::vector<std::pair<uint64_t, uint64_t>>& in,
                       time_point now) {
  if (!download_.complete() && !download_.abandoned()) {
    serve_waiting(now);
    retired_ = retired_model{served_, true};
  }
  if (!m.arrival) // handed over whole
    m.arrival = std::make_shared<model_arrival>(true);
  arrival_ = m.arrival;
  download_.start(m.model->layout.total_bytes(), !arrival_->whole());
  forget_missed();
  if (m.residency) // positions fetched again for missed fetches
    m.residency->add_waker(port_.resident);
  incoming_residency_ = m.residency;
  state_ = adopting{std::move(parent)};
  port_.adopt(std::move(m));
  for (const auto& [offset, bytes] : in) // after the adoption's request
    arrived(offset, bytes, now);
}

void relay_flow::arrived(uint64_t offset, uint64_t bytes, time_point now) {
  if (next_) { // the next model's (its bytes follow its relay_atom)
    next_->arrived.emplace_back(offset, bytes);
    return;
  }
  if (download_.complete() || download_.abandoned())
    return;
  auto before = download_.prefix();
  for (auto ticket : download_.arrived(offset, bytes))
    if (auto w = waiting_.extract(ticket))
      w.mapped().reply(serve_now(w.mapped().id, w.mapped().req, now));
  if (download_.complete())
    arrival_->complete(); // before the aggregator hears: offers may come
  // The aggregator measures g as it comes (after its adoption, which it
  // was asked for before), and takes offers once it is whole.
  if (download_.prefix() > before)
    port_.arrived(download_.prefix());
}

// -- the server's actors ---------------------------------------------------------

void relay_flow::adopted(snapshot_ptr served, time_point now) {
  auto* a = std::get_if<adopting>(&state_);
  served_ = std::move(served);
  residency_ = std::move(incoming_residency_); // the model served's
  if (!a)
    return; // the run ended meanwhile: no round opens
  state_ = in_round{std::move(a->parent)};
  if (next_ && !download_.complete())
    return give_up_download(now); // before it was in place
  auto released = gate_.model_in();
  if (released.start)
    start(released.start->round, released.start->chosen, now);
  else if (released.choose_again && held_sit_out_)
    std::exchange(held_sit_out_, {})(*released.choose_again);
}

void relay_flow::start(uint32_t round, const std::vector<std::string>& chosen,
                       time_point now) {
  if (!gate_.start(round, chosen))
    return; // held until the parent's model is in
  round_ = round;
  port_.open_round(round, chosen);
  if (residency_) { // the children's fetches pace the download
    refetches_.start(residency_->plan().chunk_count());
    std::optional<time_point> deadline;
    if (round_deadline_.count() > 0)
      deadline = now + round_deadline_;
    pacing_.start(residency_->plan().chunk_count(),
                  std::set<std::string>(chosen.begin(), chosen.end()), now,
                  residency_->cache(), deadline);
    arm_pacing();
  }
}

void relay_flow::sit_out(uint32_t round, sit_out_reply reply, time_point now) {
  if (held_sit_out_)
    return reply(error{errc::unexpected_message,
                       "not a relay, or a round already sitting out"});
  auto sitting = gate_.sit_out(round);
  if (sitting == relay_gate::sitting::waits) {
    held_sit_out_ = std::move(reply);
    return;
  }
  port_.sat_out(round, sitting == relay_gate::sitting::now_open_round);
  answer(relay_result{}, now);
  log_line(log_level::warning, "server",
           "round " + std::to_string(round) +
               ": too few children; the relay sits its parent's round out");
  reply(is_ended() ? 0u : round + 1);
}

void relay_flow::settled(uint32_t round, const relay_step& step) {
  auto* p = parent();
  if (p && p->hears && round == round_)
    p->hears(step);
}

void relay_flow::published(relay_result r, time_point now) {
  gate_.published();
  answer(std::move(r), now);
}

void relay_flow::give_up_download(time_point now) {
  if (is_adopting())
    return; // on with it once the adoption is answered
  serve_waiting(now);
  retired_ = retired_model{served_, false};
  gate_.withdraw();
  if (gate_.is_open()) {
    log_line(log_level::warning, "server",
             "round " + std::to_string(round_) +
                 ": the parent's model of the round never comes whole (the "
                 "relay's download was given up for a newer round)");
    if (auto* p = parent())
      state_ = giving_up{std::move(*p)};
    port_.sit_out(round_);
    return;
  }
  answer(relay_result{}, now);
}

void relay_flow::answer(result<relay_result> r, time_point now) {
  // A given-up model is served until the round after it is answered:
  // children that were downloading it finish (their round is sat out).
  if (retired_ && std::exchange(retired_->answered, true))
    retired_.reset();
  // Answered (a round sat out, perhaps before any child fetched): the
  // download is paced by nobody now.
  if (residency_)
    residency_->served_below(residency_->plan().chunk_count());
  pacing_.stop();
  if (auto* p = parent()) {
    auto reply = std::move(p->reply);
    state_ = no_request{};
    reply(std::move(r));
  }
  if (auto n = std::exchange(next_, std::nullopt))
    adopt(std::move(n->model), std::move(n->parent), n->arrived, now);
}

// -- the children ----------------------------------------------------------------

result<void> relay_flow::may_offer(const std::string& id, uint32_t offered,
                                   uint32_t open) const {
  // Whole (the one truth the aggregator reads too), and not abandoned since
  // (the run ended: what comes now sits the round out).
  if ((!arrival_ || arrival_->whole()) && !download_.abandoned())
    return {};
  // Only an offer of the round opened on the model still arriving is no
  // honest one's; one of the round before (given up, or just over as the
  // next model comes) sits it out.
  bool on_it = gate_.is_open() && !is_adopting() && offered == open;
  if (download_.abandoned() || !on_it)
    return error{errc::not_in_round,
                 "round " + std::to_string(offered) +
                     " is sat out: the relay's parent's model of it never "
                     "came whole"};
  return model_arrival::early_offer(id);
}

void relay_flow::fetch(const std::string& id, const msg::fetch& req,
                       std::optional<std::pair<uint64_t, uint64_t>> range,
                       time_point now, fetch_reply reply) {
  bool of_served =
      range && !is_adopting() && req.model_version == served_version();
  if (of_served && residency_ && req.sequence < residency_->served()) {
    // Gone from a window-mode relay's cache: fetched again from the
    // parent for this child (late, or silent for a while), within its
    // budget (refetch_budget).
    // Counted only where the parent is asked: a chunk held, or asked for
    // already, costs the parent nothing more.
    if (residency_->would_ask(req.sequence))
      if (auto over = refetches_.take(id))
        return reply(port_.refuse(*over));
    if (!residency_->want(req.sequence, relay_residency::serve)) {
      missed_[req.sequence].push_back(waiting_fetch{id, req, std::move(reply)});
      return;
    }
    auto out = serve_now(id, req, now);
    residency_->release(req.sequence, relay_residency::serve);
    return reply(std::move(out));
  }
  // While the aggregator adopts a model, the one served is the last.
  if (of_served && !download_.complete() &&
      !download_.has(range->first, range->second)) {
    waiting_.emplace(download_.wait(range->first, range->second),
                     waiting_fetch{id, req, std::move(reply)});
    return;
  }
  reply(serve_now(id, req, now));
}

void relay_flow::resident(uint64_t seq, time_point now) {
  auto waiting = missed_.extract(seq);
  if (waiting.empty())
    return;
  for (auto& w : waiting.mapped())
    w.reply(residency_ && !residency_->abandoned() &&
                    w.req.model_version == served_version()
                ? serve_now(w.id, w.req, now)
                : port_.refuse(model_gone()));
  if (residency_)
    residency_->release(seq, relay_residency::serve);
}

void relay_flow::paced(time_point now) {
  pace(now);
  if (pacing_.active())
    arm_pacing();
}

void relay_flow::dropped(const std::string& id, time_point now) {
  pacing_.forget(id); // it paces a window-mode relay's download no more
  pace(now);
}

void relay_flow::end(const std::string& reason, time_point now) {
  error why{errc::internal,
            "the relay's run ended: " + (reason.empty() ? "done" : reason)};
  for (auto* p : {parent(), next_ ? &next_->parent : nullptr})
    if (p)
      p->reply(why);
  next_.reset();
  state_ = ended{};
  serve_waiting(now);
  gate_.take_waiting_sit_out();
  if (held_sit_out_)
    std::exchange(held_sit_out_, {})(0u);
}

msg::frame relay_flow::serve_now(const std::string& id, const msg::fetch& req,
                                 time_point now) {
  snapshot_ptr pinned; // a model given up: its children still download it
  if (retired_ && retired_->model &&
      req.model_version == retired_->model->version)
    pinned = retired_->model;
  auto f = port_.serve(id, req, pinned);
  if (!f)
    return port_.refuse(f.err());
  if (pacing_.active() && !is_adopting() &&
      req.model_version == served_version()) {
    pacing_.fetched(id, req.sequence, now);
    pace(now);
  }
  return std::move(*f);
}

void relay_flow::serve_waiting(time_point now) {
  if (arrival_ && !download_.complete()) // never whole now; a whole one stays
    arrival_->give_up();
  for (auto ticket : download_.abandon())
    if (auto w = waiting_.extract(ticket))
      w.mapped().reply(serve_now(w.mapped().id, w.mapped().req, now));
}

void relay_flow::forget_missed() {
  for (auto& [seq, waiting] : std::exchange(missed_, {}))
    for (auto& w : waiting)
      w.reply(port_.refuse(model_gone()));
  pacing_.stop();
}

void relay_flow::pace(time_point now) {
  if (!residency_ || !pacing_.active())
    return;
  std::vector<std::string> silent;
  auto low = pacing_.low(now, fetch_silence_, &silent);
  for (const auto& id : silent)
    log_line(log_level::warning, "server",
             id + " fetched nothing of round " + std::to_string(round_) +
                 ", or held its siblings back, for " +
                 std::to_string(fetch_silence_.count() / 1000) +
                 " s: the relay's download goes on without waiting for it "
                 "(what it fetches later is fetched again from the parent, "
                 "a model at most)");
  // A child that reconnects fetches its window in flight again: the
  // cache keeps a window below the slowest.
  auto count = residency_->plan().chunk_count();
  residency_->served_below(
      low >= count ? count
                   : low - std::min<uint64_t>(low, residency_->cache()));
  if (low >= count)
    pacing_.stop();
}

void relay_flow::arm_pacing() {
  if (fetch_silence_.count() > 0)
    port_.pace_after(
        std::max(fetch_silence_ / 4, std::chrono::milliseconds{50}));
}

} // namespace fedcaf
