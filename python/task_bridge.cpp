#include "task_bridge.hpp"

namespace fedcaf::bridge {

result<void> task_bridge::adopt(const manifest& layout) {
  std::lock_guard<std::mutex> guard{mtx_};
  if (model_ && model_->layout == layout)
    return {};
  if (auto ok = validate(layout); !ok)
    return ok.err();
  // Arrays of an earlier layout keep their own memory alive.
  auto m = std::make_shared<model_memory>();
  m->layout = layout;
  m->bytes = byte_buffer::uninitialized(layout.total_bytes());
  model_ = std::move(m);
  return {};
}

void task_bridge::begin_round(uint32_t round, bool evaluate_only) {
  std::lock_guard<std::mutex> guard{mtx_};
  round_ = round;
  evaluate_only_ = evaluate_only;
}

model_view task_bridge::received() {
  std::lock_guard<std::mutex> guard{mtx_};
  if (!model_)
    return {};
  return split_contiguous(
      model_->layout,
      std::span<std::byte>{model_->bytes.data(), model_->bytes.size()});
}

template <class Done>
result<void> task_bridge::offer_and_wait(std::unique_lock<std::mutex>& lock,
                                         bool eval, Done done) {
  task_.emplace();
  task_->info = task_info{next_id_++, round_, eval, model_};
  changed_.notify_all();
  changed_.wait(lock, [&] { return cancelled_ || done(); });
  if (cancelled_)
    return *cancelled_;
  return {};
}

result<train_metrics> task_bridge::train() {
  std::unique_lock<std::mutex> lock{mtx_};
  update_ = {};
  samples_ = 0;
  train_figures_.clear();
  auto start = std::chrono::steady_clock::now();
  if (auto ok = offer_and_wait(lock, false, [&] { return task_->sent; }); !ok)
    return ok.err();
  train_metrics m;
  m.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  m.samples = samples_;
  m.figures = train_figures_;
  for (const auto& [name, value] : train_figures_)
    if (name == "loss")
      m.loss = value;
  return m;
}

model_view task_bridge::update() {
  std::lock_guard<std::mutex> guard{mtx_};
  return update_;
}

uint64_t task_bridge::samples() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return samples_;
}

result<std::optional<eval_metrics>> task_bridge::evaluate_final() {
  std::unique_lock<std::mutex> lock{mtx_};
  if (auto ok = offer_and_wait(lock, true, [&] { return task_->evaluated; });
      !ok)
    return ok.err();
  if (task_->final_evaluation && task_->final_evaluation->figures.empty())
    return std::optional<eval_metrics>{}; // nothing to report
  return task_->final_evaluation;
}

void task_bridge::upload_closed() {
  std::lock_guard<std::mutex> guard{mtx_};
  if (task_)
    task_->uploaded = true;
  changed_.notify_all();
}

void task_bridge::run_ended(std::string failure) {
  std::lock_guard<std::mutex> guard{mtx_};
  ended_ = true;
  failure_ = std::move(failure);
  changed_.notify_all();
}

void task_bridge::leave_task() {
  task_->left = true;
  if (task_->info.evaluate_only) {
    task_->evaluated = true; // with no figures: the server need not wait
  } else if (!task_->sent && !cancelled_) { // else the first reason stays
    auto round = "round " + std::to_string(task_->info.round);
    cancelled_ =
        run_over()
            ? error{errc::cancelled,
                    round + ": the server ended the run during training"}
            : error{errc::bad_argument,
                    round + ": the loop went on to the next task without "
                            "task.send(...)"};
  }
  changed_.notify_all();
}

task_bridge::wait_result task_bridge::next_task(std::chrono::milliseconds slice,
                                                task_info& out) {
  std::unique_lock<std::mutex> lock{mtx_};
  if (task_ && task_->taken && !task_->left)
    leave_task();
  // After the server's Done, the run's end (next) ends the loop, not the
  // training task it cut short.
  auto ready = [&] {
    return (cancelled_ && !run_over()) || ended_ || (task_ && !task_->taken);
  };
  if (!changed_.wait_for(lock, slice, ready))
    return wait_result::timeout;
  if (cancelled_ || ended_)
    return wait_result::ended;
  task_->taken = true;
  out = task_->info;
  return wait_result::ready;
}

result<void> task_bridge::send(uint64_t id, model_view update, uint64_t samples,
                               figures train_figures) {
  std::lock_guard<std::mutex> guard{mtx_};
  if (!task_ || task_->info.id != id || task_->left)
    return error{errc::bad_argument, "task.send: this task is over"};
  if (task_->info.evaluate_only)
    return error{errc::bad_argument,
                 "task.send: the final model is only to be evaluated "
                 "(task.evaluate_only); call task.evaluate(...)"};
  if (task_->sent)
    return error{errc::bad_argument, "task.send: round " +
                                         std::to_string(task_->info.round) +
                                         "'s update was sent already"};
  update_ = std::move(update);
  samples_ = samples;
  train_figures_ = std::move(train_figures);
  task_->sent = true;
  changed_.notify_all();
  return {};
}

task_bridge::wait_result
task_bridge::wait_uploaded(uint64_t id, std::chrono::milliseconds slice) {
  std::unique_lock<std::mutex> lock{mtx_};
  auto over = [&] { return !task_ || task_->info.id != id || task_->uploaded; };
  if (!changed_.wait_for(lock, slice,
                         [&] { return over() || cancelled_ || ended_; }))
    return wait_result::timeout;
  return over() ? wait_result::ready : wait_result::ended;
}

result<void> task_bridge::evaluated(uint64_t id, const eval_metrics& m) {
  std::lock_guard<std::mutex> guard{mtx_};
  if (!task_ || task_->info.id != id || task_->left ||
      !task_->info.evaluate_only)
    return error{errc::bad_argument, "task.evaluate: this task is over"};
  if (task_->evaluated)
    return error{errc::bad_argument,
                 "task.evaluate: the final model was evaluated already"};
  task_->final_evaluation = m;
  task_->evaluated = true;
  changed_.notify_all();
  return {};
}

void task_bridge::cancel(const error& why) {
  std::lock_guard<std::mutex> guard{mtx_};
  if (!cancelled_)
    cancelled_ = why;
  changed_.notify_all();
}

std::string task_bridge::failure() const {
  std::lock_guard<std::mutex> guard{mtx_};
  if (cancelled_ && !(run_over() && ended_)) // else the run's end says why
    return to_string(*cancelled_);
  return failure_;
}

bool task_bridge::ended() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return ended_;
}

namespace {

/// Trains with Python's code: see task_bridge. parameters() views the
/// received model until the update is sent, then the update's arrays.
class bridge_trainer final : public trainer {
public:
  explicit bridge_trainer(std::shared_ptr<task_bridge> b)
      : bridge_(std::move(b)) {}

  result<void> adopt_layout(const manifest& server_layout) override {
    if (auto ok = bridge_->adopt(server_layout); !ok)
      return ok.err();
    layout_ = server_layout;
    return {};
  }

  void begin_round(uint32_t round, bool evaluate_only) override {
    trained_ = false;
    evaluate_only_ = evaluate_only;
    bridge_->begin_round(round, evaluate_only);
  }

  const manifest& layout() const override { return layout_; }

  model_view parameters() override {
    return trained_ ? bridge_->update() : bridge_->received();
  }

  result<train_metrics> train() override {
    auto m = bridge_->train();
    trained_ = static_cast<bool>(m);
    return m;
  }

  uint64_t sample_count() const override { return bridge_->samples(); }

  result<std::optional<eval_metrics>> evaluate_local() override {
    if (!evaluate_only_) // Python sends its evaluation of a round itself
      return std::optional<eval_metrics>{};
    return bridge_->evaluate_final();
  }

  void upload_closed() override { bridge_->upload_closed(); }

private:
  std::shared_ptr<task_bridge> bridge_;
  manifest layout_;
  bool trained_ = false;
  bool evaluate_only_ = false;
};

} // namespace

std::unique_ptr<trainer> make_bridge_trainer(std::shared_ptr<task_bridge> b,
                                             const client_configs&) {
  return std::make_unique<bridge_trainer>(std::move(b));
}

} // namespace fedcaf::bridge
