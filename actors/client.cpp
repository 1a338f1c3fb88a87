#include "actors/client.hpp"

#include <cstring>
#include <optional>

#include <caf/all.hpp>

#include "actors/messages.hpp"
#include "fedcaf/chunk_plan.hpp"
#include "fedcaf/credit_window.hpp"
#include "fedcaf/delta_codec.hpp"
#include "fedcaf/log.hpp"
#include "fedcaf/memory_probe.hpp"
#include "fedcaf/rdp_accountant.hpp"
#include "fedcaf/stopwatch.hpp"
#include "fedcaf/update_clip.hpp"
#include "protocol/secagg_participant.hpp"

namespace fedcaf {

namespace {

using clock_type = steady_clock;

const_model_view as_const(const model_view& v) {
  const_model_view out;
  out.tensors.assign(v.tensors.begin(), v.tensors.end());
  return out;
}

enum class phase {
  registering,
  idle,
  downloading,
  offering,
  uploading,
  closing,
  reconnecting,
};

// State machine, per round:
//   idle -(round)-> downloading -(all chunks)-> training -> offering
//   -(accept)-> uploading -(all credits)-> closing -(closed)-> idle
//   ... -(done)-> quit
// Any phase -(server lost, remote)-> reconnecting -(welcome)-> the phase it
// left: a download fetches again what was in flight; an upload offers
// again, and the server answers with where its stream stands.
// A round announced again with `resend` (the server collects the round's
// updates again) sends the trained update once more.
// Replies carry the generation they were asked in; a reconnect or a resend
// starts a new one, and older replies are ignored.
class client_state {
public:
  client_state(server_link server, client_options options,
               trainer_factory factory, run_report* report)
      : server_(std::move(server)), options_(std::move(options)),
        factory_(std::move(factory)), report_(report),
        started_(clock_type::now()) {}

  void attach(caf::event_based_actor* self) {
    self_ = self;
    report_->node = options_.client_id;
    self_->set_down_handler([this](caf::down_msg& m) {
      if (m.source != server_.address())
        return;
      if (!options_.connector)
        return fail({errc::disconnected,
                     "lost the server: " + self_->system().render(m.reason)});
      lost_server(self_->system().render(m.reason));
    });
    self_->monitor(server_);
    register_with_server();
  }

  void on_round(const frame& f) {
    auto rs = msg::decode<msg::round_start>(f);
    if (!rs)
      return fail(rs.err());
    if (!configs_)
      return fail({errc::unexpected_message, "round before welcome"});
    if (!rs->resend && rs->round != round_.round &&
        (phase_ == phase::offering || phase_ == phase::uploading ||
         phase_ == phase::closing)) {
      // AsyncScheduler: the next task may overtake the answer that closes
      // this upload; it starts once the upload has closed.
      next_task_ = f;
      return;
    }
    if (plan_ && rs->round == round_.round &&
        rs->model_version == round_.model_version) {
      if (rs->resend && phase_ != phase::downloading)
        send_again();
      return; // announced again after a reconnect: already under way
    }
    if (auto made = make_trainer(); !made)
      return fail(made.err());
    if (auto ok = trainer_->adopt_layout(rs->model); !ok)
      return fail(ok.err());
    trainer_->begin_round(rs->round, rs->evaluate_only);
    auto plan = chunk_plan::make(rs->model, rs->chunk_bytes);
    if (!plan)
      return fail(plan.err());
    note_metrics(rs->previous);
    if (auto ok = prepare_encoder(rs->model, rs->chunk_bytes); !ok)
      return fail(ok.err());
    if (encoder_ && !rs->evaluate_only)
      encoder_->begin_round();
    ++generation_;
    plan_.emplace(std::move(*plan));
    round_ = *rs;
    record_ = round_record{};
    record_.round = rs->round;
    round_started_ = clock_type::now();
    if (options_.progress) {
      auto model_bytes = plan_->total_bytes();
      options_.progress->round_started(rs->round, model_bytes,
                                       rs->evaluate_only ? 0 : model_bytes);
    }
    download_.emplace(plan_->chunk_count(), std::max(1u, rs->window));
    upload_.reset();
    sent_high_ = 0;
    clipped_ = 0;
    params_ = trainer_->parameters();
    const_params_ = as_const(params_);
    phase_ = phase::downloading;
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

  /// The server rejected this client's update (its content or its silence).
  void on_rejected(const frame& f) {
    if (auto e = msg::error_in(f))
      fail(*e);
  }

  /// The server published round `round`: a client that does not hold its
  /// model between rounds gives it up now.
  void on_round_over(uint32_t round) {
    if (options_.hold_model || phase_ != phase::idle || round != round_.round)
      return;
    if (encoder_) // the residual, before the model it comes from goes
      encoder_->settle(const_params_);
    params_ = {};
    const_params_ = {};
    trainer_.reset();
  }

  void on_tick() {
    if (!transferring_)
      return;
    auto idle = clock_type::now() - last_progress_;
    if (idle <= options_.idle_timeout)
      return arm_timer();
    auto why = "no chunk or credit moved for " +
               std::to_string(options_.idle_timeout.count()) + " ms";
    if (!options_.connector)
      return fail({errc::timeout, why});
    // Remote: the link may be dead without either end knowing yet. Register
    // again (over a new connection once the old one is gone) and resume.
    lost_server(why);
  }

  void try_reconnect(uint64_t gen) {
    if (phase_ != phase::reconnecting || gen != generation_)
      return;
    self_
        ->request(options_.connector, std::chrono::seconds{30},
                  caf::connect_atom::value)
        .then(
            [this, gen](server_link& gateway) {
              if (gen != generation_)
                return;
              server_ = std::move(gateway);
              self_->monitor(server_);
              register_with_server();
            },
            [this, gen](caf::error& e) {
              if (gen == generation_)
                retry_later(self_->system().render(e));
            });
  }

private:
  // -- registration and reconnection -----------------------------------------

  void register_with_server() {
    msg::hello h{options_.client_id, options_.token};
    auto gen = generation_;
    self_->request(server_, caf::infinite, hello_atom::value, msg::encode(h))
        .then(
            [this, gen](const frame& f) {
              if (gen == generation_)
                on_welcome(f);
            },
            [this, gen](caf::error& e) {
              if (gen == generation_)
                fail_transport("hello", e);
            });
  }

  void on_welcome(const frame& f) {
    auto w = msg::decode<msg::welcome>(f);
    if (!w)
      return fail(w.err());
    if (configs_) {
      if (phase_ == phase::reconnecting)
        resume();
      return; // a second Welcome of one reconnection changes nothing
    }
    auto cfg = parse_client_configs(w->client_configs);
    if (!cfg)
      return fail(cfg.err());
    configs_ = std::move(*cfg);
    welcome_ = *w;
    phase_ = phase::idle;
    if (!options_.hold_model) {
      log_line(options_.client_id,
               "registered as client " + std::to_string(w->client_index) +
                   " of " + std::to_string(w->num_clients) +
                   "; builds its model when chosen for a round");
      return;
    }
    if (auto made = make_trainer(); !made)
      return fail(made.err());
    log_line(options_.client_id,
             "registered as client " + std::to_string(w->client_index) +
                 " of " + std::to_string(w->num_clients) + ", " +
                 std::to_string(trainer_->sample_count()) + " samples");
  }

  result<void> make_trainer() {
    if (trainer_)
      return {};
    auto t = factory_(*configs_, *welcome_);
    if (!t)
      return t.err();
    trainer_ = std::move(*t);
    return {};
  }

  void lost_server(const std::string& why) {
    if (phase_ == phase::reconnecting) { // lost again while registering
      ++generation_;
      return retry_later(why);
    }
    resume_phase_ = phase_;
    phase_ = phase::reconnecting;
    // The old connection's gateway, if it still lives, goes with it.
    self_->demonitor(server_.address());
    self_->send_exit(server_, caf::exit_reason::user_shutdown);
    transferring_ = false;
    ++generation_;
    lost_at_ = clock_type::now();
    reconnect_delay_ = std::chrono::milliseconds{100};
    log_line(log_level::warning, options_.client_id,
             "lost the server (" + why + "); reconnecting to " + options_.host +
                 ":" + std::to_string(options_.port));
    try_reconnect(generation_);
  }

  void retry_later(const std::string& why) {
    ++report_->retries;
    if (clock_type::now() - lost_at_ > options_.reconnect_for)
      return fail({errc::disconnected,
                   "the server at " + options_.host + ":" +
                       std::to_string(options_.port) + " was not back within " +
                       std::to_string(options_.reconnect_for.count()) +
                       " ms: " + why});
    // Tagged with the generation: a later loss schedules its own attempt,
    // and only the newest one runs.
    self_->delayed_send(self_, reconnect_delay_, caf::connect_atom::value,
                        generation_);
    reconnect_delay_ =
        std::min(reconnect_delay_ * 2, std::chrono::milliseconds{2000});
  }

  /// Back on the server after a lost connection: go on where we stopped.
  void resume() {
    ++report_->resumes;
    phase_ = resume_phase_;
    log_line(options_.client_id, "reconnected; resuming");
    switch (phase_) {
    case phase::downloading: {
      auto again = download_->next() - download_->acked();
      report_->bytes_resent += again * plan_->chunk_bytes();
      download_->rewind();
      begin_transfer();
      return pump_download();
    }
    case phase::offering:
    case phase::uploading:
    case phase::closing:
      return send_offer();
    default:
      phase_ = phase::idle;
    }
  }

  // -- download: every fetch request is one credit ---------------------------

  void pump_download() {
    auto gen = generation_;
    while (download_->can_send()) {
      auto seq = download_->take();
      msg::fetch req{round_.round, round_.model_version, seq};
      self_
          ->request(server_, caf::infinite, fetch_atom::value, msg::encode(req))
          .then(
              [this, gen, seq](const frame& f) {
                if (gen == generation_)
                  on_model_chunk(seq, f);
              },
              [this, gen](caf::error& e) {
                if (gen == generation_)
                  fail_transport("fetch", e);
              });
    }
  }

  /// Compressed uploads: the encoder, made once (its residual carries from
  /// round to round) and again only if the layout changed.
  result<void> prepare_encoder(const manifest& layout, uint64_t chunk_bytes) {
    const auto& z = configs_->compression;
    if (!z.up || (encoder_ && encoded_layout_ == layout))
      return {};
    auto plan = chunk_plan::make(layout, chunk_bytes);
    if (!plan)
      return plan.err();
    const auto& train = configs_->train;
    auto made = delta_encoder::make(z, layout, std::move(*plan),
                                    train.storage == "disk" ? train.storage_dir
                                                            : std::string{});
    if (!made)
      return made.err();
    encoder_.emplace(std::move(*made));
    encoded_layout_ = layout;
    return {};
  }

  /// The largest chunk payload a download may carry.
  uint64_t max_download_payload() const {
    const auto& z = configs_->compression;
    auto raw = plan_->chunk_bytes();
    return z.down ? std::max(raw, encoded_bound(z, raw / 4 + 1)) : raw;
  }

  void on_model_chunk(uint64_t seq, const frame& f) {
    progress();
    auto c = msg::decode_chunk(f, max_download_payload());
    if (!c)
      return fail(c.err());
    const auto& h = c->header;
    if (h.sequence != seq || h.stream_id != 0)
      return fail(
          {errc::bad_sequence, "model chunk " + std::to_string(h.sequence) +
                                   " answered fetch " + std::to_string(seq)});
    auto payload = c->bytes;
    if (configs_->compression.down) { // the model's values, encoded
      const auto& e = plan_->extent(seq);
      decoded_.resize(e.bytes / 4);
      if (auto ok = decode(configs_->compression, c->bytes, decoded_); !ok)
        return fail(ok.err());
      payload = std::as_bytes(std::span{decoded_});
    }
    if (auto ok =
            plan_->check(seq, h.tensor_index, h.byte_offset, payload.size());
        !ok)
      return fail(ok.err());
    if (encoder_ && !round_.evaluate_only) // before x leaves the chunk
      encoder_->arrive(seq, payload, const_params_);
    plan_->copy_in(seq, payload, params_);
    const auto& e = plan_->extent(seq);
    trainer_->release(e.model_offset, e.bytes);
    record_.bytes_down += c->bytes.size();
    report_->bytes_received += c->bytes.size();
    if (options_.progress)
      options_.progress->moved_down(c->bytes.size());
    if (auto ok = download_->ack(seq); !ok)
      return fail(ok.err());
    note_in_flight(download_->peak_in_flight());
    if (download_->complete())
      return round_.evaluate_only ? evaluate_final() : train_and_offer();
    pump_download();
  }

  // -- training and the offer ------------------------------------------------

  void train_and_offer() {
    transferring_ = false;
    record_.download_seconds = seconds_since(round_started_);
    // Federated evaluation of the global model received (not the initial one).
    if (configs_->train.federated_evaluation && round_.round > 1)
      if (auto ok = evaluate_received(); !ok)
        return fail(ok.err());
    auto clip = configs_->train.update_clip_norm;
    bool declare = configs_->train.declare_update_norm;
    // DP-FedAvg, norm_bound: keep the model received to measure against
    if (clip > 0 || declare)
      copy_model(const_params_, received_);
    auto m = trainer_->train();
    if (!m)
      return fail(m.err());
    params_ = trainer_->parameters(); // a trainer may hand other memory
    const_params_ = as_const(params_);
    if (clip > 0) {
      auto norm = clip_update(trainer_->layout(), params_, received_, clip);
      log_line(log_level::debug, options_.client_id,
               "update norm " + std::to_string(norm) + ", clipped to " +
                   std::to_string(std::min(norm, clip)));
    }
    double norm =
        declare ? update_norm(trainer_->layout(), const_params_, received_) : 0;
    record_.train_loss = m->loss;
    record_.train_seconds = m->seconds;
    double epsilon = account_dp_sgd(*m);
    upload_started_ = clock_type::now();
    log_line(options_.client_id,
             "round " + std::to_string(round_.round) + ": trained on " +
                 std::to_string(m->samples) + " samples in " +
                 std::to_string(m->seconds) + " s, loss " +
                 std::to_string(m->loss));
    offer_ =
        msg::offer{round_.round,
                   options_.client_id,
                   trainer_->sample_count(),
                   digest(trainer_->layout()),
                   plan_->total_bytes(),
                   plan_->chunk_count(),
                   m->loss,
                   m->seconds,
                   epsilon,
                   std::move(m->figures),
                   static_cast<uint8_t>(encoder_ ? configs_->compression.method
                                                 : compression_method::none),
                   norm};
    if (round_.secure_aggregation)
      return advertise_keys();
    send_offer();
  }

  // -- secure aggregation (SecAgg+): keys, shares, then the masked offer ------

  /// Sends a SecAgg+ frame to the server; `next` takes the reply.
  template <class F> void secagg_request(frame f, const char* what, F next) {
    auto gen = generation_;
    self_->request(server_, caf::infinite, secagg_atom::value, std::move(f))
        .then(
            [this, gen, next](const frame& reply) mutable {
              if (gen == generation_)
                next(reply);
            },
            [this, gen, what](caf::error& e) {
              if (gen == generation_)
                fail_transport(what, e);
            });
  }

  /// True iff `reply` says this client sits the round out (then it does).
  bool sat_out(const frame& reply) {
    auto refused = msg::error_in(reply);
    if (!refused || refused->code != errc::not_in_round)
      return false;
    log_line(options_.client_id, "sits this round out: " + refused->message);
    phase_ = phase::idle;
    run_next_task();
    return true;
  }

  void advertise_keys() {
    secagg_.emplace(round_.round, offer_.sample_count);
    secagg_request(msg::encode(secagg_->keys()), "secure aggregation keys",
                   [this](const frame& reply) { on_roster(reply); });
  }

  void on_roster(const frame& reply) {
    if (sat_out(reply))
      return;
    auto roster = msg::decode<msg::secagg_roster>(reply);
    if (!roster)
      return fail(roster.err());
    auto shares = secagg_->seal_shares(*roster);
    if (!shares)
      return fail(shares.err());
    secagg_request(msg::encode(*shares), "secure aggregation shares",
                   [this](const frame& r) { on_relayed(r); });
  }

  void on_relayed(const frame& reply) {
    if (sat_out(reply))
      return;
    auto relayed = msg::decode<msg::secagg_shares>(reply);
    if (!relayed)
      return fail(relayed.err());
    if (auto ok = secagg_->receive_shares(*relayed); !ok)
      return fail(ok.err());
    for (const auto& bad : secagg_->unopened())
      log_line(log_level::warning, options_.client_id,
               "round " + std::to_string(round_.round) +
                   ": the secure aggregation share from " + bad +
                   " is not held; that client may not be unmasked");
    log_line(options_.client_id,
             "round " + std::to_string(round_.round) +
                 ": secure aggregation keys and shares exchanged with " +
                 std::to_string(relayed->shares.size()) +
                 " neighbours; sending the masked update");
    send_offer();
  }

  // -- federated evaluation --------------------------------------------------

  /// Evaluates the model received with the trainer and sends the figures.
  /// Returns an error iff evaluation failed.
  result<void> evaluate_received() {
    auto m = trainer_->evaluate_local();
    if (!m)
      return m.err();
    if (*m)
      send_evaluation(evaluation_of(**m));
    return {};
  }

  /// The figures of `m`, as the evaluation of the model this client
  /// received last (that of the round before the one announced).
  msg::evaluation evaluation_of(const eval_metrics& m) const {
    auto round = round_.round - 1;
    if (!m.figures.empty())
      return {round, m.samples, m.figures};
    return {round, m.samples, {{"accuracy", m.accuracy}, {"loss", m.loss}}};
  }

  /// The run's final model: evaluate it, answer (with no figures if this
  /// trainer has no test data, so that the server need not wait), and wait
  /// for the end of the run.
  void evaluate_final() {
    transferring_ = false;
    phase_ = phase::idle;
    auto m = trainer_->evaluate_local();
    if (!m)
      return fail(m.err());
    if (!*m)
      return send_evaluation(msg::evaluation{round_.round - 1, 0, {}});
    send_evaluation(evaluation_of(**m));
    if ((*m)->figures.empty())
      log_line(options_.client_id,
               "final model: accuracy " + std::to_string((*m)->accuracy) +
                   ", loss " + std::to_string((*m)->loss) + " on " +
                   std::to_string((*m)->samples) + " test samples");
  }

  /// Sends evaluation `e` (of the model of round e.round). A refusal is
  /// logged: the figures are lost, the run goes on.
  void send_evaluation(const msg::evaluation& e) {
    if (auto ok = msg::check_named_values(e.metrics, "evaluation"); !ok)
      return log_line(log_level::error, options_.client_id,
                      to_string(ok.err()));
    self_
        ->request(server_, caf::infinite, evaluated_atom::value, msg::encode(e))
        .then(
            [this](const frame& f) {
              if (auto refused = msg::error_in(f))
                log_line(log_level::warning, options_.client_id,
                         "the server refused its evaluation: " +
                             to_string(*refused));
            },
            [](caf::error&) {}); // a lost connection is handled elsewhere
  }

public:
  /// The server asks for the shares that unmask the round's sum.
  void on_unmask_asked(const frame& f) {
    auto ask = msg::decode<msg::secagg_unmask>(f);
    if (!ask || !secagg_)
      return log_line(log_level::warning, options_.client_id,
                      "an unmask request it cannot answer");
    auto reveal = secagg_->reveal(*ask);
    if (!reveal) // never both secrets of one client
      return log_line(log_level::warning, options_.client_id,
                      "refused to reveal: " + reveal.err().message);
    secagg_request(msg::encode(*reveal), "secure aggregation unmask",
                   [this](const frame& r) {
                     if (auto refused = msg::error_in(r))
                       log_line(log_level::warning, options_.client_id,
                                "the server refused its shares: " +
                                    to_string(*refused));
                   });
  }

  /// An evaluation made outside the trainer (the Python client's), of the
  /// model of the round it names.
  void on_evaluated(const frame& f) {
    auto e = msg::decode<msg::evaluation>(f);
    if (!e)
      return log_line(log_level::error, options_.client_id, to_string(e.err()));
    send_evaluation(*e);
  }

private:
  /// DP-SGD: adds this training's noisy steps to those the client's data has
  /// been through (over every trainer it has built) and returns the epsilon
  /// spent so far; 0 without DP-SGD.
  double account_dp_sgd(const train_metrics& m) {
    if (m.dp_steps == 0)
      return 0;
    dp_steps_ += m.dp_steps;
    const auto& dp = configs_->train.dp;
    auto spent =
        epsilon_for(m.dp_sample_rate, dp.noise_multiplier, dp_steps_, dp.delta);
    record_.dp_sgd_epsilon = spent.epsilon;
    log_line(options_.client_id,
             "DP-SGD: " + std::to_string(dp_steps_) + " steps at rate " +
                 std::to_string(m.dp_sample_rate) + ", epsilon " +
                 std::to_string(spent.epsilon) + " (delta " +
                 std::to_string(dp.delta) + ")");
    return spent.epsilon;
  }

  void send_offer() {
    phase_ = phase::offering;
    auto gen = generation_;
    self_
        ->request(server_, caf::infinite, offer_atom::value,
                  msg::encode(offer_))
        .then(
            [this, gen](const frame& f) {
              if (gen == generation_)
                on_accept(f);
            },
            [this, gen](caf::error& e) {
              if (gen == generation_)
                fail_transport("offer", e);
            });
  }

  /// The server collects the round's updates again: send ours once more.
  void send_again() {
    ++generation_;
    log_line(options_.client_id, "round " + std::to_string(round_.round) +
                                     ": sending the update again");
    if (upload_)
      report_->bytes_resent += upload_->acked() * plan_->chunk_bytes();
    upload_.reset();
    sent_high_ = 0;
    clipped_ = 0;
    send_offer();
  }

  // -- upload: at most `window` chunks unacknowledged -------------------------

  void on_accept(const frame& f) {
    auto a = msg::decode<msg::accept>(f);
    if (!a && a.err().code == errc::not_in_round) {
      log_line(options_.client_id, "sits this round out: " + a.err().message);
      phase_ = phase::idle;
      return run_next_task();
    }
    if (!a)
      return fail(a.err());
    if (a->next_sequence > plan_->chunk_count())
      return fail({errc::out_of_range, "the server resumes the upload at "
                                       "chunk " +
                                           std::to_string(a->next_sequence)});
    stream_id_ = a->stream_id;
    auto window = std::max(1u, std::min(a->window, round_.window));
    upload_.emplace(plan_->chunk_count(), window);
    upload_->resume(a->first_unacknowledged, a->next_sequence);
    phase_ = phase::uploading;
    begin_transfer();
    for (auto seq = a->first_unacknowledged; seq < a->next_sequence; ++seq)
      ask_for_credit(seq);
    if (upload_->complete())
      return close_stream();
    pump_upload();
  }

  void ask_for_credit(uint64_t seq) {
    auto gen = generation_;
    self_
        ->request(server_, caf::infinite, credit_atom::value,
                  msg::encode(msg::credit{stream_id_, seq}))
        .then(
            [this, gen](const frame& reply) {
              if (gen == generation_)
                on_credit(reply);
            },
            [this, gen](caf::error& e) {
              if (gen == generation_)
                fail_transport("credit", e);
            });
  }

  void pump_upload() {
    auto gen = generation_;
    while (upload_->can_send()) {
      auto seq = upload_->take();
      const auto& e = plan_->extent(seq);
      msg::chunk_header h{stream_id_, round_.round, seq, e.tensor_index,
                          e.tensor_offset};
      frame f;
      uint64_t sent = e.bytes;
      if (encoder_) {
        auto bytes = encoder_->upload(seq, const_params_);
        sent = bytes.size();
        f = msg::encode_chunk(h, sent, [&](std::span<std::byte> dst) {
          std::memcpy(dst.data(), bytes.data(), dst.size());
        });
      } else {
        f = msg::encode_chunk(h, e.bytes, [&](std::span<std::byte> dst) {
          plan_->copy_out(seq, const_params_, dst);
          if (secagg_ && round_.secure_aggregation)
            mask_in_place(e.model_offset / 4, dst);
        });
      }
      trainer_->release(e.model_offset, e.bytes);
      record_.bytes_up += sent;
      report_->bytes_sent += sent;
      if (options_.progress)
        options_.progress->moved_up(sent);
      if (seq < sent_high_)
        report_->bytes_resent += sent;
      sent_high_ = std::max(sent_high_, seq + 1);
      self_->request(server_, caf::infinite, chunk_atom::value, std::move(f))
          .then(
              [this, gen](const frame& reply) {
                if (gen == generation_)
                  on_credit(reply);
              },
              [this, gen](caf::error& e) {
                if (gen == generation_)
                  fail_transport("chunk", e);
              });
    }
    note_in_flight(upload_->peak_in_flight());
  }

  /// Replaces the float32 elements in `dst` by their masked, quantized,
  /// weighted values (little-endian uint32): in place where the frame's
  /// bytes are 4-byte aligned, else through a chunk-sized scratch.
  void mask_in_place(uint64_t first_element, std::span<std::byte> dst) {
    if (reinterpret_cast<uintptr_t>(dst.data()) % alignof(uint32_t) == 0) {
      clipped_ += secagg_->mask_in_place(first_element, dst);
      return;
    }
    scratch_.assign(dst.begin(), dst.end());
    clipped_ += secagg_->mask_in_place(first_element, scratch_);
    std::memcpy(dst.data(), scratch_.data(), dst.size());
  }

  void on_credit(const frame& f) {
    progress();
    auto c = msg::decode<msg::credit>(f);
    if (!c && (c.err().code == errc::stream_reset ||
               c.err().code == errc::unknown_stream)) {
      // The server forgot the round's uploads; it announces the round
      // again with `resend` (or the idle timeout ends the wait).
      ++generation_;
      return;
    }
    if (!c)
      return fail(c.err());
    if (auto ok = upload_->ack(c->sequence); !ok)
      return fail(ok.err());
    if (upload_->complete())
      return close_stream();
    pump_upload();
  }

  void close_stream() {
    phase_ = phase::closing;
    msg::end_of_stream end{stream_id_, plan_->chunk_count()};
    auto gen = generation_;
    self_->request(server_, caf::infinite, end_atom::value, msg::encode(end))
        .then(
            [this, gen](const frame& f) {
              if (gen == generation_)
                on_closed(f);
            },
            [this, gen](caf::error& e) {
              if (gen == generation_)
                fail_transport("end", e);
            });
  }

  void on_closed(const frame& f) {
    transferring_ = false;
    auto closed = msg::decode<msg::stream_closed>(f);
    if (!closed)
      return fail(closed.err());
    if (encoder_) // what its encoding lost goes into the next upload
      encoder_->upload_closed();
    trainer_->upload_closed();
    phase_ = phase::idle;
    record_.upload_seconds = seconds_since(upload_started_);
    record_.wall_seconds = seconds_since(round_started_);
    if (clipped_ > 0)
      log_line(log_level::warning, options_.client_id,
               "round " + std::to_string(record_.round) + ": " +
                   std::to_string(clipped_) +
                   " values of its weighted model lay beyond the secure "
                   "aggregation clipping_range and were clipped: raise "
                   "server_configs.secure_aggregation.clipping_range");
    clipped_ = 0;
    log_line(log_level::debug, options_.client_id,
             "round " + std::to_string(record_.round) + ": upload closed " +
                 std::to_string(record_.upload_seconds) +
                 " s after training ended");
    record_.ended_unix_s = unix_seconds();
    if (!report_->rounds.empty() &&
        report_->rounds.back().round == record_.round)
      report_->rounds.back() = record_; // sent again
    else
      report_->rounds.push_back(record_);
    run_next_task();
  }

  /// A task that arrived while this client's upload was under way starts
  /// now that the upload is over (closed, or the server let it sit out).
  void run_next_task() {
    if (!next_task_)
      return;
    auto f = std::move(*next_task_);
    next_task_.reset();
    on_round(f);
  }

  // -- bookkeeping -----------------------------------------------------------

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

  /// A request failed: the server is gone. Remote clients learn that from
  /// the down message too and reconnect; the others give up.
  void fail_transport(const char* what, const caf::error& e) {
    if (options_.connector)
      return;
    fail({errc::disconnected,
          std::string{what} + " failed: " + self_->system().render(e)});
  }

  void fail(const error& e) {
    log_line(log_level::error, options_.client_id, to_string(e));
    report_->failure = to_string(e);
    finish();
  }

  void finish() {
    report_->total_seconds = seconds_since(started_);
    report_->peak_rss_bytes = sample_memory().peak_rss_bytes;
    self_->quit();
  }

  caf::event_based_actor* self_ = nullptr;
  server_link server_;
  client_options options_;
  trainer_factory factory_;
  run_report* report_;
  std::optional<client_configs> configs_; ///< from the Welcome
  uint64_t dp_steps_ = 0; ///< DP-SGD steps taken on this client's data
  std::optional<msg::welcome> welcome_;
  std::optional<frame> next_task_;   ///< arrived while uploading
  std::vector<std::byte> received_;  ///< DP-FedAvg: the model trained from
  std::unique_ptr<trainer> trainer_; ///< null between rounds if !hold_model
  model_view params_;
  const_model_view const_params_; ///< the same memory, for uploads
  std::optional<chunk_plan> plan_;
  std::optional<credit_window> download_;
  std::optional<credit_window> upload_;
  msg::round_start round_;
  msg::offer offer_;
  round_record record_;
  uint64_t stream_id_ = 0;
  uint64_t sent_high_ = 0; ///< one past the highest chunk sent this round
  /// SecAgg+: this round's keys, masks and held shares.
  std::optional<secagg_participant> secagg_;
  std::vector<std::byte> scratch_; ///< masks an unaligned chunk
  /// Compressed uploads (client_configs.comm_configs.compression).
  std::optional<delta_encoder> encoder_;
  manifest encoded_layout_;
  std::vector<float> decoded_; ///< compressed downloads: a chunk's values
  uint64_t clipped_ = 0;       ///< values clipped by this round's quantizer
  uint64_t generation_ = 0;
  phase phase_ = phase::registering;
  phase resume_phase_ = phase::registering;
  bool transferring_ = false;
  std::chrono::milliseconds reconnect_delay_{100};
  clock_type::time_point started_;
  clock_type::time_point round_started_;
  clock_type::time_point upload_started_;
  clock_type::time_point last_progress_;
  clock_type::time_point lost_at_;
};

caf::behavior client_actor(caf::event_based_actor* self,
                           std::shared_ptr<client_state> state) {
  state->attach(self);
  return {
      [state](round_atom, const frame& f) { state->on_round(f); },
      [state](done_atom, const frame& f) { state->on_done(f); },
      [state](idle_atom, uint32_t round) { state->on_round_over(round); },
      [state](reject_atom, const frame& f) { state->on_rejected(f); },
      [state](tick_atom) { state->on_tick(); },
      [state](evaluated_atom, const frame& f) { state->on_evaluated(f); },
      [state](secagg_atom, const frame& f) { state->on_unmask_asked(f); },
      [state](caf::connect_atom, uint64_t gen) { state->try_reconnect(gen); },
  };
}

} // namespace

caf::actor spawn_client(caf::actor_system& sys, server_link server,
                        client_options options, trainer_factory factory,
                        run_report* report) {
  auto state = std::make_shared<client_state>(
      std::move(server), std::move(options), std::move(factory), report);
  return sys.spawn(client_actor, std::move(state));
}

} // namespace fedcaf
