#include "actors/aggregator.hpp"

#include <algorithm>
#include <atomic>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include <caf/all.hpp>

#include "actors/errors.hpp"
#include "actors/interfaces.hpp"
#include "actors/messages.hpp"
#include "fedcaf/chunk_plan.hpp"
#include "fedcaf/delta_codec.hpp"
#include "fedcaf/element.hpp"
#include "fedcaf/fedavg_accumulator.hpp"
#include "fedcaf/log.hpp"
#include "fedcaf/stopwatch.hpp"
#include "fedcaf/update_check.hpp"
#include "fedcaf/window_accumulator.hpp"

namespace fedcaf {

namespace {

/// One open upload: who sends it, with what weight, and where it stands.
struct upload_stream {
  std::string client_id;
  uint32_t round = 0;
  double weight = 0;
  uint64_t next_sequence = 0;
  uint64_t bytes = 0;
  upload_listener notify; ///< told how the stream ended (its scheduler)
  bool closed = false;    ///< kept until finalize: a repeated end is answered
  bool rejected = false;  ///< poisoned, too far, or silent: refused
  double distance_squared = 0; ///< from the global model, so far
  /// The last chunk that arrived or credit that went out: the stream could
  /// send from then on.
  steady_clock::time_point last_progress = steady_clock::now();
  uint32_t held = 0; ///< window mode: its credits held by the window
  /// norm_bound: ||x - g|| as its offer declared it, and the factor its
  /// update is scaled by (x' = g + scale (x - g)).
  double declared_norm = 0;
  double scale = 1;
};

/// A chunk of a client's update that passed the content checks: its
/// distance from the global model, and its checksum (verified on decoding),
/// recorded in window mode with max_update_norm.
struct checked_chunk {
  double distance_squared = 0;
  uint64_t checksum = 0;
};

// State machine: collecting (streams open and close) -> finalize_atom ->
// collecting the next round. A chunk is validated in full (its place in the
// stream, then its content) before it touches the accumulator, so a refused
// chunk leaves it unchanged, and only a chunk that is folded counts towards
// the update's distance.
//
// Per stream: open -(chunks from its own client only)-> closed | rejected.
// A chunk, end or credit from another client than the one that opened the
// stream is refused (not_authorized) without touching it. A chunk with NaN
// or infinite values, or one that takes the update's distance from the
// global model past aggregator_kwargs.max_update_norm, rejects the whole
// update (poisoned_update); so does silence: nothing for idle_timeout
// (idle_timeout_s + reconnect_grace_s) while the stream could send (it
// holds a credit: for its next chunk, or all of them for its end), counted
// from its last chunk or the last credit the window returned to it. A
// stream waiting for the window (for slower clients) is never silent. The
// stream is
// closed for good (later frames: unknown_stream; its end: poisoned_update),
// the scheduler is told (reject_atom with the chunks already folded), and
// the client leaves the round: with nothing folded the round expects one
// update fewer; otherwise its share cannot be taken out of the sum, and the
// round's updates are collected again from the others (as for a client
// dropped mid-upload, whatever partial_updates says: a rejected update never
// stays in the model). Under the AsyncScheduler see async_scheduler.cpp.
//
// The distance is measured against the global model's bytes at the chunk's
// place. ram mode: the global model changes only at finalize, so they are
// the round's old model. window mode: position k is averaged into the model
// in place only once every expected client folded chunk k, so a chunk that
// arrives finds the old model at its place; except after a reset, when the
// positions below averaged_high_ already hold that first average. Their
// distance is then the one recorded when the client first sent them
// (first_pass_), and the client must send the same bytes again (same
// checksum; otherwise its update is refused): a resend re-checks nothing it
// cannot check, and cannot change an update that passed.
//
// A reset in window mode re-averages the positions below averaged_high_ from
// the chunks sent again: exact for FedAvg (with or without DP noise: the
// position is overwritten with the new average). A stateful server
// optimizer (FedAvgM, FedAdagrad, FedAdam, FedYogi) steps those positions a
// second time (from the once-stepped model, its moments advanced twice):
// ram mode has no such error.
//
// Resuming: a client that reconnects offers again; the offer of a client
// whose stream of that round exists answers with where the stream stands
// (next chunk, first credit owed), so nothing that arrived is sent twice.
// reset_atom forgets every upload of the round (a client was dropped after
// folding chunks: its share cannot be taken out of a sum), and the
// scheduler has the survivors send again.
//
// Memory modes. ram: a model-sized sum (fedavg_accumulator); a chunk's
// credit returns as soon as it is folded. window: only `window` positions are
// open (window_accumulator); the credit for chunk k returns when position k
// has been averaged into the global model, so no client runs ahead of the
// window. The global model is then written in place: safe because a position
// completes only after every expected client opened its stream, that is,
// after every client finished downloading this round's model, and the next
// round's downloads start only after finalize.
class aggregator_state {
public:
  aggregator_state(std::shared_ptr<model_snapshot> initial,
                   aggregator_options options,
                   std::optional<fedavg_accumulator> ram,
                   std::optional<window_accumulator> window,
                   std::unique_ptr<server_optimizer> optimizer)
      : layout_(initial->layout), digest_(digest(initial->layout)),
        version_(initial->version), options_(std::move(options)),
        ram_(std::move(ram)), window_(std::move(window)),
        optimizer_(std::move(optimizer)),
        plan_(ram_ ? ram_->plan() : window_->plan()),
        current_(std::move(initial)),
        refusals_("aggregator", options_.refusals) {
    // The published model stays within half of what one client's update
    // may carry (max_abs(1)), so that honest updates near it pass,
    // whatever a server optimizer or a client at the bound made of it.
    auto limit = static_cast<float>(max_abs(1.0) / 2);
    if (ram_)
      ram_->set_value_limit(limit);
    if (window_)
      window_->set_value_limit(limit);
    if (options_.compression.up)
      max_payload_ =
          std::max(max_payload_, encoded_bound(options_.compression,
                                               plan_.chunk_bytes() / 4 + 1));
  }

  void attach(aggregator_actor::pointer self) {
    self_ = self;
    if (options_.idle_timeout.count() > 0)
      arm_silence_check();
  }

  frame open(const upload_listener& notify, const upload_request& r) {
    const auto& id = r.client_id;
    auto round = r.round;
    auto declared_norm = r.declared_norm;
    if (r.digest != digest_ || r.bytes != plan_.total_bytes() ||
        r.chunks != plan_.chunk_count())
      return refuse(
          error{errc::manifest_mismatch, "offer of " + id +
                                             " does not match the global "
                                             "model's layout"});
    for (auto& [sid, s] : streams_)
      if (s.client_id == id && s.round == round)
        return resume(sid, s);
    recycle_previous();
    auto stream_id = next_stream_id_++;
    auto& s = streams_[stream_id];
    s = {id, round, r.weight, 0, 0, notify, false};
    s.declared_norm = declared_norm;
    auto bound = options_.rule_cfg.norm_bound;
    if (bound > 0 && declared_norm > bound) {
      s.scale = bound / declared_norm;
      log_line(log_level::debug, "aggregator",
               id + " declared an update of norm " +
                   std::to_string(declared_norm) + ", scaled to norm_bound " +
                   std::to_string(bound));
    }
    return msg::encode(msg::accept{stream_id, options_.window});
  }

  caf::result<frame> consume(const std::string& sender, const frame& f) {
    auto encoded = msg::decode_chunk(f, max_payload_);
    if (!encoded)
      return refuse_from(sender, encoded.err());
    const auto& h = encoded->header;
    auto it = streams_.find(h.stream_id);
    if (auto owned = owner_check(sender, it, h.stream_id); !owned)
      return refuse_from(sender, owned.err());
    auto& s = it->second;
    auto c = expand(s, *encoded);
    if (!c) // a scale that is not finite poisons the update, as a NaN does
      return c.err().code == errc::poisoned_update
                 ? reject(it->first, s, c.err())
                 : refuse_from(sender, c.err());
    if (auto placed = admissible(s, *c); !placed)
      return refuse_from(sender, placed.err());
    auto checked = inspect(s, *c);
    if (!checked)
      return checked.err().code == errc::internal
                 ? refuse_from(sender, checked.err())
                 : reject(it->first, s, checked.err());
    if (auto ok = fold(s, bounded(s, *c)); !ok)
      return refuse_from(sender, ok.err());
    commit(s, h.sequence, *checked);
    if (ram_)
      return msg::encode(msg::credit{h.stream_id, h.sequence});
    auto rp = self_->make_response_promise<frame>();
    held_[h.sequence].emplace_back(rp, h.stream_id);
    ++s.held;
    advance_window();
    return rp;
  }

  /// Rejects streams that could send but sent nothing for idle_timeout.
  void check_silence() {
    auto now = steady_clock::now();
    for (auto& [sid, s] : streams_) {
      if (!could_send(s) || now - s.last_progress <= options_.idle_timeout)
        continue;
      reject(sid, s,
             {errc::timeout,
              "no chunk for " + std::to_string(options_.idle_timeout.count()) +
                  " ms (idle_timeout_s + reconnect_grace_s) while it could "
                  "send"});
    }
    arm_silence_check();
  }

  void arm_silence_check() {
    self_->delayed_send(self_, options_.idle_timeout / 4, tick_atom::value);
  }

  /// A resumed upload asks for a credit it is owed (window mode).
  caf::result<frame> owed_credit(const std::string& sender, const frame& f) {
    auto c = msg::decode<msg::credit>(f);
    if (!c)
      return refuse_from(sender, c.err());
    auto it = streams_.find(c->stream_id);
    if (auto owned = owner_check(sender, it, c->stream_id); !owned)
      return refuse_from(sender, owned.err());
    if (it == streams_.end() || it->second.closed ||
        c->sequence >= it->second.next_sequence)
      return refuse_from(
          sender, {errc::unknown_stream,
                   "no credit owed for chunk " + std::to_string(c->sequence) +
                       " of stream " + std::to_string(c->stream_id)});
    // Not progress: asking again for a credit moves no chunk (else a
    // client could keep its stream, and the round, open for ever).
    if (ram_ || c->sequence < window_->low())
      return msg::encode(msg::credit{c->stream_id, c->sequence});
    auto rp = self_->make_response_promise<frame>();
    auto& waiting = held_[c->sequence];
    for (auto& [held_rp, stream] : waiting)
      if (stream == c->stream_id) { // asked again (a new connection): the
        held_rp = rp;               // answer goes to the latest request
        return rp;
      }
    waiting.emplace_back(rp, c->stream_id);
    ++it->second.held;
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
    streams_.clear();
    if (ram_)
      ram_->discard();
    else
      window_->restart(std::max(1u, contributors));
  }

  // -- secure aggregation ------------------------------------------------------

  bool secure() const { return options_.plan.secure; }
  void set_server(unmask_planner server) { server_ = std::move(server); }
  const unmask_planner& server() const { return server_; }

  /// Adds a masked chunk to the ring sum, element by element mod 2^32: in
  /// the sum's storage (ram), or in its window slot (window, disk).
  result<void> fold_masked(uint64_t seq, std::span<const std::byte> bytes) {
    return window_ ? window_->fold_ring(seq, bytes)
                   : ram_->fold_ring(seq, bytes);
  }

  /// The clients whose whole masked update is in the ring sum.
  std::vector<std::string> in_sum() const {
    std::vector<std::string> ids;
    for (const auto& [sid, s] : streams_)
      if (s.closed && !s.rejected)
        ids.push_back(s.client_id);
    return ids;
  }

  /// Removes the masks `plan` names from the ring sum, chunk by chunk. ram:
  /// writes each position's weighted mean, times the updates in the sum,
  /// in its place as a sum of that weight, so that finalize applies the
  /// rule (and DP-FedAvg's noise, of std z S / updates) as to any sum.
  /// window, disk: the ring sum waits in the global model's own storage
  /// (see advance_window); each position becomes its mean, after the noise
  /// if any (these modes run FedAvg only: a server optimizer would need the
  /// old model the sum overwrote).
  result<void> unmask(const secagg::unmask_plan& plan) {
    auto started = steady_clock::now();
    secagg::quantizer q{options_.secagg_clipping_range,
                        options_.secagg_quantization_bits};
    auto updates = static_cast<float>(plan.contributors);
    auto limit = static_cast<float>(max_abs(1.0) / 2);
    std::vector<std::span<std::byte>> storage(plan_.chunk_count());
    for (uint64_t seq = 0; seq < plan_.chunk_count(); ++seq) {
      const auto& e = plan_.extent(seq);
      storage[seq] =
          ram_ ? ram_->ring(seq) // zeroes if nobody's chunk came
               : current_->bytes.bytes().subspan(e.model_offset, e.bytes);
    }
    // The masks of different chunks are independent: every core takes
    // chunks in turn (the actor waits; this is the round's last step).
    std::atomic<uint64_t> next{0}, beyond{0};
    auto work = [&] {
      for (auto seq = next++; seq < plan_.chunk_count(); seq = next++) {
        auto bytes = storage[seq];
        beyond += secagg::unmask_chunk_in_place(
            q, plan, plan_.extent(seq).model_offset / 4, bytes,
            ram_ ? updates : 1.0);
      }
    };
    {
      std::vector<std::jthread> helpers;
      for (unsigned k = 1;
           k < std::min(4u, std::thread::hardware_concurrency()); ++k)
        helpers.emplace_back(work);
      work();
    }
    if (beyond > 0) // impossible for honest clients, whatever their data
      return error{errc::poisoned_update,
                   std::to_string(beyond.load()) +
                       " unmasked sums lie beyond what " +
                       std::to_string(plan.contributors) +
                       " clients can give: a masked update was out of range"};
    for (uint64_t seq = 0; seq < plan_.chunk_count(); ++seq) {
      const auto& e = plan_.extent(seq);
      if (ram_) {
        ram_->mark_folded(seq, updates);
        continue;
      }
      auto bytes = storage[seq];
      std::span<float> mean{reinterpret_cast<float*>(bytes.data()),
                            e.bytes / 4};
      if (optimizer_) // DP-FedAvg's noise, in element order
        optimizer_->step(e.model_offset / 4, mean, bytes, updates);
      for (auto& x : mean)
        x = std::clamp(x, -limit, limit);
      current_->bytes.release(e.model_offset, e.bytes); // file-backed only
    }
    log_line(log_level::debug, "aggregator",
             "unmasked " + std::to_string(plan.contributors) + " updates (" +
                 std::to_string(plan.self_seeds.size() + plan.pairwise.size()) +
                 " masks) in " + std::to_string(seconds_since(started)) + " s");
    return {};
  }

  /// Keeps what client `id` delivered to `round` and awaits no more of it
  /// (partial_updates: keep). Returns the chunks it delivered.
  uint64_t abandon(const std::string& id, uint32_t round) {
    for (auto& [sid, s] : streams_) {
      if (s.client_id != id || s.round != round || s.closed)
        continue;
      s.closed = true;
      if (window_) {
        window_->cut(s.next_sequence);
        advance_window();
      }
      return s.next_sequence;
    }
    return 0;
  }

  /// Fewer clients than expected will contribute to the open round:
  /// `contributors` are the scheduler's participants, which no longer
  /// count the clients dropped mid-round; those that were cut off (see
  /// abandon) still count where they delivered, so they are added back
  /// (the window awaits each of them up to its cut only).
  void expect(uint32_t contributors) {
    if (!window_ || contributors == 0)
      return;
    window_->set_contributors(contributors + window_->cut_count());
    advance_window();
  }

  frame close(const std::string& sender, const frame& f) {
    auto end = msg::decode<msg::end_of_stream>(f);
    if (!end)
      return refuse_from(sender, end.err());
    auto it = streams_.find(end->stream_id);
    if (auto owned = owner_check(sender, it, end->stream_id); !owned)
      return refuse_from(sender, owned.err());
    auto& s = it->second;
    if (s.rejected)
      return refuse_from(sender, {errc::poisoned_update,
                                  "stream " + std::to_string(end->stream_id) +
                                      " of " + s.client_id + " was rejected"});
    if (s.closed) // the answer was lost with a connection
      return msg::encode(msg::stream_closed{end->stream_id, s.bytes});
    if (s.next_sequence != plan_.chunk_count() ||
        end->chunk_count != plan_.chunk_count())
      return refuse_from(sender,
                         {errc::bad_sequence,
                          "stream " + std::to_string(end->stream_id) +
                              " ended after " +
                              std::to_string(s.next_sequence) + " of " +
                              std::to_string(plan_.chunk_count()) + " chunks"});
    msg::stream_closed closed{end->stream_id, s.bytes};
    self_->send(s.notify, update_atom::value, s.client_id, s.round);
    s.closed = true;
    return msg::encode(closed);
  }

  result<snapshot_ptr> finalize(uint32_t round) {
    auto open = std::count_if(streams_.begin(), streams_.end(),
                              [](const auto& kv) { return !kv.second.closed; });
    if (open > 0)
      return error{errc::internal,
                   std::to_string(open) + " streams still open at finalize"};
    if (optimizer_) // FedBuff: the updates in this step, cut-off ones too
      optimizer_->set_updates(
          std::count_if(streams_.begin(), streams_.end(), [](const auto& kv) {
            return !kv.second.rejected || kv.second.next_sequence > 0;
          }));
    if (ram_) {
      auto bytes = ram_->finalize(current_->bytes.bytes(), optimizer_.get());
      if (!bytes)
        return bytes.err();
      return publish(round, std::move(*bytes));
    }
    if (!window_->finish_round())
      return error{errc::internal, "finalize before every position was "
                                   "averaged"};
    if (optimizer_)
      optimizer_->finish_round();
    if (!options_.plan.in_place) // ram mode, robust rules
      return publish(round, std::move(next_));
    // The model was averaged in place; it moves on to the new snapshot
    // (nobody reads the old one any more, see above).
    return publish(round, std::move(current_->bytes));
  }

  /// Robust rules: the values dropped per stream, per client instead.
  std::vector<std::pair<std::string, uint64_t>>
  trimmed_by_client(const std::map<uint64_t, uint64_t>& by_stream) const {
    std::map<std::string, uint64_t> by_client;
    for (auto [sid, values] : by_stream)
      if (auto it = streams_.find(sid); it != streams_.end())
        by_client[it->second.client_id] += values;
    return {by_client.begin(), by_client.end()};
  }

  /// Publishes `bytes` as round `round`'s model; the round's uploads are
  /// forgotten.
  snapshot_ptr publish(uint32_t round, byte_buffer bytes) {
    auto next = std::make_shared<model_snapshot>();
    if (window_ && options_.plan.robust.robust())
      next->trimmed_values = trimmed_by_client(window_->take_trimmed());
    streams_.clear();
    first_pass_.clear();
    averaged_high_ = 0;
    next->layout = layout_;
    next->version = ++version_;
    next->round = round;
    next->bytes = std::move(bytes);
    previous_ = std::move(current_);
    current_ = next;
    return snapshot_ptr{std::move(next)};
  }

  /// Secure aggregation failed to unmask round `round` (`why`): ram mode
  /// publishes the model unchanged (the round is skipped: one client's
  /// garbage must not end everyone's run); window and disk modes cannot,
  /// their model's bytes hold the masked sum, and fail.
  result<snapshot_ptr> skip(uint32_t round, const std::string& why) {
    if (!ram_) {
      error e{errc::internal,
              "round " + std::to_string(round) + ": " + why +
                  "; in window and disk modes the model holds the masked "
                  "sum: the run cannot go on"};
      log_line(log_level::error, "aggregator", e.message);
      return e;
    }
    log_line(log_level::error, "aggregator",
             "round " + std::to_string(round) +
                 ": secure aggregation failed: " + why +
                 "; the global model stays as it was");
    auto bytes = ram_->keep(current_->bytes.bytes());
    if (!bytes)
      return bytes.err();
    return publish(round, std::move(*bytes));
  }

private:
  using stream_iter = std::map<uint64_t, upload_stream>::iterator;

  /// Returns true iff open stream `s` is not waiting for the window: it
  /// holds a credit for its next chunk, or (every chunk sent) all its
  /// credits, so that its end may come.
  bool could_send(const upload_stream& s) const {
    if (s.closed)
      return false;
    return s.next_sequence < plan_.chunk_count() ? s.held < options_.window
                                                 : s.held == 0;
  }

  /// Returns ok iff the stream exists and `sender` opened it.
  result<void> owner_check(const std::string& sender, stream_iter it,
                           uint64_t stream_id) const {
    if (it == streams_.end())
      return error{errc::unknown_stream,
                   "stream " + std::to_string(stream_id) + " of " + sender};
    if (it->second.client_id != sender)
      return error{errc::not_authorized,
                   sender + " wrote to stream " + std::to_string(stream_id) +
                       ", which " + it->second.client_id + " opened"};
    return {};
  }

  /// The largest magnitude an element of an update of `weight` may have:
  /// with every term of the weighted sum at most FLT_MAX / (max_contributors
  /// + 1), the sum of a position's max_contributors terms cannot overflow
  /// float32, whatever the weights (a finite but huge update would otherwise
  /// turn the sum, the published model and every later update into
  /// infinities).
  double max_abs(double weight) const {
    auto terms = static_cast<double>(options_.plan.max_contributors) + 1;
    return static_cast<double>(std::numeric_limits<float>::max()) /
           (terms * std::max(weight, 1.0));
  }

  /// Compressed uploads: chunk `c` of stream `s` as the model's values,
  /// the round's model plus the delta it carries (in decoded_, valid until
  /// the next chunk); others as they came. The checksum stays the encoded
  /// bytes' (verified by decode_chunk). Returns an error iff the chunk is
  /// not the stream's next or its bytes do not decode.
  result<msg::chunk_view> expand(const upload_stream& s,
                                 const msg::chunk_view& c) {
    const auto& z = options_.compression;
    if (!z.up)
      return c;
    auto seq = c.header.sequence;
    FEDCAF_REQUIRE(!s.closed, errc::unknown_stream, c.header.stream_id,
                   "closed");
    FEDCAF_REQUIRE(seq == s.next_sequence && seq < plan_.chunk_count(),
                   errc::bad_sequence, seq, s.next_sequence);
    const auto& e = plan_.extent(seq);
    decoded_.resize(e.bytes / 4);
    if (auto ok = decode_delta(
            z, c.bytes,
            current_->bytes.bytes().subspan(e.model_offset, e.bytes), decoded_);
        !ok)
      return error{ok.err().code, "chunk " + std::to_string(seq) + " of " +
                                      s.client_id + ": " + ok.err().message};
    auto out = c;
    out.bytes = std::as_bytes(std::span{decoded_});
    return out;
  }

  /// norm_bound: chunk `c` of stream `s` scaled towards the global model,
  /// g + scale (x - g) (in scaled_, valid until the next chunk); as it
  /// came if its update is within the bound. REQUIRES: admissible(s, c),
  /// ram mode (the global model is the one the client received).
  msg::chunk_view bounded(const upload_stream& s, const msg::chunk_view& c) {
    if (s.scale >= 1)
      return c;
    const auto& e = plan_.extent(c.header.sequence);
    auto type = layout_type_;
    auto n = e.bytes / dtype_bytes(type);
    scaled_.resize(e.bytes);
    const auto* g = current_->bytes.data() + e.model_offset;
    for (size_t i = 0; i < n; ++i) {
      auto old = load_element(type, g, i);
      auto x = load_element(type, c.bytes.data(), i);
      store_element(type, scaled_.data(), i,
                    static_cast<float>(old + s.scale * (x - old)));
    }
    auto out = c;
    out.bytes = scaled_;
    return out;
  }

  /// Returns ok iff chunk `c` is the next one of open stream `s`, of its
  /// round, in its plan slot, and (window mode) inside the open window.
  result<void> admissible(const upload_stream& s,
                          const msg::chunk_view& c) const {
    const auto& h = c.header;
    FEDCAF_REQUIRE(!s.closed, errc::unknown_stream, h.stream_id, "closed");
    FEDCAF_REQUIRE(h.round == s.round, errc::wrong_round, h.round, s.round);
    FEDCAF_REQUIRE(h.sequence == s.next_sequence, errc::bad_sequence,
                   h.sequence, s.next_sequence);
    if (auto ok = plan_.check(h.sequence, h.tensor_index, h.byte_offset,
                              c.bytes.size());
        !ok)
      return ok;
    FEDCAF_REQUIRE(ram_ || window_->open(h.sequence), errc::out_of_range,
                   h.sequence, window_->low(), options_.window);
    return {};
  }

  /// The checks of an update's content: finite values, and the distance
  /// from the global model within max_update_norm (poisoned_update).
  /// Returns the chunk's distance. REQUIRES: admissible(s, c).
  result<checked_chunk> inspect(const upload_stream& s,
                                const msg::chunk_view& c) const {
    if (secure()) // masked: uniform in Z_2^32, nothing to check
      return checked_chunk{};
    auto seq = c.header.sequence;
    if (auto ok = check_finite(layout_, plan_, seq, c.bytes, max_abs(s.weight));
        !ok)
      return ok.err();
    auto bound = options_.rule_cfg.max_update_norm;
    auto declared = options_.rule_cfg.norm_bound > 0;
    if (bound <= 0 && !declared)
      return checked_chunk{};
    auto checked = distance(s.client_id, c);
    if (!checked)
      return checked;
    auto so_far = s.distance_squared + checked->distance_squared;
    if (bound > 0 && so_far > bound * bound)
      return error{errc::poisoned_update,
                   "its distance from the global model passed "
                   "max_update_norm (" +
                       std::to_string(bound) + ") at chunk " +
                       std::to_string(seq)};
    // norm_bound scales by what the client declared: more than that is a
    // lie (both sides sum the same float32 differences in double).
    auto most = s.declared_norm * (1 + 1e-6) + 1e-12;
    if (declared && so_far > most * most)
      return error{errc::poisoned_update,
                   "its distance from the global model passed the update "
                   "norm it declared (" +
                       std::to_string(s.declared_norm) + ") at chunk " +
                       std::to_string(seq)};
    return checked;
  }

  /// The distance of chunk `seq` of `id`'s update from the global model:
  /// measured (where the global model holds the old one), or recorded (see
  /// above).
  result<checked_chunk> distance(const std::string& id,
                                 const msg::chunk_view& c) const {
    auto seq = c.header.sequence;
    checked_chunk out{0, c.checksum};
    if (seq >= averaged_high_) {
      out.distance_squared = squared_distance(layout_, plan_, seq, c.bytes,
                                              current_->bytes.bytes());
      return out;
    }
    auto it = first_pass_.find(id);
    if (it == first_pass_.end() || seq >= it->second.size())
      return error{errc::internal, "no record of chunk " + std::to_string(seq) +
                                       " of " + id +
                                       ", whose position was averaged"};
    const auto& first = it->second[seq];
    if (first.checksum != out.checksum)
      return error{errc::poisoned_update,
                   "chunk " + std::to_string(seq) +
                       " differs from the one it sent before the round's "
                       "updates were collected again"};
    out.distance_squared = first.distance_squared;
    return out;
  }

  /// Chunk `seq` of `s` was folded: its distance counts, and the stream
  /// could send again.
  void commit(upload_stream& s, uint64_t seq, const checked_chunk& c) {
    s.distance_squared += c.distance_squared;
    s.last_progress = steady_clock::now();
    if (!options_.plan.in_place || options_.rule_cfg.max_update_norm <= 0)
      return;
    auto& record = first_pass_[s.client_id];
    if (record.size() <= seq)
      record.resize(seq + 1);
    record[seq] = c;
  }

  /// Refuses the whole update of stream `sid` and tells the scheduler.
  frame reject(uint64_t sid, upload_stream& s, const error& why) {
    s.closed = true;
    s.rejected = true;
    if (why.code == errc::poisoned_update && options_.poisoned)
      options_.poisoned->fetch_add(1, std::memory_order_relaxed);
    log_line(log_level::warning, "aggregator",
             "rejected the update of " + s.client_id + " (stream " +
                 std::to_string(sid) + ", round " + std::to_string(s.round) +
                 "): " + why.message);
    self_->send(s.notify, reject_atom::value, s.client_id, s.round,
                s.next_sequence, why);
    return refuse({why.code, s.client_id + ": " + why.message});
  }

  /// Answers a repeated offer with where stream `stream_id` stands. Not
  /// progress: the idle timeout (idle_timeout_s + reconnect_grace_s)
  /// already leaves a reconnecting client its grace, and an offer repeated
  /// without chunks must not keep the round open.
  frame resume(uint64_t stream_id, const upload_stream& s) {
    auto total = plan_.chunk_count();
    auto next = s.closed ? total : s.next_sequence;
    auto owed = ram_ || s.closed ? next : std::min(next, window_->low());
    log_line("aggregator", s.client_id + " resumes stream " +
                               std::to_string(stream_id) + " at chunk " +
                               std::to_string(next) + " of " +
                               std::to_string(total));
    return msg::encode(msg::accept{stream_id, options_.window, next, owed});
  }

  /// Once the server has dropped the global model before the current one,
  /// its memory becomes the next sum: no allocation, no page faults.
  void recycle_previous() {
    if (ram_)
      ram_->recycle(take_previous());
  }

  /// The memory of the model published before the current one, once
  /// nobody else holds it (an empty buffer otherwise).
  byte_buffer take_previous() {
    if (!previous_ || previous_.use_count() != 1)
      return {};
    auto bytes = std::move(previous_->bytes);
    previous_.reset();
    return bytes;
  }

  /// Folds chunk `c` of stream `s` into the accumulator. REQUIRES:
  /// admissible(s, c).
  result<void> fold(upload_stream& s, const msg::chunk_view& c) {
    const auto& h = c.header;
    if (options_.fold_delay.count() > 0)
      std::this_thread::sleep_for(options_.fold_delay);
    auto ok = secure() ? fold_masked(h.sequence, c.bytes)
              : ram_
                  ? ram_->fold(h.sequence, c.bytes, s.weight)
                  : window_->fold(h.sequence, c.bytes, s.weight, h.stream_id);
    if (!ok)
      return ok;
    ++s.next_sequence;
    s.bytes += c.bytes.size();
    return {};
  }

  /// Where finalize_next writes: the global model itself (in place), or
  /// the next one (ram mode, robust rules), whose memory is an old model's
  /// once nobody holds that any more.
  std::span<std::byte> next_model() {
    if (options_.plan.in_place)
      return current_->bytes.bytes();
    if (next_.size() != plan_.total_bytes())
      next_ = take_previous();
    if (next_.size() != plan_.total_bytes()) // nothing to reuse
      next_ = byte_buffer::uninitialized(plan_.total_bytes());
    return next_.bytes();
  }

  /// Averages every complete position into the global model and returns
  /// the credits held for it.
  void advance_window() {
    while (window_->ready()) {
      auto seq = window_->low();
      if (secure()) // the ring sum waits for the unmask plan
        window_->store_ring_next(current_->bytes.bytes());
      else
        window_->finalize_next(current_->bytes.bytes(), next_model(),
                               optimizer_.get());
      if (options_.plan.in_place) {
        const auto& e = plan_.extent(seq);
        current_->bytes.release(e.model_offset, e.bytes); // file-backed only
        averaged_high_ = std::max(averaged_high_, window_->low());
      }
      auto now = steady_clock::now();
      for (auto& [rp, stream] : held_[seq]) {
        rp.deliver(msg::encode(msg::credit{stream, seq}));
        if (auto it = streams_.find(stream); it != streams_.end()) {
          --it->second.held;
          it->second.last_progress = now;
        }
      }
      held_.erase(seq);
    }
  }

  frame refuse(const error& e) const { return refusals_.refuse(e); }
  frame refuse_from(const std::string& sender, const error& e) const {
    return refusals_.refuse(e, sender);
  }

  aggregator_actor::pointer self_ = nullptr;
  manifest layout_;
  uint64_t digest_;
  uint64_t version_;
  aggregator_options options_;
  std::optional<fedavg_accumulator> ram_;
  std::optional<window_accumulator> window_;
  std::unique_ptr<server_optimizer> optimizer_; ///< null: FedAvg
  /// window mode: credits held until their position is averaged.
  std::map<uint64_t,
           std::vector<std::pair<caf::typed_response_promise<frame>, uint64_t>>>
      held_;
  const chunk_plan& plan_;                   ///< the accumulator's
  std::shared_ptr<model_snapshot> current_;  ///< last published
  std::shared_ptr<model_snapshot> previous_; ///< published before that
  byte_buffer next_; ///< ram mode, robust rules: the model being reduced
  /// The largest chunk payload an upload may carry (compressed: zfp's bound).
  uint64_t max_payload_ = plan_.chunk_bytes();
  std::vector<float> decoded_;    ///< compressed uploads: a chunk's values
  std::vector<std::byte> scaled_; ///< norm_bound: a chunk scaled back
  /// The model's one floating dtype (spawn_aggregator checked it).
  dtype layout_type_ = *common_floating_dtype(layout_);
  std::map<uint64_t, upload_stream> streams_;
  unmask_planner server_; ///< secure aggregation: asked for the plan
  /// window mode: positions below were averaged into current_ this round
  /// (a reset does not lower it).
  uint64_t averaged_high_ = 0;
  /// window mode with max_update_norm: per client, its chunks of this round
  /// as first checked (kept across a reset, forgotten at finalize).
  std::map<std::string, std::vector<checked_chunk>> first_pass_;
  uint64_t next_stream_id_ = 1; // 0 names downloads
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
      [state](reset_atom, uint32_t contributors) {
        state->reset(contributors);
      },
      [state](abandon_atom, const std::string& id, uint32_t round) {
        return state->abandon(id, round);
      },
      [state](expect_atom, uint32_t contributors) {
        state->expect(contributors);
      },
      [state](connect_atom, const unmask_planner& server) {
        state->set_server(server);
      },
      [self, state](finalize_atom,
                    uint32_t round) -> caf::result<snapshot_ptr> {
        if (!state->secure()) {
          auto next = logged(state->finalize(round));
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
                [state, deliver, round](secagg::unmask_plan& plan) mutable {
                  auto ok = state->unmask(plan);
                  deliver(ok ? logged(state->finalize(round))
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
  std::optional<fedavg_accumulator> ram;
  std::optional<window_accumulator> window;
  const auto& p = options.plan;
  if (p.accumulator == accumulator_kind::model_sum) {
    auto acc = fedavg_accumulator::make(initial->layout, std::move(*plan));
    if (!acc)
      return acc.err();
    ram.emplace(std::move(*acc));
  } else {
    auto acc = window_accumulator::make(initial->layout, std::move(*plan),
                                        options.window, p.position_contributors,
                                        p.robust);
    if (!acc)
      return acc.err();
    window.emplace(std::move(*acc));
  }
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
  if (options.compression.up || options.compression.down)
    for (const auto& t : initial->layout.tensors)
      if (t.type != dtype::float32)
        return error{errc::unsupported_dtype,
                     "compression needs a float32 model; tensor " + t.name +
                         " is " + std::string{dtype_name(t.type)}};
  if (p.secure)
    for (const auto& t : initial->layout.tensors)
      if (t.type != dtype::float32)
        return error{errc::unsupported_dtype,
                     "secure aggregation needs a float32 model; tensor " +
                         t.name + " is " + std::string{dtype_name(t.type)}};
  auto state = std::make_shared<aggregator_state>(
      std::move(initial), options, std::move(ram), std::move(window),
      std::move(optimizer));
  return sys.spawn(aggregating, std::move(state));
}

} // namespace fedcaf
