#include "actors/relay_upstream.hpp"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <utility>
#include <variant>

#include <caf/all.hpp>

#include "actors/messages.hpp"
#include "actors/relay_courier.hpp"
#include "fedcaf/dummy_trainer.hpp" // anonymous_file_buffer
#include "fedcaf/log.hpp"
#include "fedcaf/models.hpp"
#include "fedcaf/trainer.hpp"
#include "protocol/relay_hooks.hpp"
#include "protocol/relay_residency.hpp"

namespace fedcaf {

namespace {

using clock_type = std::chrono::steady_clock;

/// What the relay trainers of one process share: the children's side,
/// spawned once, as soon as the model's layout is known (from the
/// parent's client_configs, or its first round), and the courier to it.
struct relay_link {
  relay_spawner spawn;
  std::optional<relay_side> side;
  relay_courier_actor courier; ///< to side->server, once it is spawned
  std::shared_ptr<relay_answers> answers = std::make_shared<relay_answers>();
  uint64_t models = 0;     ///< handed down so far (their numbers)
  std::string storage_dir; ///< disk mode: where model-sized buffers live
  log_level round_level = log_level::info; ///< of the per-round line
  uint32_t buffers = 0;                    ///< made so far (their files' names)
  /// The upstream client's: fetches model bytes again (window mode).
  std::function<void(uint64_t, uint64_t)> ask;
  /// The upstream client's: its download or upload may go on.
  std::function<void()> wake;

  /// True iff the side runs in window mode: the model's memory is held
  /// chunk by chunk (relay_residency).
  bool windowed() const { return side && side->cache > 0; }

  /// `size` bytes of zeroes: on the heap, or (disk mode) a mapped file
  /// whose pages the relay gives back as it goes, or (window mode) an
  /// anonymous mapping given back chunk by chunk.
  result<byte_buffer> model_buffer(uint64_t size) {
    if (windowed())
      return byte_buffer::anonymous(size);
    if (storage_dir.empty())
      return byte_buffer::zeroed(size);
    return anonymous_file_buffer(storage_dir + "/fedcaf-relay-" +
                                     std::to_string(::getpid()) + "-" +
                                     std::to_string(++buffers) + ".bin",
                                 size);
  }

  /// Spawns the children's side with `initial` as its model, and the
  /// courier to it.
  result<void> spawn_side(model_snapshot initial, const msg::welcome& w) {
    auto s =
        spawn(relay_upstream{std::move(initial), w.terms, w.client_configs});
    if (!s)
      return s.err();
    side = *s;
    courier = spawn_relay_courier(*side->system, side->server, answers);
    return {};
  }

  /// Spawns the children's side now if client_configs give the layout
  /// without LibTorch or a file only the parent has (synthetic models, and
  /// safetensors ones whose file is here), so the children register before
  /// the first round; its model is replaced by the parent's each round.
  void spawn_early(const client_configs& cc, const msg::welcome& w) {
    if (side || cc.model.model_name == model_kind::cnn ||
        cc.model.model_name == model_kind::torchscript)
      return;
    auto layout = model_layout(cc.model);
    if (!layout)
      return; // at the first round, from the parent's model
    model_snapshot zeros;
    zeros.layout = std::move(*layout);
    auto bytes = model_buffer(zeros.layout.total_bytes());
    if (!bytes)
      return; // at the first round, which says why
    zeros.bytes = std::move(*bytes);
    (void)spawn_side(std::move(zeros), w); // else at the first round
  }
};

/// A relay's upstream "trainer". Its state, per round:
///   between_rounds -(begin_round)-> downloading -(train: the side's
///   answer)-> summed | streaming | sitting_out -(adopt_layout)->
///   between_rounds
/// begin_round hands the children's side the memory the download is
/// written into, and each chunk written is announced to it (release), so
/// the side serves its children each chunk as soon as it is in. train()
/// waits for the side: its sum is uploaded from the memory the side summed
/// it in, without a copy (ram mode: its answer, held until the next round
/// starts, as the parent may collect it again; window and disk modes: the
/// model's own memory, as it settles).
class relay_trainer final : public trainer, public relay_hooks {
public:
  relay_trainer(std::shared_ptr<relay_link> link, msg::welcome welcome)
      : link_(std::move(link)), welcome_(std::move(welcome)),
        parent_terms_(welcome_.terms) {}

  const manifest& layout() const override { return layout_; }

  /// Any layout: the relay holds whatever model its parent serves. Makes
  /// the memory this round's download goes into (and, at the first round,
  /// the children's side).
  result<void> adopt_layout(const manifest& parent) override {
    if (link_->side && !(parent == link_->side->layout))
      return error{errc::manifest_mismatch,
                   "the parent's model has another layout than the one the "
                   "relay serves its children (" +
                       std::to_string(link_->side->layout.total_bytes()) +
                       " bytes)"};
    if (residency_) // what of its sum has not gone up never will
      residency_->abandon();
    residency_.reset();
    // A new round: the parent collects the last one no more. The memory
    // of a round sat out (zeroes) serves the next download.
    auto* kept = std::get_if<sitting_out>(&state_);
    byte_buffer next = kept ? std::move(kept->zeros) : byte_buffer{};
    if (auto* idle = std::get_if<between_rounds>(&state_))
      next = std::move(idle->next);
    state_ = between_rounds{};
    bool fresh = !(parent == layout_) || next.size() != parent.total_bytes() ||
                 link_->windowed();
    layout_ = parent;
    if (!link_->side) {
      model_snapshot initial;
      initial.layout = layout_;
      auto bytes = link_->model_buffer(layout_.total_bytes());
      if (!bytes)
        return bytes.err();
      initial.bytes = std::move(*bytes);
      if (auto ok = link_->spawn_side(std::move(initial), welcome_); !ok)
        return ok.err();
    }
    if (fresh) { // window mode: each round's positions start given back
      auto bytes = link_->model_buffer(parent.total_bytes());
      if (!bytes)
        return bytes.err();
      next = std::move(*bytes);
    }
    state_ = between_rounds{std::move(next)};
    return {};
  }

  /// A round to train: the memory the download goes into becomes the
  /// children's side's model of the round now, its bytes arriving.
  void begin_round(uint32_t round, bool evaluate_only) override {
    (void)round;
    final_ = evaluate_only; // downloaded whole, then evaluate_local()
    positions_.reset();
    auto* idle = std::get_if<between_rounds>(&state_);
    if (evaluate_only || !link_->side || !idle)
      return;
    auto memory = idle->next.share(); // written here, whatever the side does
    residency_ = make_residency(idle->next);
    auto model = std::make_shared<model_snapshot>();
    model->layout = layout_;
    model->bytes = std::move(idle->next);
    auto number = ++link_->models;
    link_->answers->forget_before(number);
    state_ = downloading{std::move(memory), number};
    positions_ =
        grid_streamed()
            ? std::make_shared<grid_positions>(
                  (layout_.total_bytes() + link_->side->chunk_bytes - 1) /
                      link_->side->chunk_bytes,
                  link_->side->chunk_bytes)
            : nullptr;
    caf::anon_send(link_->courier, relay_atom::value,
                   relay_model{std::move(model),
                               std::make_shared<model_arrival>(), residency_,
                               grid_sums_taken(), positions_},
                   number);
  }

  /// Chunks written by the download are announced to the children's side
  /// (disk mode: their pages go back); chunks uploaded give their pages
  /// back (disk mode; window mode: kept for a resend in the spill file).
  void release(uint64_t model_offset, uint64_t bytes) override {
    std::visit([this, model_offset,
                bytes](auto& s) { release_in(s, model_offset, bytes); },
               state_);
  }

  model_view parameters() override {
    return std::visit([this](auto& s) { return view_of(s); }, state_);
  }

  /// One round of the children: their partial sum comes back whole, or
  /// (window and disk modes) as it settles: then this returns once
  /// position 0 has, with the round's weight, and the upload follows
  /// ready_bytes().
  result<train_metrics> train() override {
    auto started = clock_type::now();
    auto* d = std::get_if<downloading>(&state_);
    if (!d)
      return error{errc::internal, "the relay's round has no model"};
    auto round = std::move(*d); // the side's now, whole
    state_ = between_rounds{};
    if (residency_) // every byte was written: the cache's are all in
      residency_->download_complete();
    auto got = link_->answers->start(round.number);
    if (!got)
      return got.err();
    if (const auto& s = got->stream) {
      evaluation_ = s->evaluation;
      state_ = streaming{std::move(round.memory), round.number};
      return went_up(s->weight, s->loss, s->clients, started,
                     " updates streaming up, weight ");
    }
    auto& r = got->answer;
    evaluation_ = std::move(r.evaluation);
    if (r.weight == 0) // its round fell short of min_clients
      return sit_out(started);
    if (!r.sums || r.sums->bytes.size() != layout_.total_bytes())
      return error{errc::internal, "the relay's sum has another size"};
    if (r.weight < 0)
      return error{errc::internal, "the relay's round summed no update"};
    auto weight = r.weight, loss = r.loss;
    auto clients = r.clients;
    state_ = summed{std::move(r)};
    return went_up(weight, loss, clients, started, " updates summed, weight ");
  }

  /// The run's final model, downloaded whole: handed down for the
  /// children to evaluate (the side's final evaluation); their figures
  /// are the relay's. Blocks until they answered or the side gave up.
  result<std::optional<eval_metrics>> evaluate_local() override {
    auto* idle = std::get_if<between_rounds>(&state_);
    if (!final_ || !link_->side || !idle ||
        idle->next.size() != layout_.total_bytes())
      return std::optional<eval_metrics>{};
    auto model = std::make_shared<model_snapshot>();
    model->layout = layout_;
    model->bytes = std::move(idle->next);
    auto number = ++link_->models;
    link_->answers->forget_before(number);
    caf::anon_send(
        link_->courier, eval_atom::value,
        relay_model{std::move(model), std::make_shared<model_arrival>(true)},
        number);
    auto got = link_->answers->start(number);
    if (!got)
      return got.err();
    auto& e = got->answer.evaluation;
    if (!e)
      return std::optional<eval_metrics>{};
    eval_metrics m;
    m.samples = e->samples;
    m.figures = std::move(e->means);
    return std::optional<eval_metrics>{std::move(m)};
  }

  uint64_t sample_count() const override {
    return static_cast<uint64_t>(std::llround(weight_));
  }

  // -- relay_hooks ------------------------------------------------------------

  bool partial_sum() const override { return true; }

  bool grid_sums() const override {
    if (std::holds_alternative<streaming>(state_))
      return positions_ != nullptr; // each chunk as its position settled
    const auto* s = std::get_if<summed>(&state_);
    return s && s->answer.sums && s->answer.sums->grid_sums;
  }

  bool float_sums(uint64_t model_offset) const override {
    return std::holds_alternative<streaming>(state_) && positions_ &&
           !positions_->on_grid(model_offset);
  }

  void parent_round(uint64_t chunk_bytes,
                    const msg::client_terms& terms) override {
    parent_chunk_bytes_ = chunk_bytes;
    parent_terms_ = terms;
  }

  std::optional<relay_evaluation> children_evaluation() override {
    return std::exchange(evaluation_, std::nullopt);
  }

  std::optional<const_model_view> sums() const override {
    if (const auto* s = std::get_if<summed>(&state_)) // read only: the
      return s->answer.sums->view(); // upload of a sum neither masks nor
    if (const auto* s = std::get_if<streaming>(&state_)) // encodes
      return split_contiguous(layout_,
                              std::span<const std::byte>{s->memory.bytes()});
    return std::nullopt;
  }

  uint64_t ready_bytes() const override {
    const auto* s = std::get_if<streaming>(&state_);
    return s ? link_->answers->ready(s->number)
             : std::numeric_limits<uint64_t>::max();
  }

  void on_ready(std::function<void()> wake) override {
    link_->wake = wake;
    link_->answers->on_settled(std::move(wake));
  }

  bool may_fetch(uint64_t model_offset, uint64_t bytes) override {
    if (!residency_ || !std::holds_alternative<downloading>(state_))
      return true;
    residency_->upstream_chunk(bytes); // the upload's chunks are its size
    return residency_->may_download(model_offset, bytes);
  }

  void on_refetch(std::function<void(uint64_t, uint64_t)> ask) override {
    link_->ask = std::move(ask);
  }

  void refetched(uint64_t model_offset,
                 std::span<const std::byte> bytes) override {
    if (residency_)
      residency_->fill(model_offset, bytes);
  }

  result<void> stage(uint64_t model_offset, uint64_t bytes) override {
    if (residency_ && std::holds_alternative<streaming>(state_))
      return residency_->restore_sums(model_offset, bytes);
    return {};
  }

private:
  /// Between rounds: the memory the next download goes into (or none yet).
  struct between_rounds {
    byte_buffer next;
  };
  /// The download writes `memory`, shared with the children's side, whose
  /// model of the round (handed down as model `number`) it is.
  struct downloading {
    byte_buffer memory;
    uint64_t number = 0;
  };
  /// The side's sum of model `number`'s round streams up from `memory` as
  /// it settles (window and disk modes).
  struct streaming {
    byte_buffer memory;
    uint64_t number = 0;
  };
  /// The side's answer (ram mode): its sum, uploaded from its memory.
  struct summed {
    relay_result answer;
  };
  /// The children's round fell short of min_clients: zeroes (untouched
  /// pages: no memory) go up as a sum of weight 0, with no chunk.
  struct sitting_out {
    byte_buffer zeros;
  };
  using state =
      std::variant<between_rounds, downloading, streaming, summed, sitting_out>;

  void release_in(downloading& s, uint64_t offset, uint64_t bytes) {
    s.memory.release(offset, bytes);
    caf::anon_send(link_->courier, arrived_atom::value, offset, bytes);
  }
  void release_in(streaming& s, uint64_t offset, uint64_t bytes) {
    if (residency_)
      residency_->sent(offset, bytes); // kept for a resend, given back
    else
      s.memory.release(offset, bytes);
  }
  void release_in(summed& s, uint64_t offset, uint64_t bytes) {
    s.answer.sums->bytes.release(offset, bytes);
  }
  void release_in(between_rounds& s, uint64_t offset, uint64_t bytes) {
    if (!final_) // the final model is read whole once downloaded
      s.next.release(offset, bytes);
  }
  void release_in(sitting_out& s, uint64_t offset, uint64_t bytes) {
    s.zeros.release(offset, bytes);
  }

  /// Where a download writes (the round's model), or what the trainer
  /// holds between rounds; the sums go up through sums(), read only.
  model_view view_of(between_rounds& s) {
    return split_contiguous(layout_, s.next.bytes());
  }
  model_view view_of(downloading& s) {
    return split_contiguous(layout_, s.memory.bytes());
  }
  model_view view_of(streaming& s) {
    return split_contiguous(layout_, s.memory.bytes());
  }
  model_view view_of(summed&) { return {}; }
  model_view view_of(sitting_out& s) {
    return split_contiguous(layout_, s.zeros.bytes());
  }

  /// True iff the parent folds a sum given as int32 on its exact grid and
  /// the side's chunks cut the model where the parent's grid is cut: its
  /// runs of 64 elements lie where the parent's do (chunks of whole runs
  /// of a float32 model; the parent's, its Welcome says).
  bool grid_sums_taken() const {
    return parent_terms_.grid_sums && link_->side &&
           link_->side->chunk_bytes % (64 * sizeof(float)) == 0 &&
           std::all_of(
               layout_.tensors.begin(), layout_.tensors.end(),
               [](const tensor_info& t) { return t.type == dtype::float32; });
  }

  /// True iff a sum that streams up as it settles (window and disk modes)
  /// may go up on the grid position by position: the parent folds grid
  /// sums and reads Chunk.floatSums, and each of its chunks lies in one of
  /// the side's positions (their size a multiple of the parent's).
  bool grid_streamed() const {
    return grid_sums_taken() && parent_terms_.chunk_float_sums &&
           parent_chunk_bytes_ > 0 &&
           link_->side->chunk_bytes % parent_chunk_bytes_ == 0;
  }

  /// Window mode: which bytes of this round's model, `memory`, stay
  /// resident, from the children's chunk plan (null otherwise).
  std::shared_ptr<relay_residency> make_residency(byte_buffer& memory) {
    if (!link_->windowed())
      return nullptr;
    auto plan = chunk_plan::make(layout_, link_->side->chunk_bytes);
    if (!plan) {
      log_line(log_level::warning, "relay",
               "the model is held whole this round: " + plan.err().message);
      return nullptr;
    }
    auto r = std::make_shared<relay_residency>(memory.share(), std::move(*plan),
                                               link_->side->cache);
    r->set_asker(link_->ask);
    r->set_download_waker(link_->wake);
    // The upstream client fetches again only once train() returned, at
    // the first position settled: the first window stays for the checks.
    for (uint64_t seq = 0;
         seq < std::min<uint64_t>(link_->side->cache, r->plan().chunk_count());
         ++seq)
      r->pin(seq, relay_residency::check);
    return r;
  }

  /// The round's sum of `clients` updates, of weight `weight`, goes up.
  result<train_metrics> went_up(double weight, double loss, uint32_t clients,
                                clock_type::time_point started,
                                const char* what) {
    weight_ = weight;
    train_metrics m;
    m.loss = loss;
    m.samples = static_cast<uint64_t>(std::llround(weight));
    m.seconds =
        std::chrono::duration<double>(clock_type::now() - started).count();
    log_line(link_->round_level, "relay",
             std::to_string(clients) + what + std::to_string(weight));
    return m;
  }

  /// The children's round could not have its min_clients: this round goes
  /// up as a partial sum of weight 0 (Offer.sampleCount 0), which the
  /// parent answers by taking the relay out of the round (and it sends no
  /// chunk); the relay takes the next round.
  result<train_metrics> sit_out(clock_type::time_point started) {
    auto zeros = link_->model_buffer(layout_.total_bytes());
    if (!zeros)
      return zeros.err();
    state_ = sitting_out{std::move(*zeros)};
    weight_ = 0;
    log_line(log_level::warning, "relay",
             "the children's round fell short of min_clients: this round "
             "goes up as a sum of no update");
    train_metrics m;
    m.seconds =
        std::chrono::duration<double>(clock_type::now() - started).count();
    return m;
  }

  std::shared_ptr<relay_link> link_;
  msg::welcome welcome_;
  manifest layout_;
  state state_;
  /// Window mode: the round's model's residency (downloading, streaming).
  std::shared_ptr<relay_residency> residency_;
  double weight_ = 0;
  /// The children's evaluation of the round's model, until it goes up.
  std::optional<relay_evaluation> evaluation_;
  bool final_ = false; ///< the round now is the final model's evaluation
  /// The round's parent: its chunk size and latest terms (parent_round).
  uint64_t parent_chunk_bytes_ = 0;
  msg::client_terms parent_terms_;
  /// The round's positions on the grid or not (grid_streamed()), or null.
  std::shared_ptr<grid_positions> positions_;
};

} // namespace

trainer_factory relay_trainers(relay_spawner spawn, std::string storage_dir,
                               log_level round_level) {
  auto link = std::make_shared<relay_link>();
  link->round_level = round_level;
  link->spawn = std::move(spawn);
  link->storage_dir = std::move(storage_dir);
  return [link](const client_configs& cc,
                const msg::welcome& w) -> result<std::unique_ptr<trainer>> {
    link->spawn_early(cc, w);
    return std::unique_ptr<trainer>{new relay_trainer{link, w}};
  };
}

} // namespace fedcaf
