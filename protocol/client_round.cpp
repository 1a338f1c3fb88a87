#include "protocol/client_round.hpp"

#include <string>

#include "fedcaf/log.hpp"

namespace fedcaf {

client_round::client_round(msg::round_start rs, client_model& model,
                           client_reporter& report, client_secagg_flow& secagg)
    : announced_(std::move(rs)), model_(&model), report_(&report),
      secagg_(&secagg) {}

client_round::answer
client_round::answer_announcement(const std::optional<client_round>& current,
                                  const msg::round_start& rs,
                                  bool reconnecting) {
  auto round = current ? current->announced_.round : 0;
  if (!rs.resend && rs.round != round && !reconnecting && current &&
      current->upload_open())
    return answer::wait;
  if (!current || !current->same_model(rs))
    return answer::start;
  if (rs.resend && (reconnecting || current->stage_ != stage::downloading))
    return answer::send_again;
  return answer::ignore;
}

result<client_round> client_round::start(const msg::round_start& rs,
                                         client_model& model,
                                         client_reporter& report,
                                         client_secagg_flow& secagg,
                                         time_point now) {
  auto plan = model.begin_round(rs);
  if (!plan)
    return plan.err();
  report.note_metrics(rs.previous);
  if (auto ok = model.prepare_encoder(rs); !ok)
    return ok.err();
  client_round r{rs, model, report, secagg};
  r.plan_ = std::move(*plan);
  report.begin_round(rs, r.plan_->total_bytes(), now);
  r.download_.emplace(r.plan_, rs, model.configs().compression,
                      model.arrival_hook(rs.evaluate_only));
  upload_stream::hooks how{model.encode_hook(), {}, model.float_sums_hook()};
  if (rs.secure_aggregation)
    how.mask = [flow = &secagg](uint64_t first_element,
                                std::span<std::byte> values) {
      return flow->mask_in_place(first_element, values);
    };
  r.upload_.emplace(r.plan_, rs.round, rs.window, std::move(how));
  return r;
}

result<bool> client_round::on_chunk(uint64_t seq, const msg::frame& f) {
  auto got = download_->receive(seq, f, model_->params());
  if (!got)
    return got.err();
  model_->release(got->extent);
  report_->downloaded(got->wire_bytes);
  if (auto ok = download_->ack(seq); !ok)
    return ok.err();
  report_->in_flight(download_->peak_in_flight());
  return download_->complete();
}

void client_round::fetch_again() {
  report_->resent(download_->rewind());
}

result<std::optional<msg::evaluation>>
client_round::evaluate_received(time_point now) {
  report_->download_done(now);
  return model_->evaluate_received(announced_.round);
}

result<msg::offer> client_round::train(time_point now) {
  auto t = model_->train(announced_.round, *plan_);
  if (!t)
    return t.err();
  report_->trained(t->offer, t->dp_sgd_epsilon, now);
  return std::move(t->offer);
}

void client_round::upload_again() {
  report_->resent(upload_->restart());
}

result<msg::frame> client_round::take_chunk() {
  if (auto ok = model_->stage(upload_->next_extent()); !ok)
    return ok.err();
  auto out = upload_->take_chunk(model_->const_params());
  model_->release(out.extent);
  report_->uploaded(out.payload_bytes, out.resent);
  report_->in_flight(upload_->peak_in_flight());
  return std::move(out.frame);
}

void client_round::upload_closed(time_point now, double unix_s) {
  model_->upload_closed();
  report_->upload_closed(now, unix_s, upload_->take_clipped());
}

client_round::step client_round::begin() {
  step s{.stale = true, .watch = transfer::started};
  fetch_more(s);
  return s;
}

result<client_round::step> client_round::on_reply(request_kind to, uint64_t seq,
                                                  const msg::frame& f,
                                                  time_point now,
                                                  double unix_s) {
  switch (to) {
  case request_kind::fetch:
    return on_fetched(seq, f, now);
  case request_kind::secagg:
    return on_secagg(f);
  case request_kind::offer:
    return on_accept(f);
  case request_kind::credit:
  case request_kind::chunk:
    return on_credit(f);
  case request_kind::end:
    return on_closed(f, now, unix_s);
  }
  return error{errc::internal, "a reply to no request"};
}

result<client_round::step>
client_round::on_fetched(uint64_t seq, const msg::frame& f, time_point now) {
  // Too late for this round (its model is being overwritten by its sums):
  // wait for the next one; the other fetches' answers are moot.
  if (auto e = msg::error_in(f); e && e->code == errc::not_in_round) {
    auto s = sit_out(e->message);
    s.stale = true;
    return s;
  }
  auto complete = on_chunk(seq, f);
  if (!complete)
    return complete.err();
  step s{.watch = transfer::moved};
  if (!*complete) {
    fetch_more(s);
    return s;
  }
  s.watch = transfer::ended;
  if (announced_.evaluate_only)
    return evaluate_final(std::move(s));
  // Federated evaluation of the global model received (not the initial
  // one), sent before training.
  auto e = evaluate_received(now);
  if (!e)
    return e.err();
  if (*e && fit_to_send(**e, model_->client_id()))
    s.evaluation = std::move(**e);
  s.train = true;
  return s;
}

result<client_round::step> client_round::train_and_offer(time_point now) {
  auto trained = train(now);
  if (!trained)
    return trained.err();
  offer_ = std::move(*trained);
  step s;
  // A relay's children evaluated the model before training it: their
  // figures go up as the relay's evaluation, with its offer.
  if (auto e = model_->children_evaluation(announced_.round);
      e && fit_to_send(*e, model_->client_id()))
    s.evaluation = std::move(*e);
  if (!announced_.secure_aggregation) {
    offer(s);
    return s;
  }
  s.requests.push_back({request_kind::secagg,
                        secagg_->start(offer_.round, offer_.sample_count),
                        "secure aggregation keys"});
  return s;
}

result<client_round::step> client_round::on_secagg(const msg::frame& f) {
  auto next = secagg_->on_reply(f);
  if (!next)
    return next.err();
  if (next->sit_out)
    return sit_out(*next->sit_out);
  step s;
  for (const auto& line : next->warnings)
    log_line(log_level::warning, model_->client_id(), line);
  if (!next->next.empty()) {
    s.requests.push_back(
        {request_kind::secagg, std::move(next->next), next->what});
    return s;
  }
  log_line(model_->client_id(), next->note);
  offer(s);
  return s;
}

result<client_round::step> client_round::evaluate_final(step s) {
  stage_ = stage::over;
  auto e = model_->evaluate_final(announced_.round);
  if (!e)
    return e.err();
  if (fit_to_send(e->evaluation, model_->client_id()))
    s.evaluation = std::move(e->evaluation);
  if (!e->line.empty())
    log_line(model_->client_id(), e->line);
  return s;
}

bool client_round::fit_to_send(const msg::evaluation& e,
                               std::string_view client_id) {
  auto ok = msg::check_named_values(e.metrics, "evaluation");
  if (!ok)
    log_line(log_level::error, client_id, to_string(ok.err()));
  return static_cast<bool>(ok);
}

client_round::step client_round::sit_out(const std::string& reason) {
  log_line(model_->client_id(), "sits this round out: " + reason);
  stage_ = stage::over;
  return step{.upload_over = true};
}

result<client_round::step> client_round::on_accept(const msg::frame& f) {
  auto a = upload_->on_accept(f);
  if (!a)
    return a.err();
  if (a->sit_out)
    return sit_out(*a->sit_out);
  stage_ = stage::uploading;
  step s{.watch = transfer::started};
  for (auto seq = a->first_owed; seq < a->next_owed; ++seq)
    s.requests.push_back({request_kind::credit,
                          msg::encode(upload_->credit_request(seq)), "credit"});
  if (upload_->complete())
    close(s);
  else if (auto ok = send_more(s); !ok)
    return ok.err();
  return s;
}

result<client_round::step> client_round::on_credit(const msg::frame& f) {
  auto c = upload_->on_credit(f);
  if (!c)
    return c.err();
  step s{.watch = transfer::moved};
  // reset: the server forgot the round's uploads; it announces the round
  // again with `resend` (or the idle timeout ends the wait).
  if (*c == upload_stream::credit_outcome::reset)
    s.stale = true;
  else if (*c == upload_stream::credit_outcome::complete)
    close(s);
  else if (auto ok = send_more(s); !ok)
    return ok.err();
  return s;
}

result<client_round::step>
client_round::on_closed(const msg::frame& f, time_point now, double unix_s) {
  auto closed = msg::decode<msg::stream_closed>(f);
  if (!closed)
    return closed.err();
  stage_ = stage::over;
  upload_closed(now, unix_s);
  return step{.watch = transfer::ended, .upload_over = true};
}

client_round::step client_round::resume() {
  step s;
  if (stage_ == stage::downloading) {
    fetch_again();
    s.watch = transfer::started;
    fetch_more(s);
  } else if (upload_open()) {
    offer(s);
  }
  return s;
}

client_round::step client_round::send_again() {
  log_line(model_->client_id(), "round " + std::to_string(announced_.round) +
                                    ": sending the update again");
  upload_again();
  step s{.stale = true};
  offer(s);
  return s;
}

void client_round::fetch_more(step& s) {
  paced_ = false;
  while (download_->can_fetch()) {
    if (!model_->may_fetch(download_->next_extent())) {
      paced_ = true;
      break;
    }
    auto req = download_->take_fetch();
    s.requests.push_back(
        {request_kind::fetch, msg::encode(req), "fetch", req.sequence});
  }
}

result<client_round::step> client_round::more_ready() {
  step s;
  if (stage_ == stage::downloading) { // a relay's cache has room again
    fetch_more(s);
    return s;
  }
  if (stage_ != stage::uploading)
    return s;
  s.watch = transfer::moved; // the relay's children's uploads move
  if (auto ok = send_more(s); !ok)
    return ok.err();
  return s;
}

result<void> client_round::send_more(step& s) {
  while (upload_->can_send(model_->ready_bytes())) {
    auto chunk = take_chunk();
    if (!chunk)
      return chunk.err();
    s.requests.push_back({request_kind::chunk, std::move(*chunk), "chunk"});
  }
  return {};
}

std::vector<std::pair<uint64_t, msg::frame>>
client_round::refetch_requests(uint64_t offset, uint64_t bytes) const {
  std::vector<std::pair<uint64_t, msg::frame>> out;
  for (auto seq : download_->chunks_touching(offset, bytes))
    out.emplace_back(seq,
                     msg::encode(msg::fetch{announced_.round,
                                            announced_.model_version, seq}));
  return out;
}

result<void> client_round::refetched(uint64_t seq, const msg::frame& f,
                                     uint64_t offset,
                                     std::span<std::byte> out) {
  if (auto e = msg::error_in(f))
    return *e;
  return download_->copy_part(seq, f, offset, out);
}

void client_round::offer(step& s) {
  stage_ = stage::offering;
  s.requests.push_back({request_kind::offer, msg::encode(offer_), "offer"});
}

void client_round::close(step& s) {
  stage_ = stage::closing;
  s.requests.push_back({request_kind::end, msg::encode(upload_->end()), "end"});
}

} // namespace fedcaf
