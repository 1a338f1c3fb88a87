#include "actors/aggregator.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <caf/all.hpp>

#include "actors/errors.hpp"
#include "actors/interfaces.hpp"
#include "actors/messages.hpp"
#include "actors/wake_up.hpp"
#include "fedcaf/accumulator.hpp"
#include "fedcaf/chunk_plan.hpp"
#include "fedcaf/dummy_trainer.hpp" // anonymous_file_buffer
#include "fedcaf/log.hpp"
#include "fedcaf/stopwatch.hpp"
#include "fedcaf/update_check.hpp"
#include "protocol/chunk_checker.hpp"
#include "protocol/model_versions.hpp"
#include "protocol/relay_checks.hpp"
#include "protocol/upload_ledger.hpp"

namespace fedcaf {

namespace {

/// The window the minimum rate is measured over; zero: no minimum.
std::chrono::milliseconds rate_window(const aggregator_options& o) {
  return o.min_rate_bytes_per_s > 0 ? o.rate_window
                                    : std::chrono::milliseconds{};
}

/// idle_timeout or the rate window, the shorter one in use; zero: none.
std::chrono::milliseconds check_period(const aggregator_options& o) {
  auto rate = rate_window(o);
  auto idle = o.idle_timeout;
  return idle.count() == 0 || rate.count() == 0 ? std::max(idle, rate)
                                                : std::min(idle, rate);
}

// The state machine, the streams, resets and memory modes: see
// aggregator.hpp.
class aggregator_state {
public:
  using promise = caf::typed_response_promise<frame>;
  using parked_chunk = parked_chunks<promise>::chunk;

  aggregator_state(std::shared_ptr<model_snapshot> initial,
                   aggregator_options options, std::unique_ptr<accumulator> acc,
                   std::unique_ptr<server_optimizer> optimizer)
      : layout_(initial->layout), digest_(digest(initial->layout)),
        options_(std::move(options)), acc_(std::move(acc)),
        optimizer_(std::move(optimizer)), plan_(acc_->plan()),
        models_(std::move(initial)),
        checker_(layout_, plan_, options_.plan, options_.rule_cfg,
                 options_.compression),
        relay_(plan_, options_.plan.streams_sums()),
        ledger_(plan_.chunk_count(), options_.window, rate_window(options_)),
        refusals_("aggregator", options_.refusals) {
    // The published model stays within half of what one client's update
    // may carry (max_abs(1)), so that honest updates near it pass,
    // whatever a server optimizer or a client at the bound made of it.
    acc_->set_value_limit(static_cast<float>(checker_.max_abs(1.0) / 2));
    checker_.measure_global(models_.current().bytes);
  }

  /// Binds the state to its actor and starts the silence and rate checks,
  /// if any.
  void attach(aggregator_actor::pointer self) {
    self_ = self;
    if (check_period(options_).count() > 0)
      arm_silence_check();
  }

  /// Opens an upload for offer `r` (or resumes the client's stream of that
  /// round); `notify` hears how it ends. Refuses an offer for another layout.
  frame open(const upload_listener& notify, const upload_request& r) {
    const auto& id = r.client_id;
    if (auto early = relay_.refuse_offer(id)) // nobody holds it whole yet
      return refuse(*early);
    if (relay_.measuring()) // whole, its last bytes' word still on its way
      arrived(plan_.total_bytes());
    if (r.digest != digest_ || r.bytes != plan_.total_bytes() ||
        r.chunks != plan_.chunk_count())
      return refuse(
          error{errc::manifest_mismatch, "offer of " + id +
                                             " does not match the global "
                                             "model's layout"});
    if (auto known = ledger_.find(id, r.round)) {
      auto& s = *ledger_.find(*known);
      if (r.update_id != 0 && s.update_id != 0 && r.update_id != s.update_id &&
          !s.rejected)
        return replaced(*known, s);
      return resume(*known, s);
    }
    recycle_previous();
    auto stream_id =
        ledger_.open(id, r.round, r.weight, r.declared_norm,
                     checker_.scale_for(id, r.declared_norm), now());
    if (auto* opened = ledger_.find(stream_id)) {
      opened->summed = r.summed;
      opened->update_id = r.update_id;
    }
    listeners_[stream_id] = notify;
    if (relay_.stream_opened(r.round)) // its positions settle for it
      stream_listener_ = notify;
    return msg::encode(msg::accept{stream_id, options_.window});
  }

  /// Checks and folds chunk frame `f` from `sender`; answers its credit now
  /// or once its position is settled, or a refusal that changed nothing.
  /// `parked`: a chunk that waited for its position's global model (a
  /// window-mode relay), answered through this promise.
  caf::result<frame> consume(const std::string& sender, const frame& f,
                             promise* parked = nullptr) {
    auto encoded = msg::decode_chunk(f, checker_.max_payload());
    if (!encoded)
      return refuse_from(sender, encoded.err());
    const auto& h = encoded->header;
    auto owned = ledger_.owned(sender, h.stream_id);
    if (!owned)
      return refuse_from(sender, owned.err());
    auto& s = **owned;
    // A window-mode relay holds g only where it checks: fetched again
    // from its parent for the stream's next chunks, if open, while they
    // wait in the order they came.
    if (!parked && relay_.residency() && acc_->open(h.sequence))
      if (auto rp = park(sender, f, s, h))
        return *rp;
    auto c = checker_.expand(s, *encoded, model());
    if (!c) // a scale that is not finite poisons the update, as a NaN does
      return c.err().code == errc::poisoned_update
                 ? reject(h.stream_id, s, c.err())
                 : refuse_from(sender, c.err());
    if (auto placed = admissible(s, *c); !placed)
      return refuse_from(sender, placed.err());
    // A window-mode relay's round given up: no g to measure against.
    auto checked = checker_.inspect(s, *c, model(), acc_->overwritten_below(),
                                    relay_.has_global());
    if (!checked)
      return checked.err().code == errc::internal
                 ? refuse_from(sender, checked.err())
                 : reject(h.stream_id, s, checked.err());
    auto folded = checker_.bounded(s, *c, model());
    if (auto ok = fold(s, folded); !ok)
      return refuse_from(sender, ok.err());
    ledger_.folded(s, folded.bytes.size(), checked->distance_squared, now());
    checker_.record(s.client_id, h.sequence, *checked);
    return credit(s, h.stream_id, h.sequence, parked);
  }

  // -- a window-mode relay's global model, held position by position ---------

  /// A window-mode relay holds g only where it checks: chunk `h` of
  /// stream `s` (frame `f` from `sender`) waits, with the stream's next
  /// chunks, in the order they came, while g at its position is fetched
  /// again. Returns the promise it is answered through iff it waits.
  std::optional<promise> park(const std::string& sender, const frame& f,
                              const upload_record& s,
                              const msg::chunk_header& h) {
    auto sid = h.stream_id;
    bool waits = parked_.any(sid);
    bool next = waits ? h.sequence == parked_.next_of(sid)
                      : static_cast<bool>(upload_ledger::check_next(s, h));
    if (!next || (!waits && relay_.global_at(h.sequence)))
      return std::nullopt;
    relay_.global_at(h.sequence); // asked for as early as it is known
    auto rp = self_->make_response_promise<frame>();
    parked_.park(sid, {h.sequence, sender, f, rp});
    return rp;
  }

  /// Position `seq`'s g is resident again: the chunks that waited for it
  /// (each stream's, in order, up to one whose g is not in) are taken, and
  /// the window moves on if it waited.
  void global_filled(uint64_t seq) {
    if (!relay_.filled(seq))
      return;
    parked_.release([this](uint64_t at) { return relay_.present(at); },
                    [this](parked_chunk& p) { take_parked(p); });
    advance_window();
  }

  /// Takes parked chunk `p` as if it came now, and answers it.
  void take_parked(parked_chunk& p) {
    auto out = consume(p.sender, p.frame, &p.reply);
    if (out.flag == caf::rt_value)
      p.reply.deliver(out.value.get_as<frame>(0));
    else if (out.flag == caf::rt_error)
      p.reply.deliver(out.err);
  }

  /// Stream `sid` ended (rejected, or its round is over): its parked
  /// chunks are answered as chunks that come after that are.
  void unpark(uint64_t sid) {
    for (auto& p : parked_.take_stream(sid))
      take_parked(p);
  }

  /// Bytes [0, upto) of a relay's model adopted as arriving are in (all of
  /// them: it is whole): ||g|| is measured position by position (window
  /// mode: before they leave the cache), or whole at the end.
  void arrived(uint64_t upto) {
    if (!relay_.measuring())
      return;
    const auto& bytes = models_.current().bytes.bytes();
    auto [from, to] = relay_.measurable(upto);
    for (auto seq = from; seq < to; ++seq)
      checker_.measure_position(seq, bytes);
    relay_.measured(to);
    if (upto < plan_.total_bytes())
      return;
    if (relay_.residency())
      checker_.measure_end();
    else
      checker_.measure_global(models_.current().bytes);
    relay_.measured_all();
  }

  /// Lets go of g where the aggregator held it, and of the chunks that
  /// waited for it (a round over, or collected again).
  void forget_globals() {
    relay_.forget_globals();
    while (auto sid = parked_.first()) // answered as a chunk that comes now
      unpark(*sid);
  }

  /// Rejects streams that could send but sent nothing for idle_timeout,
  /// and streams slower than the minimum rate over the rate window.
  void check_silence() {
    for (const auto& [sid, why] : ledger_.stalled(
             now(), options_.idle_timeout, options_.min_rate_bytes_per_s))
      reject(sid, *ledger_.find(sid), why);
    arm_silence_check();
  }

  /// The round deadline passed with `ids` still uploading to `round`: ends
  /// (rejects, for `why`) the streams that owe what the accumulator waits
  /// for (upload_ledger::past_deadline). Returns the ids without a stream.
  std::vector<std::string> expire(uint32_t round,
                                  const std::vector<std::string>& ids,
                                  const error& why) {
    auto overdue = ledger_.past_deadline(round, ids, acc_->settled());
    for (auto sid : overdue.cut)
      reject(sid, *ledger_.find(sid), why);
    return overdue.without_stream;
  }

  /// The next silence and rate check, a quarter of the shorter of
  /// idle_timeout and the rate window from now.
  void arm_silence_check() {
    self_->delayed_send(self_, check_period(options_) / 4, tick_atom::value);
  }

  /// A resumed upload asks for a credit it is owed (window mode).
  caf::result<frame> owed_credit(const std::string& sender, const frame& f) {
    auto c = msg::decode<msg::credit>(f);
    if (!c)
      return refuse_from(sender, c.err());
    auto owned = ledger_.owned(sender, c->stream_id);
    if (!owned)
      return refuse_from(sender, owned.err());
    if (auto owed =
            upload_ledger::owes_credit(**owned, c->stream_id, c->sequence);
        !owed)
      return refuse_from(sender, owed.err());
    // Not progress: asking again for a credit moves no chunk (else a
    // client could keep its stream, and the round, open for ever).
    if (c->sequence < acc_->settled())
      return msg::encode(msg::credit{c->stream_id, c->sequence});
    auto rp = self_->make_response_promise<frame>();
    auto& waiting = held_[c->sequence];
    for (auto& [held_rp, stream] : waiting)
      if (stream == c->stream_id) { // asked again (a new connection): the
        held_rp = rp;               // answer goes to the latest request
        return rp;
      }
    waiting.emplace_back(rp, c->stream_id);
    ledger_.hold(**owned, now());
    return rp;
  }

  /// Forgets every upload of the open round; `contributors` clients will
  /// send theirs again.
  void reset(uint32_t contributors) {
    auto reset = msg::encode(
        error{errc::stream_reset, "the round's updates are collected again"});
    for (auto& [seq, waiting] : held_)
      for (auto& [rp, stream] : waiting)
        rp.deliver(reset);
    held_.clear();
    forget_streams();
    forget_globals();
    acc_->restart(contributors);
  }

  // -- secure aggregation ------------------------------------------------------

  bool secure() const { return options_.plan.secure; }
  void set_server(aggregator_host server) { server_ = std::move(server); }
  const aggregator_host& server() const { return server_; }

  /// The clients whose whole masked update is in the ring sum.
  std::vector<std::string> in_sum() const { return ledger_.in_sum(); }

  /// Removes the masks `plan` names from the ring sum and turns it into
  /// the round's mean (see accumulator::unmask), so that finalize applies
  /// the rule (and DP-FedAvg's noise, of std z S / updates) as to any sum.
  result<void> unmask(const secagg::unmask_plan& plan) {
    auto started = now();
    secagg::quantizer q{options_.secagg_clipping_range,
                        options_.secagg_quantization_bits};
    if (auto ok =
            acc_->unmask(q, plan, models_.current().bytes, optimizer_.get());
        !ok)
      return ok;
    std::chrono::duration<double> took = now() - started;
    log_line(log_level::debug, "aggregator",
             "unmasked " + std::to_string(plan.contributors) + " updates (" +
                 std::to_string(plan.self_seeds.size() + plan.pairwise.size()) +
                 " masks) in " + std::to_string(took.count()) + " s");
    return {};
  }

  /// Keeps what client `id` delivered to `round` and awaits no more of it
  /// (partial_updates: keep). Returns the chunks it delivered.
  uint64_t abandon(const std::string& id, uint32_t round) {
    auto delivered = ledger_.abandon(id, round);
    if (!delivered)
      return 0;
    acc_->cut(*delivered);
    advance_window();
    return *delivered;
  }

  /// Fewer clients than expected will contribute to the open round:
  /// `contributors` are the scheduler's participants, which no longer
  /// count the clients dropped mid-round; those that were cut off (see
  /// abandon) still count where they delivered (accumulator::expect).
  void expect(uint32_t contributors) {
    acc_->expect(contributors);
    advance_window();
  }

  /// Ends `sender`'s stream with frame `f` and tells its listener once.
  frame close(const std::string& sender, const frame& f) {
    auto end = msg::decode<msg::end_of_stream>(f);
    if (!end)
      return refuse_from(sender, end.err());
    auto owned = ledger_.owned(sender, end->stream_id);
    if (!owned)
      return refuse_from(sender, owned.err());
    auto& s = **owned;
    auto ended = ledger_.end(s, end->stream_id, end->chunk_count);
    if (!ended)
      return refuse_from(sender, ended.err());
    if (*ended == upload_ledger::ending::closed && checker_.update_bound() > 0)
      log_line(log_level::debug, "aggregator", checker_.distance_line(s));
    if (*ended == upload_ledger::ending::closed)
      self_->send(listeners_[end->stream_id], update_atom::value, s.client_id,
                  s.round);
    return msg::encode(msg::stream_closed{end->stream_id, s.bytes});
  }

  /// Publishes round `round`'s model (a relay's sum in ram mode: scaled to
  /// `sum_weight` at every position, see publish); fails iff a stream is
  /// still open or the accumulator cannot finish the round.
  result<snapshot_ptr> finalize(uint32_t round, double sum_weight) {
    if (auto open = ledger_.open_count(); open > 0)
      return error{errc::internal,
                   std::to_string(open) + " streams still open at finalize"};
    if (optimizer_) // FedBuff: the updates in this step, cut-off ones too
      optimizer_->set_updates(ledger_.updates());
    auto bytes = acc_->finalize(models_.current().bytes, optimizer_.get());
    if (!bytes)
      return bytes.err();
    return publish(round, std::move(*bytes), sum_weight);
  }

  /// Publishes `bytes` as round `round`'s model; the round's uploads are
  /// forgotten. A relay's sum (ram mode) with positions summed over
  /// another weight than `sum_weight` (its offer's upstream) is scaled to
  /// it in place first, before anyone else holds it (0: a mean, or a sum
  /// scaled as it settled). `failure`: non-empty iff the round failed and
  /// `bytes` are the model it started from.
  snapshot_ptr publish(uint32_t round, byte_buffer bytes, double sum_weight,
                       std::string failure = {}) {
    model_snapshot next;
    next.failure = std::move(failure);
    next.trimmed_values = ledger_.by_client(acc_->take_trimmed());
    // A window-mode relay's sums went up and were given back.
    bool held_in_part = relay_.residency() != nullptr;
    forget_streams();
    forget_globals();
    checker_.forget_round();
    next.bytes = std::move(bytes);
    auto weights = acc_->take_position_weights();
    if (sum_weight > 0 && !streams_sums()) // streamed: scaled as it settled
      relay_checks::scale_sum(plan_, next.bytes, weights, sum_weight);
    auto published = models_.publish(round, std::move(next));
    if (!held_in_part) // a relay's next round adopts its parent's model
      checker_.measure_global(published->bytes);
    return published;
  }

  /// A relay: `m` (its parent's model for the next round) becomes the
  /// global model the children's updates are checked and summed against,
  /// as a new version (model_versions::adopt): in disk mode a file of its
  /// own, copied a piece at a time with the pages released. While its
  /// bytes still come (the relay's download goes on, taken without a
  /// copy), it is measured as they do (arrived()), and offers wait until
  /// it is whole. Returns it, or an error iff it cannot be adopted.
  result<snapshot_ptr> adopt(relay_model m) {
    forget_globals(); // of the model before
    bool arriving = m.arrival && !m.arrival->whole();
    auto adopted =
        models_.adopt(std::move(m.model), // its only holder: taken
                      options_.plan.storage_dir.empty()
                          ? std::string{}
                          : global_model_file(options_.plan, ::getpid()),
                      arriving);
    if (!adopted)
      return adopted;
    auto measuring = relay_.adopt(
        m, wake_up<aggregator_actor, uint64_t>(self_, resident_atom::value),
        wake_up<aggregator_actor>(self_, sent_up_atom::value));
    if (!measuring)
      checker_.measure_global((*adopted)->bytes);
    else if (relay_.residency()) // measured as it arrives (arrived())
      checker_.measure_begin();
    return adopted;
  }

  /// A window-mode relay's sums went up: more may settle.
  void sums_sent_up() { advance_window(); }

  /// Writes the checkpoint `state` describes (its round just published):
  /// the global model and the server optimizer's state with it. Returns
  /// "" or why it could not be written.
  std::string checkpoint(checkpoint_state state) {
    state.model_version = models_.version();
    state.optimizer_steps = optimizer_ ? optimizer_->steps() : 0;
    std::vector<std::pair<std::string, const byte_buffer*>> moments;
    if (optimizer_)
      for (const auto& [name, buffer] : optimizer_->moments())
        moments.emplace_back(name, buffer);
    auto started = steady_clock::now();
    auto ok =
        write_checkpoint(options_.checkpoint, state,
                         {&models_.current().layout, &models_.current().bytes,
                          models_.current().bytes.mapped_file()},
                         moments);
    if (!ok)
      return ok.err().message;
    log_line(log_level::debug, "aggregator",
             "checkpoint of round " + std::to_string(state.round) + " in " +
                 std::to_string(seconds_since(started)) + " s");
    return {};
  }

  /// Secure aggregation failed to unmask round `round` (`why`): publishes
  /// the model unchanged (the round is skipped: one client's garbage must
  /// not end everyone's run). In window and disk modes, whose model's bytes
  /// hold the masked sum, each position's old bytes come back from the
  /// file they were kept in; fails iff they could not be kept.
  result<snapshot_ptr> skip(uint32_t round, const std::string& why) {
    auto bytes = acc_->keep(models_.current().bytes);
    if (!bytes) {
      error e{errc::internal, "round " + std::to_string(round) + ": " + why +
                                  "; " + bytes.err().message};
      log_line(log_level::error, "aggregator", e.message);
      return e;
    }
    log_line(log_level::error, "aggregator",
             "round " + std::to_string(round) +
                 ": secure aggregation failed: " + why +
                 "; the global model stays as it was");
    return publish(round, std::move(*bytes), 0,
                   "secure aggregation failed: " + why);
  }

private:
  /// The actor's clock: virtual time under CAF's test coordinator.
  upload_record::time_point now() const { return self_->clock().now(); }

  /// The global model's bytes, as the round's updates are checked against.
  std::span<const std::byte> model() const {
    return models_.current().bytes.bytes();
  }

  /// Returns ok iff chunk `c` is the next one of open stream `s`, of its
  /// round, in its plan slot, and open in the accumulator.
  result<void> admissible(const upload_record& s,
                          const msg::chunk_view& c) const {
    const auto& h = c.header;
    if (auto next = upload_ledger::check_next(s, h); !next)
      return next;
    if (auto ok = checker_.placed(c); !ok)
      return ok;
    FEDCAF_REQUIRE(acc_->open(h.sequence), errc::out_of_range, h.sequence,
                   acc_->settled(), options_.window);
    return {};
  }

  /// Folds chunk `c` of stream `s` into the accumulator (a masked chunk
  /// into the ring sum). REQUIRES: admissible(s, c), checked.
  result<void> fold(const upload_record& s, const msg::chunk_view& c) {
    const auto& h = c.header;
    if (options_.fold_delay.count() > 0)
      std::this_thread::sleep_for(options_.fold_delay);
    if (secure())
      return acc_->fold_ring(h.sequence, c.bytes);
    return s.summed ? acc_->fold_sum(h.sequence, c.bytes, s.weight)
                    : acc_->fold(h.sequence, c.bytes, s.weight, h.stream_id);
  }

  /// The credit for chunk `seq` of stream `sid` (of `s`), just folded: now
  /// if its position is settled, else once it is.
  caf::result<frame> credit(upload_record& s, uint64_t sid, uint64_t seq,
                            promise* parked) {
    if (seq < acc_->settled())
      return msg::encode(msg::credit{sid, seq});
    auto rp = parked ? *parked : self_->make_response_promise<frame>();
    held_[seq].emplace_back(rp, sid);
    ledger_.hold(s, now());
    advance_window();
    return rp;
  }

  /// Refuses the whole update of stream `sid` and tells the scheduler.
  frame reject(uint64_t sid, upload_record& s, const error& why) {
    // A streaming relay never collects its children's updates again: what
    // a refused one folded stays where it went (it passed every check
    // there), and it is awaited no more from its next chunk on.
    if (streams_sums() && !s.rejected && !s.closed && s.next_sequence > 0) {
      acc_->cut(s.next_sequence);
      advance_window();
    }
    upload_ledger::reject(s);
    unpark(sid);
    if (why.code == errc::poisoned_update && options_.poisoned)
      options_.poisoned->fetch_add(1, std::memory_order_relaxed);
    log_line(log_level::warning, "aggregator",
             "rejected the update of " + s.client_id + " (stream " +
                 std::to_string(sid) + ", round " + std::to_string(s.round) +
                 "): " + why.message);
    self_->send(listeners_[sid], reject_atom::value, s.client_id, s.round,
                s.next_sequence, why);
    return refuse({why.code, s.client_id + ": " + why.message});
  }

  /// An offer of another update (another updateId) where `s` (stream
  /// `sid`) is the client's of the round: a process that lost the first
  /// and trained again. The two are never mixed: a whole one stays and the
  /// new one is refused; a partial one is rejected (its chunks leave the
  /// sum) and the client sits the round out.
  frame replaced(uint64_t sid, upload_record& s) {
    if (s.closed)
      return refuse(
          {errc::not_in_round, s.client_id + " delivered its update of round " +
                                   std::to_string(s.round) +
                                   " whole already; another one is not taken"});
    return reject(sid, s,
                  error{errc::not_in_round,
                        "another update was offered while this one was cut "
                        "off at chunk " +
                            std::to_string(s.next_sequence) +
                            " (a restarted process); neither is taken this "
                            "round"});
  }

  /// Answers a repeated offer with where stream `stream_id` stands. Not
  /// progress: the idle timeout (idle_timeout_s + reconnect_grace_s)
  /// already leaves a reconnecting client its grace, and an offer repeated
  /// without chunks must not keep the round open.
  frame resume(uint64_t stream_id, const upload_record& s) {
    auto next = ledger_.next_chunk(s);
    auto owed = s.closed ? next : std::min(next, acc_->settled());
    log_line("aggregator", s.client_id + " resumes stream " +
                               std::to_string(stream_id) + " at chunk " +
                               std::to_string(next) + " of " +
                               std::to_string(plan_.chunk_count()));
    return msg::encode(msg::accept{stream_id, options_.window, next, owed});
  }

  /// Once the server has dropped the global model before the current one,
  /// its memory becomes the next sum or model: no allocation, no page
  /// faults.
  void recycle_previous() { acc_->recycle(take_previous()); }

  /// The memory of the model published before the current one, once
  /// nobody else holds it (an empty buffer otherwise).
  byte_buffer take_previous() { return models_.take_previous(); }

  /// Settles every complete position (into the global model, or the
  /// ring sum into its place there) and returns the credits held for it.
  void advance_window() {
    if (acc_->ready())
      recycle_previous();
    while (acc_->ready()) {
      auto seq = acc_->settled();
      if (!relay_.may_settle(seq)) // woken by sent_up_atom, resident_atom
        break;
      relay_.settling(seq);
      acc_->settle_next(models_.current().bytes, optimizer_.get(), secure());
      relay_.settled(seq);
      stream_position(seq);
      if (options_.plan.in_place && server_) { // before the credits go out
        const auto& e = plan_.extent(seq);
        self_->send(server_, overwrite_atom::value, models_.current().version,
                    e.model_offset + e.bytes);
      }
      auto at = now();
      for (auto& [rp, stream] : held_[seq]) {
        rp.deliver(msg::encode(msg::credit{stream, seq}));
        ledger_.release(stream, at);
      }
      held_.erase(seq);
    }
  }

  bool streams_sums() const { return options_.plan.streams_sums(); }

  /// A streaming relay: position `seq`'s weighted sum just settled in the
  /// model's memory. It is scaled to the round's weight W, that of
  /// position 0 (where a child cut or refused since did not deliver: its
  /// sum times W over its own weight; where nobody did, it holds g, which
  /// then weighs W), and the scheduler hears that the bytes up to its end
  /// may go up.
  void stream_position(uint64_t seq) {
    auto factor = relay_.stream_scale(seq, acc_->settled_weight(seq));
    if (!factor || !stream_listener_)
      return; // nothing in position 0 (the round sits out), or given up
    const auto& e = plan_.extent(seq);
    if (*factor != 1.0)
      relay_checks::scale_floats(
          models_.current().bytes.bytes().subspan(e.model_offset, e.bytes),
          static_cast<float>(*factor));
    self_->send(stream_listener_, settled_atom::value, relay_.stream_round(),
                e.model_offset + e.bytes, relay_.stream_weight());
  }

  /// Forgets the round's streams and who listens to them.
  void forget_streams() {
    ledger_.forget();
    listeners_.clear();
  }

  frame refuse(const error& e) const { return refusals_.refuse(e); }
  frame refuse_from(const std::string& sender, const error& e) const {
    return refusals_.refuse(e, sender);
  }

  aggregator_actor::pointer self_ = nullptr;
  manifest layout_;
  uint64_t digest_;
  aggregator_options options_;
  std::unique_ptr<accumulator> acc_;            ///< the kind the plan names
  std::unique_ptr<server_optimizer> optimizer_; ///< null: FedAvg
  const chunk_plan& plan_;                      ///< the accumulator's
  model_versions models_; ///< the last published and the one before
  chunk_checker checker_;
  /// A relay's parent's model, g held for the checks, a streaming
  /// relay's round.
  relay_checks relay_;
  /// A streaming relay: who hears its round's positions settle (its
  /// scheduler).
  upload_listener stream_listener_;
  upload_ledger ledger_;
  /// Per stream: who is told how it ended (its scheduler).
  std::map<uint64_t, upload_listener> listeners_;
  /// Credits held until their position is settled (window mode).
  std::map<uint64_t, std::vector<std::pair<promise, uint64_t>>> held_;
  /// A window-mode relay: chunks that wait for g at their position.
  parked_chunks<promise> parked_;
  aggregator_host server_; ///< asked for SecAgg+'s plan, told what settled
  refusal_log refusals_;
};

/// `next`, its error logged.
result<snapshot_ptr> logged(result<snapshot_ptr> next) {
  if (!next)
    log_line(log_level::error, "aggregator", to_string(next.err()));
  return next;
}

aggregator_actor::behavior_type
aggregating(aggregator_actor::pointer self,
            std::shared_ptr<aggregator_state> state) {
  state->attach(self);
  return {
      [state](open_atom, const upload_listener& notify,
              const upload_request& r) { return state->open(notify, r); },
      [state](chunk_atom, const std::string& sender, const frame& f) {
        return state->consume(sender, f);
      },
      [state](end_atom, const std::string& sender, const frame& f) {
        return state->close(sender, f);
      },
      [state](credit_atom, const std::string& sender, const frame& f) {
        return state->owed_credit(sender, f);
      },
      [state](tick_atom) { state->check_silence(); },
      [state](expire_atom, uint32_t round, const std::vector<std::string>& ids,
              const error& why) { return state->expire(round, ids, why); },
      [state](reset_atom, uint32_t contributors) {
        state->reset(contributors);
      },
      [state](abandon_atom, const std::string& id, uint32_t round) {
        return state->abandon(id, round);
      },
      [state](expect_atom, uint32_t contributors) {
        state->expect(contributors);
      },
      [state](checkpoint_atom, checkpoint_state& s) {
        return state->checkpoint(std::move(s));
      },
      [state](adopt_atom, relay_model& m) -> caf::result<snapshot_ptr> {
        auto adopted = state->adopt(std::move(m));
        if (!adopted)
          return to_caf(adopted.err());
        return *adopted;
      },
      [state](arrived_atom, uint64_t upto) { state->arrived(upto); },
      [state](resident_atom, uint64_t seq) { state->global_filled(seq); },
      [state](sent_up_atom) { state->sums_sent_up(); },
      [state](connect_atom, const aggregator_host& server) {
        state->set_server(server);
      },
      [self, state](finalize_atom, uint32_t round,
                    double sum_weight) -> caf::result<snapshot_ptr> {
        if (!state->secure()) {
          auto next = logged(state->finalize(round, sum_weight));
          if (!next)
            return to_caf(next.err());
          return *next;
        }
        auto rp = self->make_response_promise<snapshot_ptr>();
        auto deliver = [rp](result<snapshot_ptr> next) mutable {
          if (!next)
            rp.deliver(to_caf(next.err()));
          else
            rp.deliver(*next);
        };
        self->request(state->server(), caf::infinite, unmask_atom::value, round,
                      state->in_sum())
            .then(
                [state, deliver, round,
                 sum_weight](secagg::unmask_plan& plan) mutable {
                  auto ok = state->unmask(plan);
                  deliver(ok ? logged(state->finalize(round, sum_weight))
                             : state->skip(round, ok.err().message));
                },
                [state, deliver, round](caf::error& e) mutable {
                  deliver(state->skip(round, caf::to_string(e)));
                });
        return rp;
      },
  };
}

} // namespace

result<aggregator_actor>
spawn_aggregator(caf::actor_system& sys,
                 std::shared_ptr<model_snapshot> initial,
                 aggregator_options options) {
  auto plan = chunk_plan::make(initial->layout, options.chunk_bytes);
  if (!plan)
    return plan.err();
  const auto& p = options.plan;
  auto acc =
      accumulator::make(initial->layout, std::move(*plan), p, options.window);
  if (!acc)
    return acc.err();
  std::unique_ptr<server_optimizer> optimizer;
  auto noisy = options.rule_cfg.dp_noise_multiplier > 0;
  if (p.server_optimizer) {
    auto type = common_floating_dtype(initial->layout);
    if (!type)
      return type.err();
    auto made = server_optimizer::make(
        p.rule, options.rule_cfg, *type,
        initial->layout.total_bytes() / dtype_bytes(*type), p.storage_dir);
    if (!made)
      return made.err();
    optimizer = std::move(*made);
    if (noisy)
      optimizer->set_noise(options.rule_cfg.dp_noise_multiplier,
                           options.rule_cfg.dp_clip_norm,
                           options.rule_cfg.dp_seed);
  }
  if (options.resume && optimizer) {
    auto moments = optimizer->moments();
    if (auto ok = read_moments(*options.resume, moments); !ok)
      return ok.err();
    optimizer->restore_steps(options.resume->state.optimizer_steps);
  }
  if (options.compression.up || options.compression.down)
    for (const auto& t : initial->layout.tensors)
      if (t.type != dtype::float32)
        return error{errc::unsupported_dtype,
                     "compression needs a float32 model; tensor " + t.name +
                         " is " + std::string{dtype_name(t.type)}};
  auto kept = kept_tensors(initial->layout, options.rule_cfg.tensor_rules);
  if (!kept)
    return kept.err();
  if (std::find(kept->begin(), kept->end(), true) != kept->end() &&
      (p.secure || noisy))
    return error{errc::bad_config,
                 "server_configs.aggregator_kwargs.tensor_rules: keep is "
                 "not applied under " +
                     std::string{p.secure ? "secure aggregation (masked "
                                            "uploads are summed as sent)"
                                          : "dp_fedavg (its noise is added "
                                            "to every element)"}};
  if (p.secure)
    for (const auto& t : initial->layout.tensors) {
      if (t.type != dtype::float32)
        return error{errc::unsupported_dtype,
                     "secure aggregation needs a float32 model; tensor " +
                         t.name + " is " + std::string{dtype_name(t.type)}};
      if (t.held) // its counts would be clipped to clipping_range
        return error{errc::unsupported_dtype,
                     "secure aggregation quantizes every value into "
                     "+-clipping_range: tensor " +
                         t.name + " is " + std::string{dtype_name(*t.held)} +
                         " (leave integer and bool buffers out of the model "
                         "sent, or run without secure aggregation)"};
    }
  auto state = std::make_shared<aggregator_state>(
      std::move(initial), options, std::move(*acc), std::move(optimizer));
  return sys.spawn(aggregating, std::move(state));
}

} // namespace fedcaf
