#include "actors/client.hpp"

#include <optional>

#include <caf/all.hpp>

#include "actors/protocol.hpp"
#include "fedcaf/chunk_plan.hpp"
#include "fedcaf/credit_window.hpp"
#include "fedcaf/log.hpp"
#include "fedcaf/memory_probe.hpp"
#include "fedcaf/stopwatch.hpp"

namespace fedcaf {

namespace {

using clock_type = steady_clock;

const_model_view as_const(const model_view& v) {
  const_model_view out;
  out.tensors.assign(v.tensors.begin(), v.tensors.end());
  return out;
}

// State machine, per round:
//   idle -(round)-> downloading -(all chunks)-> training -> offering
//   -(accept)-> uploading -(all credits)-> closing -(closed)-> idle
//   ... -(done)-> quit
class client_state {
public:
  client_state(caf::actor server, client_options options,
               trainer_factory factory, run_report* report)
      : server_(std::move(server)), options_(std::move(options)),
        factory_(std::move(factory)), report_(report),
        started_(clock_type::now()) {}

  void attach(caf::event_based_actor* self) {
    self_ = self;
    report_->node = options_.client_id;
    self_->monitor(server_);
    self_->set_down_handler([this](caf::down_msg& m) {
      if (m.source == server_.address())
        fail({errc::disconnected,
              "lost the server: " + self_->system().render(m.reason)});
    });
    register_with_server();
  }

  void on_round(const frame& f) {
    auto rs = msg::decode<msg::round_start>(f);
    if (!rs)
      return fail(rs.err());
    if (!trainer_)
      return fail({errc::unexpected_message, "round before welcome"});
    if (digest(rs->model) != digest(trainer_->layout()))
      return fail({errc::manifest_mismatch,
                   "the server's model layout differs from this client's"});
    auto plan = chunk_plan::make(rs->model, rs->chunk_bytes);
    if (!plan)
      return fail(plan.err());
    note_metrics(rs->previous);
    plan_.emplace(std::move(*plan));
    round_ = *rs;
    record_ = round_record{};
    record_.round = rs->round;
    round_started_ = clock_type::now();
    download_.emplace(plan_->chunk_count(), std::max(1u, rs->window));
    params_ = trainer_->parameters();
    const_params_ = as_const(params_);
    begin_transfer();
    pump_download();
  }

  void on_done(const frame& f) {
    auto d = msg::decode<msg::done>(f);
    if (!d)
      return fail(d.err());
    note_metrics(d->final);
    if (!d->reason.empty())
      return fail(
          {errc::disconnected, "the server ended the run: " + d->reason});
    finish();
  }

  void on_tick() {
    if (!transferring_)
      return;
    auto idle = clock_type::now() - last_progress_;
    if (idle > options_.idle_timeout)
      return fail({errc::timeout,
                   "no chunk or credit moved for " +
                       std::to_string(options_.idle_timeout.count()) + " ms"});
    arm_timer();
  }

private:
  void register_with_server() {
    msg::hello h{options_.client_id, ""};
    self_->request(server_, caf::infinite, hello_atom::value, msg::encode(h))
        .then([this](const frame& f) { on_welcome(f); },
              [this](caf::error& e) { fail_transport("hello", e); });
  }

  void on_welcome(const frame& f) {
    auto w = msg::decode<msg::welcome>(f);
    if (!w)
      return fail(w.err());
    auto cfg = parse_client_configs(w->client_configs);
    if (!cfg)
      return fail(cfg.err());
    auto t = factory_(*cfg, *w);
    if (!t)
      return fail(t.err());
    trainer_ = std::move(*t);
    log_line(options_.client_id,
             "registered as client " + std::to_string(w->client_index) +
                 " of " + std::to_string(w->num_clients) + ", " +
                 std::to_string(trainer_->sample_count()) + " samples");
  }

  // -- download: every fetch request is one credit ---------------------------

  void pump_download() {
    while (download_->can_send()) {
      auto seq = download_->take();
      msg::fetch req{round_.round, round_.model_version, seq};
      self_
          ->request(server_, caf::infinite, fetch_atom::value, msg::encode(req))
          .then([this, seq](const frame& f) { on_model_chunk(seq, f); },
                [this](caf::error& e) { fail_transport("fetch", e); });
    }
  }

  void on_model_chunk(uint64_t seq, const frame& f) {
    progress();
    auto c = msg::decode_chunk(f, plan_->chunk_bytes());
    if (!c)
      return fail(c.err());
    const auto& h = c->header;
    if (h.sequence != seq || h.stream_id != 0)
      return fail(
          {errc::bad_sequence, "model chunk " + std::to_string(h.sequence) +
                                   " answered fetch " + std::to_string(seq)});
    if (auto ok =
            plan_->check(seq, h.tensor_index, h.byte_offset, c->bytes.size());
        !ok)
      return fail(ok.err());
    plan_->copy_in(seq, c->bytes, params_);
    const auto& e = plan_->extent(seq);
    trainer_->release(e.model_offset, e.bytes);
    record_.bytes_down += c->bytes.size();
    if (auto ok = download_->ack(seq); !ok)
      return fail(ok.err());
    note_in_flight(download_->peak_in_flight());
    if (download_->complete())
      return train_and_offer();
    pump_download();
  }

  // -- training and the offer
  // --------------------------------------------------

  void train_and_offer() {
    transferring_ = false;
    record_.download_seconds = seconds_since(round_started_);
    auto m = trainer_->train();
    if (!m)
      return fail(m.err());
    record_.train_loss = m->loss;
    record_.train_seconds = m->seconds;
    upload_started_ = clock_type::now();
    log_line(options_.client_id,
             "round " + std::to_string(round_.round) + ": trained on " +
                 std::to_string(m->samples) + " samples in " +
                 std::to_string(m->seconds) + " s, loss " +
                 std::to_string(m->loss));
    msg::offer o{round_.round,
                 options_.client_id,
                 trainer_->sample_count(),
                 digest(trainer_->layout()),
                 plan_->total_bytes(),
                 plan_->chunk_count(),
                 m->loss,
                 m->seconds};
    self_->request(server_, caf::infinite, offer_atom::value, msg::encode(o))
        .then([this](const frame& f) { on_accept(f); },
              [this](caf::error& e) { fail_transport("offer", e); });
  }

  // -- upload: at most `window` chunks unacknowledged -------------------------

  void on_accept(const frame& f) {
    auto a = msg::decode<msg::accept>(f);
    if (!a)
      return fail(a.err());
    stream_id_ = a->stream_id;
    auto window = std::max(1u, std::min(a->window, round_.window));
    upload_.emplace(plan_->chunk_count(), window);
    begin_transfer();
    pump_upload();
  }

  void pump_upload() {
    while (upload_->can_send()) {
      auto seq = upload_->take();
      const auto& e = plan_->extent(seq);
      msg::chunk_header h{stream_id_, round_.round, seq, e.tensor_index,
                          e.tensor_offset};
      auto f = msg::encode_chunk(h, e.bytes, [&](std::span<std::byte> dst) {
        plan_->copy_out(seq, const_params_, dst);
      });
      trainer_->release(e.model_offset, e.bytes);
      record_.bytes_up += e.bytes;
      self_->request(server_, caf::infinite, chunk_atom::value, std::move(f))
          .then([this](const frame& reply) { on_credit(reply); },
                [this](caf::error& e) { fail_transport("chunk", e); });
    }
    note_in_flight(upload_->peak_in_flight());
  }

  void on_credit(const frame& f) {
    progress();
    auto c = msg::decode<msg::credit>(f);
    if (!c)
      return fail(c.err());
    if (auto ok = upload_->ack(c->sequence); !ok)
      return fail(ok.err());
    if (upload_->complete())
      return close_stream();
    pump_upload();
  }

  void close_stream() {
    msg::end_of_stream end{stream_id_, plan_->chunk_count()};
    self_->request(server_, caf::infinite, end_atom::value, msg::encode(end))
        .then([this](const frame& f) { on_closed(f); },
              [this](caf::error& e) { fail_transport("end", e); });
  }

  void on_closed(const frame& f) {
    transferring_ = false;
    auto closed = msg::decode<msg::stream_closed>(f);
    if (!closed)
      return fail(closed.err());
    record_.upload_seconds = seconds_since(upload_started_);
    record_.wall_seconds = seconds_since(round_started_);
    record_.ended_unix_s = unix_seconds();
    report_->rounds.push_back(record_);
  }

  // -- bookkeeping
  // -------------------------------------------------------------

  /// Attaches the server's evaluation of a global model to the round that
  /// produced it.
  void note_metrics(const msg::metrics& m) {
    if (!m.evaluated)
      return;
    for (auto& r : report_->rounds)
      if (r.round == m.round) {
        r.test_accuracy = m.test_accuracy;
        r.test_loss = m.test_loss;
      }
  }

  void note_in_flight(uint32_t n) {
    report_->peak_in_flight = std::max(report_->peak_in_flight, n);
  }

  void begin_transfer() {
    transferring_ = true;
    progress();
    arm_timer();
  }

  void progress() { last_progress_ = clock_type::now(); }

  void arm_timer() {
    self_->delayed_send(self_, options_.idle_timeout / 4, tick_atom::value);
  }

  void fail_transport(const char* what, const caf::error& e) {
    fail({errc::disconnected,
          std::string{what} + " failed: " + self_->system().render(e)});
  }

  void fail(const error& e) {
    log_line(options_.client_id, to_string(e));
    report_->failure = to_string(e);
    finish();
  }

  void finish() {
    report_->total_seconds = seconds_since(started_);
    report_->peak_rss_bytes = sample_memory().peak_rss_bytes;
    self_->quit();
  }

  caf::event_based_actor* self_ = nullptr;
  caf::actor server_;
  client_options options_;
  trainer_factory factory_;
  run_report* report_;
  std::unique_ptr<trainer> trainer_;
  model_view params_;
  const_model_view const_params_; ///< the same memory, for uploads
  std::optional<chunk_plan> plan_;
  std::optional<credit_window> download_;
  std::optional<credit_window> upload_;
  msg::round_start round_;
  round_record record_;
  uint64_t stream_id_ = 0;
  bool transferring_ = false;
  clock_type::time_point started_;
  clock_type::time_point round_started_;
  clock_type::time_point upload_started_;
  clock_type::time_point last_progress_;
};

caf::behavior client_actor(caf::event_based_actor* self,
                           std::shared_ptr<client_state> state) {
  state->attach(self);
  return {
      [state](round_atom, const frame& f) { state->on_round(f); },
      [state](done_atom, const frame& f) { state->on_done(f); },
      [state](tick_atom) { state->on_tick(); },
  };
}

} // namespace

caf::actor spawn_client(caf::actor_system& sys, caf::actor server,
                        client_options options, trainer_factory factory,
                        run_report* report) {
  auto state = std::make_shared<client_state>(
      std::move(server), std::move(options), std::move(factory), report);
  return sys.spawn(client_actor, std::move(state));
}

} // namespace fedcaf
