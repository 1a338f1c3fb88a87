#include "fedcaf/accumulator.hpp"

#include <algorithm>
#include <atomic>
#include <cassert>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "fedcaf/fedavg_accumulator.hpp"
#include "fedcaf/window_accumulator.hpp"

namespace fedcaf {

result<double> accumulator::fold_measured(uint64_t, std::span<const std::byte>,
                                          double, bool,
                                          std::span<const std::byte>,
                                          std::optional<double>) {
  return error{errc::internal, "this accumulator does not measure its folds"};
}

namespace {

/// A model-sized running sum (ram mode, averaging rules): a chunk settles
/// as it is folded; finalize divides each chunk by its weights.
class model_sum final : public accumulator {
public:
  explicit model_sum(fedavg_accumulator sum) : sum_(std::move(sum)) {}

  const chunk_plan& plan() const override { return sum_.plan(); }
  void set_value_limit(float limit) override { sum_.set_value_limit(limit); }
  bool open(uint64_t seq) const override {
    return seq < sum_.plan().chunk_count();
  }
  uint64_t settled() const override { return sum_.plan().chunk_count(); }
  uint64_t overwritten_below() const override { return 0; }

  result<void> fold(uint64_t seq, std::span<const std::byte> x, double weight,
                    uint64_t, std::span<const std::byte> global) override {
    return sum_.fold(seq, x, weight, global);
  }
  result<void> fold_sum(uint64_t seq, std::span<const std::byte> x,
                        double weight,
                        std::span<const std::byte> global) override {
    return sum_.fold_sum(seq, x, weight, global);
  }
  bool measures() const override { return true; }
  result<double> fold_measured(uint64_t seq, std::span<const std::byte> x,
                               double weight, bool summed,
                               std::span<const std::byte> global,
                               std::optional<double> max_abs) override {
    return sum_.fold_measured(seq, x, weight, summed, global, max_abs);
  }
  void unfold(uint64_t seq, std::span<const std::byte> x, double weight,
              bool summed, std::span<const std::byte> global) override {
    sum_.unfold(seq, x, weight, summed, global);
  }
  work_split fold_split() override { return sum_.fold_split(); }
  bool takes_grid() const override { return sum_.takes_grid(); }
  result<double> fold_grid(uint64_t seq, std::span<const std::byte> x,
                           double weight,
                           std::span<const std::byte> global) override {
    return sum_.fold_grid(seq, x, weight, global);
  }
  void unfold_grid(uint64_t seq, std::span<const std::byte> x) override {
    sum_.unfold_grid(seq, x);
  }
  void grid_sums_of(double weight) override { sum_.grid_sums_of(weight); }
  bool sums_on_grid() const override { return sum_.sums_on_grid(); }
  void emit_sums() override { sum_.emit_sums(); }
  std::vector<double> take_position_weights() override {
    return sum_.take_position_weights();
  }
  double settled_weight(uint64_t) const override { return 0; }
  result<void> fold_ring(uint64_t seq, std::span<const std::byte> x) override {
    return sum_.fold_ring(seq, x);
  }

  bool ready() const override { return false; }
  void settle_next(byte_buffer&, server_optimizer*, bool) override {
    assert(false && "a model-sized sum settles nothing before finalize");
  }
  void recycle(byte_buffer&& buffer) override {
    sum_.recycle(std::move(buffer));
  }
  void cut(uint64_t) override {}
  void expect(uint32_t) override {}
  void restart(uint32_t) override { sum_.discard(); }

  result<byte_buffer> finalize(byte_buffer& model,
                               server_optimizer* opt) override {
    return sum_.finalize(model.bytes(), opt);
  }
  bool observe_results(
      std::function<double(uint64_t, std::span<const std::byte>)> f) override {
    sum_.observe_results(std::move(f));
    return true;
  }
  std::vector<double> take_measured() override { return sum_.take_measured(); }
  result<byte_buffer> keep(byte_buffer& model) override {
    return sum_.keep(model.bytes());
  }
  std::map<uint64_t, uint64_t> take_trimmed() override { return {}; }

protected:
  std::span<std::byte> ring_sum(uint64_t seq, byte_buffer&) override {
    return sum_.ring(seq); // zeroes if nobody's chunk came
  }
  float unmask_factor(float updates) const override { return updates; }
  void unmasked(uint64_t seq, std::span<std::byte>, float updates, byte_buffer&,
                server_optimizer*) override {
    sum_.mark_folded(seq, updates);
  }

private:
  fedavg_accumulator sum_;
};

/// `window` open chunk positions (window and disk modes; robust rules in
/// ram mode): a position settles, into the global model's memory (in
/// place) or into the next model's, once every awaited update reduced it.
class open_positions final : public accumulator {
public:
  open_positions(window_accumulator window, bool in_place)
      : window_(std::move(window)), in_place_(in_place) {}

  const chunk_plan& plan() const override { return window_.plan(); }
  void set_value_limit(float limit) override {
    limit_ = limit;
    window_.set_value_limit(limit);
  }
  bool open(uint64_t seq) const override { return window_.open(seq); }
  uint64_t settled() const override { return window_.low(); }
  uint64_t overwritten_below() const override { return overwritten_; }
  void keep_originals() override {
    // Only from the round's first overwrite on: else a position's kept
    // values would be its first average.
    keeping_ = in_place_ && (keeping_ || overwritten_ == 0);
  }
  result<void> restore_originals(byte_buffer& model) override;
  void new_model() override {
    overwritten_ = 0;
    forget_originals();
  }

  result<void> fold(uint64_t seq, std::span<const std::byte> x, double weight,
                    uint64_t tag, std::span<const std::byte> global) override {
    return window_.fold(seq, x, weight, global, tag);
  }
  result<void> fold_sum(uint64_t seq, std::span<const std::byte> x,
                        double weight,
                        std::span<const std::byte> global) override {
    return window_.fold_sum(seq, x, weight, global);
  }
  work_split fold_split() override { return window_.split(); }
  bool measures() const override { return window_.on_grid(); }
  result<double> fold_measured(uint64_t seq, std::span<const std::byte> x,
                               double weight, bool summed,
                               std::span<const std::byte> global,
                               std::optional<double> max_abs) override {
    return window_.fold_measured(seq, x, weight, summed, global, max_abs);
  }
  void unfold(uint64_t seq, std::span<const std::byte> x, double weight,
              bool summed, std::span<const std::byte> global) override {
    window_.unfold(seq, x, weight, summed, global);
  }
  bool takes_grid() const override { return window_.takes_grid(); }
  result<double> fold_grid(uint64_t seq, std::span<const std::byte> x,
                           double weight,
                           std::span<const std::byte> global) override {
    return window_.fold_grid(seq, x, weight, global);
  }
  void unfold_grid(uint64_t seq, std::span<const std::byte> x) override {
    window_.unfold_grid(seq, x);
  }
  void emit_sums() override { window_.emit_sums(); }
  void emit_grid(bool on) override { window_.emit_grid(on); }
  bool settled_on_grid(uint64_t seq) const override {
    return window_.settled_on_grid(seq);
  }
  std::vector<double> take_position_weights() override {
    return window_.take_position_weights();
  }
  double settled_weight(uint64_t seq) const override {
    return window_.settled_weight(seq);
  }
  result<void> fold_ring(uint64_t seq, std::span<const std::byte> x) override {
    return window_.fold_ring(seq, x);
  }

  bool ready() const override { return window_.ready(); }
  void settle_next(byte_buffer& model, server_optimizer* opt,
                   bool ring) override;
  void recycle(byte_buffer&& buffer) override {
    if (!in_place_ && next_.size() != plan().total_bytes() &&
        buffer.size() == plan().total_bytes())
      next_ = std::move(buffer);
  }
  void cut(uint64_t next_sequence) override { window_.cut(next_sequence); }
  void expect(uint32_t contributors) override {
    // Cut-off contributors are still awaited up to their cut, even when
    // none is left beyond it.
    if (auto n = contributors + window_.cut_count(); n > 0)
      window_.set_contributors(n);
  }
  void restart(uint32_t contributors) override {
    window_.restart(std::max(1u, contributors));
    unmeasure();
  }

  result<byte_buffer> finalize(byte_buffer& model,
                               server_optimizer* opt) override;
  result<byte_buffer> keep(byte_buffer& model) override;
  bool observe_results(
      std::function<double(uint64_t, std::span<const std::byte>)> f) override {
    observer_ = std::move(f);
    unmeasure();
    return true;
  }
  std::vector<double> take_measured() override {
    std::vector<double> out;
    if (std::none_of(measured_.begin(), measured_.end(),
                     [](double x) { return std::isnan(x); }))
      out = measured_;
    unmeasure();
    return out;
  }
  std::map<uint64_t, uint64_t> take_trimmed() override {
    return window_.take_trimmed();
  }

protected:
  std::span<std::byte> ring_sum(uint64_t seq, byte_buffer& model) override {
    const auto& e = plan().extent(seq);
    return model.bytes().subspan(e.model_offset, e.bytes);
  }
  float unmask_factor(float) const override { return 1; }
  void unmasked(uint64_t seq, std::span<std::byte> sum, float updates,
                byte_buffer& model, server_optimizer* opt) override;

private:
  /// Where position settled() goes: the global model itself (in place), or
  /// the next one, in a recycled buffer if one was handed in.
  std::span<std::byte> next_model(byte_buffer& model) {
    if (in_place_)
      return model.bytes();
    if (next_.size() != plan().total_bytes()) // nothing to reuse
      next_ = byte_buffer::uninitialized(plan().total_bytes());
    return next_.bytes();
  }

  /// Secure aggregation: writes the old bytes of the position about to
  /// take its ring sum in `model` to the spill file, at their offset.
  void spill(uint64_t seq, const byte_buffer& model);
  /// keep_originals(): position `seq`'s bytes in `model`, about to be
  /// overwritten for the first time this round, written to originals_.
  void keep_original(uint64_t seq, const byte_buffer& model) {
    const auto& e = plan().extent(seq);
    originals_.write(model.bytes().subspan(e.model_offset, e.bytes),
                     e.model_offset);
    kept_below_ = seq + 1;
  }
  /// The round ended: nothing kept is read again.
  void forget_originals() {
    keeping_ = false;
    kept_below_ = 0;
  }

  /// Marks every position of the round unmeasured (NaN).
  void unmeasure() {
    if (observer_)
      measured_.assign(plan().chunk_count(),
                       std::numeric_limits<double>::quiet_NaN());
  }

  window_accumulator window_;
  bool in_place_;
  byte_buffer next_; ///< not in place: the model being reduced
  uint64_t overwritten_ = 0;
  /// keep_originals(): positions below kept_below_ have their values of
  /// before the round in originals_, at their offsets (an unlinked file
  /// under $TMPDIR, else /var/tmp, as spilled_).
  bool keeping_ = false;
  uint64_t kept_below_ = 0;
  spill_file originals_;
  float limit_ = std::numeric_limits<float>::max();
  /// Secure aggregation: the model's bytes each position held before its
  /// ring sum overwrote them, at their offsets in an unlinked file under
  /// $TMPDIR (else /var/tmp): page cache, not the server's memory.
  spill_file spilled_;
  /// observe_results' f, and what it returned for each position settled
  /// this round (NaN: not yet, or a ring sum's).
  std::function<double(uint64_t, std::span<const std::byte>)> observer_;
  std::vector<double> measured_;
};

void open_positions::spill(uint64_t seq, const byte_buffer& model) {
  const auto& e = plan().extent(seq);
  spilled_.write(model.bytes().subspan(e.model_offset, e.bytes),
                 e.model_offset);
}

result<void> open_positions::restore_originals(byte_buffer& model) {
  if (!keeping_)
    return {};
  if (overwritten_ > kept_below_)
    return error{errc::internal,
                 "positions were overwritten before their values were kept"};
  if (auto ok = originals_.status(); !ok)
    return ok;
  for (uint64_t seq = 0; seq < kept_below_; ++seq) {
    const auto& e = plan().extent(seq);
    if (auto ok = originals_.read(
            model.bytes().subspan(e.model_offset, e.bytes), e.model_offset);
        !ok)
      return ok;
    model.release(e.model_offset, e.bytes); // file-backed only
  }
  return {};
}

result<byte_buffer> open_positions::keep(byte_buffer& model) {
  auto settled = window_.low();
  if (auto ok = spilled_.status(); !ok)
    return error{errc::internal, "the model could not be kept apart from "
                                 "the masked sum (" +
                                     ok.err().message +
                                     "): the run cannot go on"};
  for (uint64_t seq = 0; seq < settled; ++seq) {
    const auto& e = plan().extent(seq);
    if (auto ok = spilled_.read(model.bytes().subspan(e.model_offset, e.bytes),
                                e.model_offset);
        !ok)
      return error{errc::internal, "reading the model kept apart from the "
                                   "masked sum back: " +
                                       ok.err().message};
    model.release(e.model_offset, e.bytes); // file-backed only
  }
  window_.abandon_round();
  unmeasure();
  overwritten_ = 0;
  forget_originals();
  return std::move(model);
}

void open_positions::settle_next(byte_buffer& model, server_optimizer* opt,
                                 bool ring) {
  auto seq = window_.low();
  const auto& e = plan().extent(seq);
  if (ring) { // the ring sum waits for the unmask plan
    spill(seq, model);
    window_.store_ring_next(model.bytes());
  } else {
    auto next = next_model(model);
    if (keeping_ && in_place_ && seq == kept_below_) // first overwritten
      keep_original(seq, model);
    window_.finalize_next(model.bytes(), next, opt);
    if (observer_) // while the position is in the caches
      measured_[seq] = observer_(seq, next);
  }
  if (!in_place_)
    return;
  model.release(e.model_offset, e.bytes); // file-backed only
  overwritten_ = std::max(overwritten_, window_.low());
}

result<byte_buffer> open_positions::finalize(byte_buffer& model,
                                             server_optimizer* opt) {
  if (!window_.finish_round())
    return error{errc::internal, "finalize before every position was "
                                 "averaged"};
  if (opt)
    opt->finish_round();
  overwritten_ = 0;
  forget_originals();
  if (!in_place_) // ram mode, robust rules
    return std::move(next_);
  // The model was averaged in place; it moves on to the new model.
  return std::move(model);
}

void open_positions::unmasked(uint64_t seq, std::span<std::byte> sum,
                              float updates, byte_buffer& model,
                              server_optimizer* opt) {
  const auto& e = plan().extent(seq);
  std::span<float> mean{reinterpret_cast<float*>(sum.data()), e.bytes / 4};
  if (opt) // DP-FedAvg's noise, in element order
    opt->step(e.model_offset / 4, mean, sum, updates);
  for (auto& x : mean)
    x = std::clamp(x, -limit_, limit_);
  model.release(e.model_offset, e.bytes); // file-backed only
}

} // namespace

result<std::unique_ptr<accumulator>>
accumulator::make(const manifest& m, chunk_plan plan, const aggregation_plan& p,
                  uint32_t window) {
  auto cores = std::thread::hardware_concurrency();
  if (p.accumulator == accumulator_kind::model_sum) {
    auto sum = fedavg_accumulator::make(m, std::move(plan));
    if (!sum)
      return sum.err();
    if (p.partial_sums)
      sum->emit_sums();
    if (p.weights == client_weighting::sample_size)
      sum->set_weight_bits(10);
    // FedAvg's finalize on the host's cores (the clients wait for it); the
    // fold of each chunk on fold_threads (by default a quarter of them, the
    // rest left to the connections and to clients on the host: on 2 cores,
    // server and 2 clients, rounds 1.13 x slower with the fold on both;
    // memory_matrix).
    sum->set_threads(std::max(std::min(16u, cores), p.fold_threads));
    sum->set_fold_threads(p.fold_threads);
    return std::unique_ptr<accumulator>{new model_sum{std::move(*sum)}};
  }
  auto positions = window_accumulator::make(m, std::move(plan), window,
                                            p.position_contributors, p.robust);
  if (!positions)
    return positions.err();
  if (p.partial_sums)
    positions->emit_sums();
  if (p.weights == client_weighting::sample_size)
    positions->set_weight_bits(10);
  // A position's checks, fold and settling on fold_threads, as a
  // model-sized sum's fold (the same bits on any number).
  positions->set_threads(p.fold_threads);
  return std::unique_ptr<accumulator>{
      new open_positions{std::move(*positions), p.in_place}};
}

result<void> accumulator::unmask(const secagg::quantizer& q,
                                 const secagg::unmask_plan& plan,
                                 byte_buffer& model, server_optimizer* opt) {
  const auto& chunks = this->plan();
  auto updates = static_cast<float>(plan.contributors);
  std::vector<std::span<std::byte>> storage(chunks.chunk_count());
  for (uint64_t seq = 0; seq < chunks.chunk_count(); ++seq)
    storage[seq] = ring_sum(seq, model);
  auto factor = unmask_factor(updates);
  // The masks of different chunks are independent: every core takes
  // chunks in turn (the caller waits; this is the round's last step).
  std::atomic<uint64_t> next{0}, beyond{0};
  auto work = [&q, &plan, &chunks, &storage, &next, &beyond, factor] {
    for (auto seq = next++; seq < chunks.chunk_count(); seq = next++)
      beyond += secagg::unmask_chunk_in_place(
          q, plan, chunks.extent(seq).model_offset / 4, storage[seq], factor);
  };
  {
    std::vector<std::jthread> helpers;
    for (unsigned k = 1; k < std::min(4u, std::thread::hardware_concurrency());
         ++k)
      helpers.emplace_back(work);
    work();
  }
  if (beyond > 0) // impossible for honest clients, whatever their data
    return error{errc::poisoned_update,
                 std::to_string(beyond.load()) +
                     " unmasked sums lie beyond what " +
                     std::to_string(plan.contributors) +
                     " clients can give: a masked update was out of range"};
  for (uint64_t seq = 0; seq < chunks.chunk_count(); ++seq)
    unmasked(seq, storage[seq], updates, model, opt);
  return {};
}

} // namespace fedcaf
