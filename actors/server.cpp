#include "actors/server.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <optional>
#include <random>
#include <set>

#include <caf/all.hpp>

#include "actors/errors.hpp"
#include "actors/interfaces.hpp"
#include "actors/messages.hpp"
#include "fedcaf/chunk_plan.hpp"
#include "fedcaf/log.hpp"
#include "fedcaf/memory_probe.hpp"
#include "fedcaf/rdp_accountant.hpp"
#include "fedcaf/stopwatch.hpp"
#include "protocol/chunk_encoding.hpp"
#include "protocol/secagg_coordinator.hpp"

namespace fedcaf {

namespace {

using clock_type = steady_clock;

enum class presence { connected, lost, dropped };

/// client_entry::address of a client in the server's own process.
constexpr const char* in_process = "this process";

struct client_entry {
  client_inbox handle;
  uint32_t index = 0;
  presence state = presence::connected;
  uint64_t epoch = 0; ///< bumped on every loss; names the drop timer
  std::string address;
  /// Takeovers of this client's session (a Hello over a new connection):
  /// a lost client comes back once, not forty times a second.
  event_limit takeovers{8, std::chrono::seconds{10}};
  /// AsyncScheduler: the client's task and the model it downloads (held
  /// until it offers its update, so that a newer version does not pull the
  /// model away mid-download).
  frame task;
  snapshot_ptr model;
};

/// The clients' evaluations of the model of one round (0: the initial).
struct model_evaluations {
  uint32_t round = 0;
  std::set<std::string> by; ///< one evaluation per client
  figures_sum sum;
};

/// Compares secrets in time independent of where they differ.
bool same_secret(const std::string& a, const std::string& b) {
  if (a.size() != b.size())
    return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i)
    diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

// State machine: registering -> (start r: announce, serve, route) ->
// (publish r: evaluate, report) -> ... -> stopping (done sent; waiting for
// clients to leave) -> quit.
// Per client: connected -(connection lost)-> lost -(hello again within the
// grace period)-> connected (it resumes) | -(grace over)-> dropped (the
// scheduler's rule applies; a later hello joins it again as new).
// Only frames from a registered client's current connection are served or
// routed; anyone else is refused before a byte of model data moves.
class server_state {
public:
  server_state(snapshot_ptr initial, server_peers peers, server_options options,
               run_report* report)
      : peers_(std::move(peers)), options_(std::move(options)), report_(report),
        started_(clock_type::now()), refusals_("server", options_.refusals) {
    install(std::move(initial));
    if (options_.secure_aggregation.enabled)
      secagg_.emplace(options_.secure_aggregation, options_.secagg_by_samples,
                      options_.max_sample_size, std::random_device{}());
    if (options_.live)
      options_.live->set_model_bytes(snapshot_->layout.total_bytes());
  }

  /// Connects the scheduler and the aggregator to the server before any
  /// client can reach it (the one late binding of the server side).
  void attach(server_actor::pointer self) {
    self_ = self;
    self_->set_down_handler([this](caf::down_msg& m) { on_down(m); });
    self_->send(peers_.scheduler, connect_atom::value, round_host{self_});
    self_->send(peers_.aggregator, connect_atom::value, unmask_planner{self_});
  }

  /// A Hello from a client in this process (`address` empty) or from a
  /// gateway, with the peer's address and the name in its verified client
  /// certificate.
  frame hello(const frame& f, const std::string& address,
              const std::string& certificate_name) {
    auto h = msg::decode<msg::hello>(f);
    if (!h)
      return refuse(h.err());
    // Where a client's handle enters: an in-process client actor, or the
    // gateway of a remote one (a broker: untyped by CAF's design).
    auto sender = caf::actor_cast<client_inbox>(self_->current_sender());
    return admit(*h, sender, address, certificate_name);
  }

  /// Opens round `round` for the clients the scheduler chose.
  void start_round(uint32_t round, const std::vector<std::string>& chosen) {
    round_ = round;
    round_open_ = true;
    chosen_ = std::set<std::string>(chosen.begin(), chosen.end());
    expected_evaluations_ = chosen_.size();
    if (options_.live)
      options_.live->round_started(round);
    if (options_.progress) {
      uint64_t expected = 0;
      for (const auto& [id, c] : clients_)
        if (c.state == presence::connected && chosen_.count(id))
          expected += snapshot_->layout.total_bytes();
      options_.progress->round_started(round, expected, expected);
    }
    resend_pending_.clear();
    round_started_ = clock_type::now();
    start_traffic();
    round_frame_ = msg::encode(announcement(false));
    std::vector<std::string> reached;
    for (auto& [id, c] : clients_)
      if (c.state == presence::connected && chosen_.count(id)) {
        self_->send(c.handle, round_atom::value, round_frame_);
        reached.push_back(id);
      }
    if (secagg_) {
      secagg_->start(round, reached);
      secagg_waiting_.clear();
      secagg_sent_away_.clear();
      if (options_.secagg_keys_timeout.count() > 0)
        self_->delayed_send(
            self_, options_.secagg_keys_timeout, phase_end_atom::value, round,
            static_cast<uint32_t>(secagg_coordinator::phase::keys));
    }
  }

  // -- secure aggregation (SecAgg+): the setup and unmask phases ---------------
  //
  // keys: a client's SecAggKeys is answered with its roster once every
  // client of the round advertised or was lost (or at round_deadline_s:
  // the late ones leave the round); shares: its sealed shares are answered with those
  // relayed to it once every client shared (or the phase timed out). The
  // masked uploads go through the aggregator as any update; at finalize the
  // aggregator asks for the unmask plan: the survivors are asked for their
  // shares, and the plan goes back once all answered (or the phase timed
  // out). The server only relays sealed shares it cannot open.

  caf::result<frame> secagg_frame(const frame& f) {
    const auto* id = sender_id();
    if (!id)
      return not_registered();
    if (!secagg_)
      return refuse({errc::unexpected_message,
                     *id + ": a secure aggregation frame in a run without "
                           "secure aggregation"});
    auto kind = msg::kind_of(f);
    if (!kind)
      return refuse(kind.err());
    switch (*kind) {
    case msg::frame_kind::secagg_keys: {
      auto k = msg::decode<msg::secagg_keys>(f);
      if (!k)
        return refuse(k.err());
      if (auto ok = secagg_->advertise(*id, *k); !ok)
        return refuse(ok.err());
      return hold_for_phase(*id);
    }
    case msg::frame_kind::secagg_shares: {
      auto s = msg::decode<msg::secagg_shares>(f);
      if (!s)
        return refuse(s.err());
      if (auto ok = secagg_->submit_shares(*id, *s); !ok)
        return refuse(ok.err());
      return hold_for_phase(*id);
    }
    case msg::frame_kind::secagg_unmask: {
      auto u = msg::decode<msg::secagg_unmask>(f);
      if (!u)
        return refuse(u.err());
      if (auto ok = secagg_->reveal(*id, *u); !ok)
        return refuse(ok.err());
      auto echo = msg::encode(msg::secagg_unmask{u->round, {}, {}, {}, {}});
      advance_secagg();
      return echo;
    }
    default:
      return refuse(
          {errc::unexpected_message, *id + ": not a frame a client sends"});
    }
  }

  /// Holds the client's request until its phase ends.
  caf::result<frame> hold_for_phase(const std::string& id) {
    auto rp = self_->make_response_promise<frame>();
    secagg_waiting_[id] = rp;
    // The shares phase's first: its deadline. The keys phase has none of
    // its own (clients advertise once they trained, which takes what it
    // takes: an early advertiser must not start a clock on the others); it
    // ends when every chosen client advertised or was lost, or at the
    // round's deadline (start_round).
    if (secagg_waiting_.size() == 1 &&
        secagg_->current() != secagg_coordinator::phase::keys)
      self_->delayed_send(self_, options_.secagg_phase_timeout,
                          phase_end_atom::value, secagg_->round(),
                          static_cast<uint32_t>(secagg_->current()));
    advance_secagg();
    return rp;
  }

  /// Ends the phase that is complete, if any.
  void advance_secagg() {
    using phase = secagg_coordinator::phase;
    if (!secagg_)
      return;
    if (secagg_->current() == phase::keys && secagg_->keys_complete())
      return close_keys();
    if (secagg_->current() == phase::shares && secagg_->shares_complete())
      return close_shares();
    if (secagg_->current() == phase::unmask && secagg_->unmask_complete())
      return close_unmask();
  }

  /// The deadline of phase `p` of `round`: ends it if it is still open.
  void secagg_deadline(uint32_t round, uint32_t p) {
    using phase = secagg_coordinator::phase;
    if (!secagg_ || secagg_->round() != round ||
        static_cast<uint32_t>(secagg_->current()) != p)
      return;
    log_line(log_level::warning, "server",
             "round " + std::to_string(round) +
                 ": a secure aggregation phase timed out; the clients that "
                 "did not answer leave the round");
    switch (secagg_->current()) {
    case phase::keys:
      return close_keys();
    case phase::shares:
      return close_shares();
    case phase::unmask:
      return close_unmask();
    default:
      return;
    }
  }

  void close_keys() {
    auto rosters = secagg_->close_keys();
    if (!rosters) {
      answer_waiting([&](const std::string&) { return refuse(rosters.err()); });
      return stop("round " + std::to_string(round_) + ": " +
                  rosters.err().message);
    }
    answer_waiting(
        [&](const std::string& id) { return msg::encode((*rosters)[id]); });
    send_away_left();
    // A chosen client that was not connected when the round started (lost,
    // within its grace) cannot join a round whose keys are set: it leaves
    // it now rather than when its grace ends.
    for (const auto& id : chosen_)
      if (!rosters->count(id) && secagg_sent_away_.insert(id).second)
        self_->send(peers_.scheduler, reject_atom::value, id, round_,
                    uint64_t{0},
                    error{errc::not_in_round,
                          "missed the secure aggregation keys phase"});
  }

  void close_shares() {
    auto relays = secagg_->close_shares();
    answer_waiting([&](const std::string& id) {
      auto it = relays.find(id);
      return it != relays.end()
                 ? msg::encode(it->second)
                 : refuse({errc::not_in_round,
                           id + " did not share in time; it sits this round "
                                "out"});
    });
    send_away_left();
  }

  /// Answers every held request: `reply(id)`, or not_in_round for a client
  /// the phase left behind.
  template <class F> void answer_waiting(F&& reply) {
    auto waiting = std::move(secagg_waiting_);
    secagg_waiting_.clear();
    const auto& left = secagg_->left();
    for (auto& [id, rp] : waiting)
      if (std::find(left.begin(), left.end(), id) != left.end())
        rp.deliver(refuse({errc::not_in_round,
                           id + " was late for secure aggregation; it sits "
                                "this round out"}));
      else
        rp.deliver(reply(id));
  }

  /// The clients the setup left behind leave the round (the scheduler no
  /// longer waits for them).
  void send_away_left() {
    for (const auto& id : secagg_->left())
      if (!secagg_sent_away_.count(id)) {
        secagg_sent_away_.insert(id);
        self_->send(
            peers_.scheduler, reject_atom::value, id, round_, uint64_t{0},
            error{errc::not_in_round, "left the secure aggregation setup"});
      }
  }

  /// The aggregator's request at finalize: the plan that unmasks the sum of
  /// `in_sum`'s updates.
  caf::result<secagg::unmask_plan>
  secagg_unmask(uint32_t round, const std::vector<std::string>& in_sum) {
    if (!secagg_ || secagg_->round() != round)
      return make_error(errc::wrong_round,
                        "no secure aggregation round " + std::to_string(round));
    auto asks = secagg_->open_unmask({in_sum.begin(), in_sum.end()});
    if (!asks)
      return to_caf(asks.err());
    unmask_promise_ = self_->make_response_promise<secagg::unmask_plan>();
    for (auto& [id, ask] : *asks) {
      auto it = clients_.find(id);
      if (it != clients_.end() && it->second.state == presence::connected)
        self_->send(it->second.handle, secagg_atom::value, msg::encode(ask));
      else
        secagg_->lost(id);
    }
    self_->delayed_send(self_, options_.secagg_phase_timeout,
                        phase_end_atom::value, round,
                        static_cast<uint32_t>(secagg_->current()));
    auto rp = *unmask_promise_;
    advance_secagg();
    return rp;
  }

  void close_unmask() {
    auto plan = secagg_->close_unmask();
    for (const auto& liar : secagg_->liars())
      log_line(log_level::warning, "server",
               "round " + std::to_string(round_) + ": " + liar);
    if (!unmask_promise_)
      return;
    auto rp = std::move(*unmask_promise_);
    unmask_promise_.reset();
    if (!plan) {
      log_line(log_level::error, "server", plan.err().message);
      rp.deliver(to_caf(plan.err()));
      return;
    }
    rp.deliver(std::move(*plan));
  }

  /// AsyncScheduler: client `id`'s next task, on the current model.
  void task(const std::string& id, uint32_t round) {
    auto it = clients_.find(id);
    if (it == clients_.end() || stopping_)
      return;
    if (!round_open_)
      round_started_ = clock_type::now();
    round_open_ = true;
    auto rs = announcement(false);
    rs.round = round;
    it->second.task = msg::encode(rs);
    it->second.model = snapshot_;
    if (options_.progress)
      options_.progress->expect(snapshot_->layout.total_bytes(),
                                snapshot_->layout.total_bytes());
    if (it->second.state == presence::connected)
      self_->send(it->second.handle, round_atom::value, it->second.task);
  }

  /// The scheduler collects these clients' updates again.
  void resend(uint32_t round, const std::vector<std::string>& ids) {
    if (round != round_ || !round_open_)
      return;
    auto f = msg::encode(announcement(true));
    for (const auto& id : ids) {
      auto it = clients_.find(id);
      if (it == clients_.end())
        continue;
      if (it->second.state == presence::connected)
        self_->send(it->second.handle, round_atom::value, f);
      else
        resend_pending_.insert(id);
    }
  }

  /// Returns the id of the registered client that sent the current message,
  /// or null.
  const std::string* sender_id() const {
    auto it = senders_.find(
        caf::actor_cast<caf::actor_addr>(self_->current_sender()));
    return it == senders_.end() ? nullptr : &it->second;
  }

  frame not_registered() const {
    return refuse({errc::not_authorized,
                   "a frame from a peer that is not a registered client"});
  }

  /// Returns an error frame, or an empty frame if the offer may be routed.
  frame check_offer(const frame& f) {
    const auto* id = sender_id();
    if (!id)
      return not_registered();
    auto o = msg::decode<msg::offer>(f);
    if (!o)
      return refuse(o.err());
    if (o->client_id != *id)
      return refuse({errc::not_authorized,
                     *id + " offered an update as " + o->client_id});
    auto expected = options_.compression.up ? options_.compression.method
                                            : compression_method::none;
    if (o->encoding != static_cast<uint8_t>(expected))
      return refuse(
          {errc::manifest_mismatch,
           *id + " offered an update encoded as " +
               (o->encoding <= static_cast<uint8_t>(compression_method::zfp)
                    ? to_string(static_cast<compression_method>(o->encoding))
                    : std::to_string(o->encoding)) +
               "; this server takes " + to_string(expected) +
               " (client_configs.comm_configs.compression)"});
    clients_[*id].model.reset(); // its download is complete
    if (o->round == round_)      // a repeated offer replaces its figures
      train_figures_[*id] = {capped(o->sample_count), std::move(o->metrics)};
    return {};
  }

  /// A client's evaluation of the model served now (the last published
  /// one) or of the one before it (an evaluation sent after the upload may
  /// arrive once the round is published): folded into that round's
  /// client_metrics, once per client.
  frame evaluated(const frame& f) {
    const auto* id = sender_id();
    if (!id)
      return not_registered();
    auto e = msg::decode<msg::evaluation>(f);
    if (!e)
      return refuse(e.err());
    auto* of = e->round == current_.round                  ? &current_
               : previous_ && e->round == previous_->round ? &*previous_
                                                           : nullptr;
    if (!of)
      return refuse({errc::wrong_round,
                     *id + " evaluated the model of round " +
                         std::to_string(e->round) + "; the model served is " +
                         std::to_string(current_.round) + "'s"});
    if (!of->by.insert(*id).second)
      return refuse({errc::bad_sequence, *id + " evaluated round " +
                                             std::to_string(e->round) +
                                             "'s model a second time"});
    of->sum.add(capped(e->sample_count), e->metrics);
    event("evaluated", *id,
          "round " + std::to_string(e->round) + ", " +
              std::to_string(e->sample_count) + " samples");
    note_evaluations(*of);
    return msg::encode(msg::evaluation{e->round, e->sample_count, {}});
  }

  /// The final model's evaluation took too long: end the run with what came.
  void evaluation_overdue() {
    if (!final_pass_ || stopping_)
      return;
    log_line("server",
             "final evaluation: " + std::to_string(current_.by.size()) +
                 " of " + std::to_string(expected_evaluations_) +
                 " clients answered within the time limit");
    end_run("");
  }

  frame serve(const frame& f) {
    if (!sender_id())
      return not_registered();
    auto req = msg::decode<msg::fetch>(f);
    if (!req)
      return refuse(req.err());
    const auto& entry = clients_[*sender_id()];
    const auto& model = entry.model ? entry.model : snapshot_;
    if (req->model_version != model->version)
      return refuse({errc::wrong_round, "model version " +
                                            std::to_string(req->model_version) +
                                            " is not served; current is " +
                                            std::to_string(model->version)});
    if (req->sequence >= plan_->chunk_count())
      return refuse({errc::out_of_range,
                     "chunk " + std::to_string(req->sequence) + " of " +
                         std::to_string(plan_->chunk_count())});
    const auto& e = plan_->extent(req->sequence);
    msg::chunk_header h{0, req->round, req->sequence, e.tensor_index,
                        e.tensor_offset};
    frame reply;
    uint64_t sent = e.bytes;
    if (options_.compression.down) { // the model's float32 values, encoded
      std::span<const float> values{
          reinterpret_cast<const float*>(model->bytes.data() + e.model_offset),
          e.bytes / 4};
      reply = encode_compressed_chunk(h, options_.compression, values, encoded_,
                                      sent);
    } else {
      auto view = model == snapshot_ ? view_ : model->view();
      reply = msg::encode_chunk(h, e.bytes, [&](std::span<std::byte> dst) {
        plan_->copy_out(req->sequence, view, dst);
      });
    }
    model->bytes.release(e.model_offset, e.bytes); // file-backed only
    bytes_down_ += sent;
    raw_down_ += e.bytes;
    traffic_[*sender_id()].second += sent;
    if (options_.live)
      options_.live->sent_to(*sender_id(), sent);
    if (options_.progress)
      options_.progress->moved_down(sent);
    report_->bytes_sent += sent;
    return reply;
  }

  void start_traffic() {
    bytes_up_ = bytes_down_ = raw_down_ = 0;
    traffic_.clear();
  }

  void count_upload(const frame& f) {
    traffic_[*sender_id()].first += f.size();
    if (options_.live)
      options_.live->received_from(*sender_id(), f.size());
    if (options_.progress)
      options_.progress->moved_up(f.size());
    bytes_up_ += f.size();
    report_->bytes_received += f.size();
  }

  caf::typed_response_promise<bool> publish(round_result done) {
    auto round = done.round;
    auto clients = done.clients;
    auto train_loss = done.loss;
    auto dp_sgd_epsilon = done.dp_sgd_epsilon;
    auto& missing = done.missing;
    auto& contributors = done.contributors;
    auto& staleness = done.staleness;
    install(std::move(done.model));
    round_open_ = options_.async; // async: tasks go on
    if (!options_.async) // the round's clients may give up their models
      for (const auto& id : chosen_)
        if (auto it = clients_.find(id);
            it != clients_.end() && it->second.state == presence::connected)
          self_->send(it->second.handle, idle_atom::value, round);
    auto rp = self_->make_response_promise<bool>();
    auto record = round_record{};
    record.round = round;
    record.bytes_up = bytes_up_;
    record.bytes_down = bytes_down_;
    record.client_bytes.assign(traffic_.begin(), traffic_.end());
    const auto& z = options_.compression;
    if (z.up && bytes_up_ > 0)
      record.compression_up = static_cast<double>(clients) *
                              static_cast<double>(snapshot_->bytes.size()) /
                              static_cast<double>(bytes_up_);
    if (z.down && bytes_down_ > 0)
      record.compression_down =
          static_cast<double>(raw_down_) / static_cast<double>(bytes_down_);
    record.train_loss = train_loss;
    record.clients = clients;
    record.missing_clients = std::move(missing);
    if (options_.dp_noise_multiplier > 0)
      record.dp_epsilon =
          epsilon_for(options_.dp_sample_rate, options_.dp_noise_multiplier,
                      round, options_.dp_delta)
              .epsilon;
    if (dp_sgd_epsilon > 0)
      record.dp_sgd_epsilon = dp_sgd_epsilon;
    record.client_train_metrics = train_figures_of(contributors);
    record.contributors = std::move(contributors);
    record.staleness = std::move(staleness);
    if (options_.robust) {
      record.trimmed_values = snapshot_->trimmed_values;
      log_trimmed(round, snapshot_->trimmed_values);
    }
    print_held(); // the previous round's evaluations are as complete as
                  // they will be
    previous_ = std::move(current_);
    current_ = model_evaluations{round, {}, {}};
    auto started = round_started_;
    if (options_.async) { // the next version's figures start now
      round_started_ = clock_type::now();
      start_traffic();
    }
    self_->request(peers_.evaluator, caf::infinite, eval_atom::value, snapshot_)
        .then(
            [this, rp, record, started](const evaluation_result& e) mutable {
              if (e.evaluated) {
                record.test_accuracy = e.accuracy;
                record.test_loss = e.loss;
                last_metrics_ = {record.round, e.accuracy, e.loss, true};
              }
              finish_round(record, started);
              if (!e.save_failure.empty())
                stop(e.save_failure);
              rp.deliver(e.save_failure.empty());
            },
            [this, rp, record, started](caf::error&) mutable {
              finish_round(record, started);
              rp.deliver(true);
            });
    return rp;
  }

  /// Ends the run; a successful one with federated evaluation first has
  /// the connected clients evaluate the final model.
  void stop(const std::string& reason) {
    if (stopping_)
      return;
    if (final_pass_) { // only an interruption ends the final evaluation
      if (!reason.empty())
        end_run(reason);
      return;
    }
    if (reason.empty() && options_.federated_evaluation &&
        connected_count() > 0)
      return begin_final_pass();
    end_run(reason);
  }

  void end_run(const std::string& reason) {
    if (stopping_)
      return;
    print_held();
    stopping_ = true;
    round_open_ = false;
    report_->failure = reason;
    msg::done d{round_, last_metrics_, reason};
    auto f = msg::encode(d);
    for (auto& [id, c] : clients_)
      if (c.state == presence::connected)
        self_->send(c.handle, done_atom::value, f);
    if (connected_count() == 0)
      return quit();
    self_->delayed_send(self_, options_.linger, tick_atom::value);
  }

  void quit() {
    event_end();
    report_->node = "server";
    report_->total_seconds = seconds_since(started_);
    report_->peak_rss_bytes = sample_memory().peak_rss_bytes;
    report_->refusals = refusals_.count();
    if (options_.poisoned)
      report_->poisoned_updates = options_.poisoned->load();
    self_->quit();
  }

  /// The scheduler let `id` leave the round: its update was refused for its
  /// content or its silence. Its connection is told (and a gateway ends it).
  void tell_rejected(const std::string& id, const error& why) {
    event("rejected", id, to_string(why));
    auto it = clients_.find(id);
    if (it == clients_.end() || it->second.state != presence::connected)
      return;
    self_->send(it->second.handle, reject_atom::value,
                msg::encode(error{why.code,
                                  "its update was rejected: " + why.message}));
  }

  /// The grace period of a lost client is over.
  void drop(const std::string& id, uint64_t epoch) {
    auto it = clients_.find(id);
    if (it == clients_.end() || it->second.state != presence::lost ||
        it->second.epoch != epoch || stopping_)
      return;
    it->second.state = presence::dropped;
    event("dropped", id, "");
    log_line(log_level::warning, "server",
             "dropped " + id + ": it did not come back within " +
                 std::to_string(options_.reconnect_grace.count()) + " ms");
    self_->send(peers_.scheduler, drop_atom::value, id);
  }

  /// Sends the open round's announcement to a client that came back.
  void announce_to(const std::string& id) {
    auto it = clients_.find(id);
    if (final_pass_ && !stopping_ && it != clients_.end() &&
        it->second.state == presence::connected && !current_.by.count(id)) {
      self_->send(it->second.handle, round_atom::value, round_frame_);
      return; // back during the final evaluation: asked again
    }
    if (options_.async && it != clients_.end() && !it->second.task.empty() &&
        it->second.state == presence::connected) {
      self_->send(it->second.handle, round_atom::value, it->second.task);
      return;
    }
    if (!round_open_ || it == clients_.end() || !chosen_.count(id) ||
        it->second.state != presence::connected)
      return;
    auto resend = resend_pending_.erase(id) > 0;
    self_->send(it->second.handle, round_atom::value,
                resend ? msg::encode(announcement(true)) : round_frame_);
  }

private:
  msg::round_start announcement(bool resend) const {
    return msg::round_start{round_,
                            snapshot_->version,
                            snapshot_->layout,
                            options_.chunk_bytes,
                            options_.window,
                            last_metrics_,
                            resend,
                            false,
                            secagg_.has_value()};
  }

  /// Decides a hello from `sender`, seen at `address` (empty: in this
  /// process), whose verified certificate names `certificate_name`.
  frame admit(const msg::hello& h, const client_inbox& sender,
              const std::string& address, const std::string& certificate_name) {
    bool remote = !address.empty();
    auto from = remote ? address : std::string{in_process};
    auto deny = [&](errc code, const std::string& why) {
      return refuse({code, h.client_id + " from " + from + ": " + why});
    };
    bool authenticated = false;
    if (!options_.tokens.empty()) {
      auto t =
          std::find_if(options_.tokens.begin(), options_.tokens.end(),
                       [&](const auto& kv) { return kv.first == h.client_id; });
      if (t == options_.tokens.end())
        return deny(errc::not_authorized, "unknown client id");
      if (!same_secret(t->second, h.token))
        return deny(errc::not_authorized, "wrong token");
      authenticated = true;
    }
    if (options_.require_certificate_name && remote) {
      if (certificate_name != h.client_id)
        return deny(errc::not_authorized,
                    "its client certificate is for '" + certificate_name + "'");
      authenticated = true;
    }
    auto it = clients_.find(h.client_id);
    if (it != clients_.end() && it->second.state != presence::dropped) {
      auto& c = it->second;
      // A remote client registers again on its connection when its
      // transfer stalled; over another one after losing its connection
      // (only when authenticated, if the old one still looks alive).
      bool same = c.handle == sender;
      if ((same && !remote) ||
          (!same && c.state == presence::connected && !authenticated))
        return deny(errc::unknown_client, "already registered");
      if (!same && !c.takeovers.allow())
        return deny(errc::too_many_requests,
                    c.takeovers.exceeded("new connections"));
      return rebind(h.client_id, c, sender, from);
    }
    if (stopping_)
      return deny(errc::unknown_client, "the run has ended");
    if (active_count() >= options_.num_clients)
      return deny(errc::unknown_client,
                  "all " + std::to_string(options_.num_clients) +
                      " client places are taken");
    auto index = it != clients_.end() ? it->second.index
                                      : static_cast<uint32_t>(clients_.size());
    auto& c = clients_[h.client_id];
    c.handle = sender;
    c.index = index;
    c.state = presence::connected;
    ++c.epoch;
    c.address = from;
    c.task = {};
    c.model = nullptr; // its takeover count stays: no churn by re-registering
    senders_[sender.address()] = h.client_id;
    self_->monitor(sender);
    log_line("server", "registered " + h.client_id + " from " + from);
    event("registered", h.client_id, from);
    self_->send(peers_.scheduler, join_atom::value, h.client_id);
    return welcome(index);
  }

  frame rebind(const std::string& id, client_entry& c,
               const client_inbox& sender, const std::string& from) {
    senders_.erase(c.handle.address());
    if (c.handle != sender) {
      self_->monitor(sender);
      // The connection taken over is closed (its gateway sends the refusal,
      // then disconnects): one session per client, whatever its peer does.
      if (c.address != in_process)
        self_->send(c.handle, reject_atom::value,
                    refuse({errc::not_authorized,
                            "another connection took over as " + id +
                                " (old connection from " + c.address + ")"}));
    }
    c.handle = sender;
    c.state = presence::connected;
    c.address = from;
    ++c.epoch;
    senders_[sender.address()] = id;
    ++report_->resumes;
    log_line("server", id + " is back from " + from + "; it resumes");
    event("back", id, from);
    // After the Welcome, which this handler's reply carries.
    self_->send(self_, round_atom::value, id);
    return welcome(c.index);
  }

  frame welcome(uint32_t index) const {
    return msg::encode(msg::welcome{index, options_.num_clients,
                                    options_.client_configs_yaml});
  }

  void install(snapshot_ptr s) {
    snapshot_ = std::move(s);
    view_ = snapshot_->view();
    auto p = chunk_plan::make(snapshot_->layout, options_.chunk_bytes);
    plan_.emplace(std::move(*p)); // the aggregator checked the same plan
  }

  void finish_round(round_record record, clock_type::time_point started) {
    record.wall_seconds = seconds_since(started);
    record.ended_unix_s = unix_seconds();
    report_->rounds.push_back(record);
    if (options_.federated_evaluation) // printed with the clients' figures
      held_round_ = record.round;
    else
      print_line(record);
    save_report();
  }

  /// Writes the report as it stands (status running), if asked to.
  void save_report() {
    if (options_.report_path.empty() || stopping_)
      return;
    report_->status = "running";
    report_->refusals = refusals_.count();
    report_->total_seconds = seconds_since(started_);
    if (auto ok = write_report(*report_, options_.report_path); !ok)
      log_line(log_level::error, "server", to_string(ok.err()));
    report_->status.clear();
  }

  /// A client event for the metrics file, if there is one.
  void event(const char* what, const std::string& id,
             const std::string& detail) {
    if (options_.metrics)
      options_.metrics->client(what, id, detail);
    if (options_.live && std::string_view{what} != "evaluated" &&
        std::string_view{what} != "rejected")
      options_.live->client_event(id, what, detail);
  }

  void event_end() {
    if (ended_logged_)
      return;
    ended_logged_ = true;
    const auto& why = report_->failure;
    std::string status = why.empty()                        ? "completed"
                         : why.rfind("interrupted", 0) == 0 ? "interrupted"
                                                            : "failed";
    if (options_.live)
      options_.live->ended(status);
    if (options_.metrics)
      options_.metrics->end(status, why);
  }

  void print_line(const round_record& record) const {
    if (options_.metrics)
      options_.metrics->round(record);
    if (options_.live) {
      options_.live->round_finished(record);
      options_.live->set_refusals(refusals_.count());
    }
    fedcaf::print_line(progress_line(record, options_.num_rounds));
    std::fflush(stdout);
  }

  /// Robust rules: says whose values the round dropped most, as shares
  /// of each update's values (an attacker's stand out near 100%).
  void log_trimmed(
      uint32_t round,
      const std::vector<std::pair<std::string, uint64_t>>& trimmed) const {
    uint64_t elements = 0;
    for (const auto& t : snapshot_->layout.tensors)
      elements += t.byte_size / dtype_bytes(t.type);
    if (trimmed.empty() || elements == 0)
      return;
    auto sorted = trimmed;
    std::sort(sorted.begin(), sorted.end(),
              [](const auto& a, const auto& b) { return a.second > b.second; });
    std::string line = "round " + std::to_string(round) + ": values dropped";
    for (size_t i = 0; i < sorted.size() && i < 4; ++i) {
      char share[32];
      std::snprintf(share, sizeof share, " %.1f%%",
                    100.0 * static_cast<double>(sorted[i].second) /
                        static_cast<double>(elements));
      line += (i ? ", " : " ") + sorted[i].first + share;
    }
    if (sorted.size() > 4)
      line += ", ...";
    log_line("server", line);
  }

  /// Prints the line of the round whose clients' evaluation was awaited.
  void print_held() {
    if (!held_round_)
      return;
    if (auto* r = record_of(*held_round_))
      print_line(*r);
    held_round_.reset();
    save_report(); // with the clients' evaluation
  }

  round_record* record_of(uint32_t round) {
    for (auto& r : report_->rounds)
      if (r.round == round)
        return &r;
    return nullptr;
  }

  /// A claimed sample count as a figure's weight: at most max_sample_size
  /// (if set) and 2^40 (so that weighted sums stay finite and exact).
  uint64_t capped(uint64_t samples) const {
    samples = std::min(samples, msg::max_evaluation_samples);
    return options_.max_sample_size
               ? std::min(samples, options_.max_sample_size)
               : samples;
  }

  std::optional<client_figures>
  train_figures_of(const std::vector<std::string>& contributors) {
    figures_sum sum;
    for (const auto& id : contributors)
      if (auto it = train_figures_.find(id);
          it != train_figures_.end() && !it->second.second.empty())
        sum.add(it->second.first, it->second.second);
    train_figures_.clear();
    if (sum.empty())
      return std::nullopt;
    return sum.mean();
  }

  /// Puts the evaluations so far into their round's record; prints the line
  /// of the model served now once every client expected has answered.
  void note_evaluations(const model_evaluations& of) {
    auto* r = record_of(of.round);
    if (!r) // the initial model: logged, not a round of the report
      return log_initial_evaluation(of);
    r->client_metrics = of.sum.mean();
    if (!r->test_accuracy || evaluated_by_clients_.count(r->round)) {
      evaluated_by_clients_.insert(r->round);
      r->test_accuracy = r->client_metrics->find("accuracy");
      r->test_loss = r->client_metrics->find("loss");
    }
    if (&of != &current_ || of.by.size() < expected_evaluations_)
      return;
    if (held_round_ == of.round)
      print_held();
    if (final_pass_)
      end_run("");
  }

  void log_initial_evaluation(const model_evaluations& of) {
    if (of.by.size() < expected_evaluations_)
      return;
    auto m = of.sum.mean();
    std::string line = "clients' evaluation of the initial model:";
    for (const auto& [name, value] : m.means)
      line += " " + name + " " + std::to_string(value);
    log_line("server", line);
  }

  void begin_final_pass() {
    final_pass_ = true;
    round_open_ = false;
    auto rs = announcement(false);
    rs.round = current_.round + 1;
    rs.evaluate_only = true;
    round_frame_ = msg::encode(rs);
    expected_evaluations_ = connected_count();
    for (auto& [id, c] : clients_)
      if (c.state == presence::connected)
        self_->send(c.handle, round_atom::value, round_frame_);
    log_line("server", "asking " + std::to_string(expected_evaluations_) +
                           " clients to evaluate the final model");
    self_->delayed_send(self_, options_.evaluation_timeout,
                        evaluated_atom::value);
  }

  void on_down(const caf::down_msg& m) {
    for (auto& [id, c] : clients_) {
      if (c.handle.address() != m.source || c.state != presence::connected)
        continue;
      senders_.erase(c.handle.address());
      c.state = presence::lost;
      if (secagg_) {
        secagg_->lost(id);
        secagg_waiting_.erase(id);
        advance_secagg();
      }
      ++c.epoch;
      if (stopping_) {
        if (connected_count() == 0)
          quit();
        return;
      }
      event("lost", id, self_->system().render(m.reason));
      log_line(log_level::warning, "server",
               id + " lost its connection (" +
                   self_->system().render(m.reason) + "); waiting " +
                   std::to_string(options_.reconnect_grace.count()) +
                   " ms for it to resume");
      self_->delayed_send(self_, options_.reconnect_grace, drop_atom::value, id,
                          c.epoch);
      return;
    }
  }

  size_t connected_count() const {
    size_t n = 0;
    for (const auto& kv : clients_)
      n += kv.second.state == presence::connected ? 1 : 0;
    return n;
  }

  size_t active_count() const {
    size_t n = 0;
    for (const auto& kv : clients_)
      n += kv.second.state != presence::dropped ? 1 : 0;
    return n;
  }

  frame refuse(const error& e) const { return refusals_.refuse(e); }

  server_actor::pointer self_ = nullptr;
  server_peers peers_;
  server_options options_;
  run_report* report_;
  snapshot_ptr snapshot_;
  std::optional<chunk_plan> plan_;
  const_model_view view_; ///< of snapshot_, for serving chunks
  std::map<std::string, client_entry> clients_;
  std::map<caf::actor_addr, std::string> senders_; ///< current connections
  std::set<std::string> resend_pending_; ///< lost while asked to resend
  frame round_frame_;                    ///< the open round's announcement
  bool round_open_ = false;
  std::set<std::string> chosen_; ///< the open round's clients
  uint32_t round_ = 0;
  clock_type::time_point started_;
  clock_type::time_point round_started_;
  uint64_t bytes_up_ = 0;
  uint64_t bytes_down_ = 0;
  uint64_t raw_down_ = 0; ///< the model bytes bytes_down_ carried, decoded
  /// This round's bytes on the wire per client: up (frames), down (payload).
  std::map<std::string, std::pair<uint64_t, uint64_t>> traffic_;
  std::vector<std::byte> encoded_; ///< compressed zfp downloads: a chunk's
  refusal_log refusals_;
  msg::metrics last_metrics_;
  bool stopping_ = false;
  // -- federated evaluation ----------------------------------------------------
  model_evaluations current_; ///< of the model served now
  std::optional<model_evaluations> previous_;
  size_t expected_evaluations_ = 0;         ///< clients the model was sent to
  std::optional<uint32_t> held_round_;      ///< its line awaits evaluations
  std::set<uint32_t> evaluated_by_clients_; ///< test_accuracy from clients
  bool final_pass_ = false;   ///< the final model is being evaluated
  bool ended_logged_ = false; ///< the metrics file has its end event
  // -- secure aggregation ------------------------------------------------------
  std::optional<secagg_coordinator> secagg_;
  /// Requests held until their phase ends, by client id.
  std::map<std::string, caf::typed_response_promise<frame>> secagg_waiting_;
  std::optional<caf::typed_response_promise<secagg::unmask_plan>>
      unmask_promise_;
  std::set<std::string> secagg_sent_away_;
  /// The open round's offers' training figures: samples and values.
  std::map<std::string, std::pair<uint64_t, msg::named_values>> train_figures_;
};

server_actor::behavior_type serving(server_actor::pointer self,
                                    std::shared_ptr<server_state> state,
                                    server_peers peers) {
  state->attach(self);
  return {
      [state](hello_atom, const frame& f) { return state->hello(f, "", ""); },
      [state](hello_atom, const frame& f, const std::string& address,
              const std::string& certificate_name) {
        return state->hello(f, address, certificate_name);
      },
      [state](fetch_atom, const frame& f) { return state->serve(f); },
      [self, state, peers](offer_atom, const frame& f) -> caf::result<frame> {
        if (auto refused = state->check_offer(f); !refused.empty())
          return refused;
        self->delegate(peers.scheduler, offer_atom::value, f);
        return caf::delegated<frame>{};
      },
      [self, state, peers](chunk_atom, frame& f) -> caf::result<frame> {
        if (!state->sender_id())
          return state->not_registered();
        state->count_upload(f);
        self->delegate(peers.aggregator, chunk_atom::value, *state->sender_id(),
                       std::move(f));
        return caf::delegated<frame>{};
      },
      [self, state, peers](end_atom, const frame& f) -> caf::result<frame> {
        if (!state->sender_id())
          return state->not_registered();
        self->delegate(peers.aggregator, end_atom::value, *state->sender_id(),
                       f);
        return caf::delegated<frame>{};
      },
      [self, state, peers](credit_atom, const frame& f) -> caf::result<frame> {
        if (!state->sender_id())
          return state->not_registered();
        self->delegate(peers.aggregator, credit_atom::value,
                       *state->sender_id(), f);
        return caf::delegated<frame>{};
      },
      [state](start_atom, uint32_t round,
              const std::vector<std::string>& chosen) {
        state->start_round(round, chosen);
      },
      [state](resend_atom, uint32_t round,
              const std::vector<std::string>& ids) {
        state->resend(round, ids);
      },
      [state](round_atom, const std::string& id) { state->announce_to(id); },
      [state](drop_atom, const std::string& id, uint64_t epoch) {
        state->drop(id, epoch);
      },
      [state](publish_atom, round_result& done) {
        return state->publish(std::move(done));
      },
      [state](task_atom, const std::string& id, uint32_t round) {
        state->task(id, round);
      },
      [state](stop_atom, const std::string& reason) { state->stop(reason); },
      [state](reject_atom, const std::string& id, const error& refusal) {
        state->tell_rejected(id, refusal);
      },
      [state](evaluated_atom, const frame& f) { return state->evaluated(f); },
      [state](secagg_atom, const frame& f) { return state->secagg_frame(f); },
      [state](unmask_atom, uint32_t round,
              const std::vector<std::string>& in_sum) {
        return state->secagg_unmask(round, in_sum);
      },
      [state](phase_end_atom, uint32_t round, uint32_t phase) {
        state->secagg_deadline(round, phase);
      },
      [state](evaluated_atom) { state->evaluation_overdue(); },
      [state](tick_atom) { state->quit(); },
  };
}

} // namespace

server_actor spawn_server(caf::actor_system& sys, snapshot_ptr initial,
                          server_peers peers, server_options options,
                          run_report* report) {
  auto state = std::make_shared<server_state>(std::move(initial), peers,
                                              std::move(options), report);
  return sys.spawn(serving, std::move(state), peers);
}

} // namespace fedcaf
