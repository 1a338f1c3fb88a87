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

#include "actors/aggregator_core.hpp"
#include "actors/aggregator_relay.hpp"
#include "actors/aggregator_rounds.hpp"
#include "actors/errors.hpp"
#include "actors/interfaces.hpp"
#include "actors/messages.hpp"
#include "fedcaf/accumulator.hpp"
#include "fedcaf/chunk_plan.hpp"
#include "fedcaf/log.hpp"
#include "fedcaf/update_check.hpp"

namespace fedcaf {

namespace {

/// idle_timeout or the rate window, the shorter one in use; zero: none.
std::chrono::milliseconds check_period(const aggregator_options& o) {
  auto rate = aggregator_core::rate_window(o);
  auto idle = o.idle_timeout;
  return idle.count() == 0 || rate.count() == 0 ? std::max(idle, rate)
                                                : std::min(idle, rate);
}

// The state machine, the streams, resets and memory modes: see
// aggregator.hpp. The state keeps the streams, the credits and the window;
// its parts (aggregator_core.hpp): aggregator_relay (a relay's parent's
// model, g held for the checks, a streaming relay's positions) and
// aggregator_rounds (finalize, publish, checkpoint).
class aggregator_state : private aggregator_core {
public:
  aggregator_state(std::shared_ptr<model_snapshot> initial,
                   aggregator_options options, std::unique_ptr<accumulator> acc,
                   std::unique_ptr<server_optimizer> optimizer)
      : aggregator_core(std::move(initial), std::move(options), std::move(acc),
                        std::move(optimizer)),
        relay_(
            core(),
            [this](const std::string& sender, const frame& f, promise* parked) {
              return consume(sender, f, parked);
            },
            [this] { advance_window(); }),
        rounds_(
            core(),
            [this] {
              forget_streams();
              relay_.forget_globals();
            },
            [this] { return relay_.holds_in_part(); }) {}

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
    if (r.digest != digest_ || r.bytes != plan_.total_bytes() ||
        r.chunks != plan_.chunk_count())
      return refuse(
          error{errc::manifest_mismatch, "offer of " + id +
                                             " does not match the global "
                                             "model's layout"});
    if (r.grid && !(r.summed && options_.grid_sums && acc_->takes_grid()))
      return refuse(
          error{errc::manifest_mismatch, "offer of " + id +
                                             " gives sums on a grid this "
                                             "server does not fold on"});
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
      opened->grid = r.grid;
      opened->update_id = r.update_id;
    }
    if (r.grid) // its sums are relative to g, even after a reset
      acc_->keep_originals();
    listeners_[stream_id] = notify;
    relay_.opened(notify, r.round);
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
    if (!parked)
      if (auto rp = relay_.park(sender, f, s, h))
        return *rp;
    auto c = checker_.expand(s, *encoded, model());
    if (!c) // a scale that is not finite poisons the update, as a NaN does
      return c.err().code == errc::poisoned_update
                 ? reject(h.stream_id, s, c.err())
                 : refuse_from(sender, c.err());
    if (auto placed = admissible(s, *c); !placed)
      return refuse_from(sender, placed.err());
    // A relay's int32 sums on the grid, unless this chunk says floats
    // (Chunk.floatSums: read only where the Welcome said so).
    bool grid = s.grid && !(options_.chunk_float_sums && h.float_sums);
    // A window-mode relay's round given up: no g to measure against.
    bool in_fold = grid || (acc_->measures() && relay_.has_global() &&
                            checker_.measured_in_fold(s, *c));
    // Measured by the pass that folds (its values' bounds tested there,
    // all inspect() would test): taken back out exactly if it is refused.
    // A window-mode relay's round given up holds no g: folded against
    // none, its sum goes nowhere.
    auto g = relay_.has_global() ? model() : std::span<const std::byte>{};
    auto checked =
        in_fold ? fold_measured(s, *c, g, grid)
                : checker_.inspect(s, *c, model(), acc_->overwritten_below(),
                                   relay_.has_global(), acc_->fold_split());
    if (in_fold)
      folded_bytes_ = c->bytes.size();
    if (checked && !in_fold) {
      auto folded = checker_.bounded(s, *c, model());
      if (auto ok = fold(s, folded, g); !ok)
        return ok.err().code == errc::poisoned_update // beyond the sum's range
                   ? reject(h.stream_id, s, ok.err())
                   : refuse_from(sender, ok.err());
      folded_bytes_ = folded.bytes.size();
    }
    if (!checked)
      return checked.err().code == errc::internal
                 ? refuse_from(sender, checked.err())
                 : reject(h.stream_id, s, checked.err());
    ledger_.folded(s, folded_bytes_, checked->distance_squared, now());
    checker_.record(s.client_id, h.sequence, *checked);
    return credit(s, h.stream_id, h.sequence, parked);
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
    relay_.forget_globals();
    acc_->restart(contributors);
    // A relay's int32 sums are relative to the round's g: the positions
    // averaged in place take it back.
    if (auto ok = acc_->restore_originals(models_.current().bytes); !ok)
      log_line(log_level::error, "aggregator",
               "the round's model could not be put back where the first "
               "pass averaged it (" +
                   ok.err().message +
                   "): relays' sums there are folded against those averages");
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

  /// A window-mode relay's sums went up: more may settle.
  void sums_sent_up() { advance_window(); }

  void set_server(aggregator_host server) { server_ = std::move(server); }
  /// A relay's part: its parent's model and g held for the checks.
  aggregator_relay& relay() { return relay_; }
  /// How a round ends: finalize, publish, checkpoint.
  aggregator_rounds& rounds() { return rounds_; }

private:
  /// What the aggregator's parts share (this state's own).
  aggregator_core& core() { return *this; }

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

  /// Folds chunk `c` of stream `s` into the accumulator against the
  /// global model `g` (empty: none held; a masked chunk into the ring
  /// sum). REQUIRES: admissible(s, c), checked.
  result<void> fold(const upload_record& s, const msg::chunk_view& c,
                    std::span<const std::byte> g) {
    const auto& h = c.header;
    if (options_.fold_delay.count() > 0)
      std::this_thread::sleep_for(options_.fold_delay);
    if (secure())
      return acc_->fold_ring(h.sequence, c.bytes);
    return s.summed ? acc_->fold_sum(h.sequence, c.bytes, s.weight, g)
                    : acc_->fold(h.sequence, c.bytes, s.weight, h.stream_id, g);
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

  /// Refuses the rest of the update of stream `sid` and tells the
  /// scheduler. What it folded stays where it went (each chunk passed
  /// every check there: finite, within the bound so far, in sequence), and
  /// it is awaited no more from its next chunk on: the other clients never
  /// upload again for it (a liar's partial upload costs the liar only).
  /// Not under secure aggregation: a masked prefix cannot stay (its masks
  /// cancel only with the whole update), the round's updates are collected
  /// again there.
  frame reject(uint64_t sid, upload_record& s, const error& why) {
    if ((streams_sums() || !secure()) && !s.rejected && !s.closed &&
        s.next_sequence > 0) {
      acc_->cut(s.next_sequence);
      advance_window();
    }
    upload_ledger::reject(s);
    relay_.unpark(sid);
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
                            " (a restarted process): the new one is not "
                            "taken, nor the rest of this one, this round"});
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

  /// Credits held until their position is settled (window mode).
  std::map<uint64_t, std::vector<std::pair<promise, uint64_t>>> held_;
  uint64_t folded_bytes_ = 0; ///< the bytes the last fold took
  aggregator_relay relay_;
  aggregator_rounds rounds_;
};

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
        return state->rounds().checkpoint(std::move(s));
      },
      [state](adopt_atom, relay_model& m) -> caf::result<snapshot_ptr> {
        auto adopted = state->relay().adopt(std::move(m));
        if (!adopted)
          return to_caf(adopted.err());
        return *adopted;
      },
      [state](arrived_atom, uint64_t upto) { state->relay().arrived(upto); },
      [state](resident_atom, uint64_t seq) { state->relay().filled(seq); },
      [state](sent_up_atom) { state->sums_sent_up(); },
      [state](connect_atom, const aggregator_host& server) {
        state->set_server(server);
      },
      [state](finalize_atom, uint32_t round, double sum_weight) {
        return state->rounds().finalize(round, sum_weight);
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
  if (!options.checkpoint.dir.empty()) { // files a checkpoint copies
    initial->bytes.write_back_released();
    if (optimizer)
      for (auto& [name, moment] : optimizer->moments())
        moment->write_back_released();
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
