// The LibTorch adapter: every c10::Error is caught here and becomes an error.
// The trainer runs a network (torch_network.hpp: the CNN or a TorchScript
// module) on a tensor_set with train_configs.loss_fn.

#include <chrono>
#include <cstring>
#include <thread>

#include <torch/torch.h>

#include "dp_sgd.hpp"
#include "fedcaf/carried.hpp"
#include "fedcaf/trainer.hpp"
#include "torch_network.hpp"

namespace fedcaf {

namespace {

/// A small CNN for 28 x 28 images: two 3 x 3 convolutions with pooling, then
/// two fully connected layers. Its layers are DP-aware: with a tape they
/// record what DP-SGD's clipping needs; without one they are plain layers.
struct cnn_impl : torch::nn::Module {
  explicit cnn_impl(const model_config& cfg, dp::tape* tape = nullptr)
      : conv1(torch::nn::Conv2dOptions(cfg.num_channel, 16, 3).padding(1),
              tape),
        conv2(torch::nn::Conv2dOptions(16, 32, 3).padding(1), tape),
        fc1(32 * 7 * 7, 64, tape), fc2(64, cfg.num_classes, tape) {
    register_module("conv1", conv1);
    register_module("conv2", conv2);
    register_module("fc1", fc1);
    register_module("fc2", fc2);
  }

  torch::Tensor forward(torch::Tensor x) {
    x = torch::max_pool2d(torch::relu(conv1->forward(x)), 2);
    x = torch::max_pool2d(torch::relu(conv2->forward(x)), 2);
    x = torch::relu(fc1->forward(x.flatten(1)));
    return fc2->forward(x);
  }

  dp::conv2d conv1;
  dp::conv2d conv2;
  dp::linear fc1;
  dp::linear fc2;
};
TORCH_MODULE_IMPL(cnn, cnn_impl);

/// The CNN as a network; its state is its parameters.
class cnn_network final : public network {
public:
  /// With `dp`, its layers record what DP-SGD's clipping needs. Throws
  /// std::invalid_argument iff a parameter belongs to no DP-aware layer.
  cnn_network(const model_config& cfg, bool dp)
      : net_(cfg, dp ? &tape_ : nullptr), dp_(dp) {
    if (dp)
      if (auto name = dp::uncovered_parameter(*net_); !name.empty())
        throw std::invalid_argument{
            "DP-SGD: parameter '" + name +
            "' belongs to no DP-aware layer, so its per-sample gradients "
            "cannot be clipped"};
  }

  torch::Tensor forward(const torch::Tensor& x) override {
    return net_->forward(x);
  }
  void set_training(bool on) override { net_->train(on); }
  std::vector<torch::Tensor> parameters() override {
    return net_->parameters();
  }
  std::vector<named_tensor> state() override {
    std::vector<named_tensor> out;
    for (const auto& p : net_->named_parameters())
      out.emplace_back(p.key(), p.value());
    return out;
  }
  void to(const torch::Device& device) override { net_->to(device); }
  dp::tape* dp_tape() override { return dp_ ? &tape_ : nullptr; }

private:
  dp::tape tape_; // before net_, whose layers record on it
  cnn net_;
  bool dp_;
};

/// The network model_configs names: the CNN or a TorchScript file.
result<std::unique_ptr<network>> make_network(const client_configs& cfg) {
  if (cfg.model.model_name == model_kind::torchscript)
    return load_script_network(cfg.model.path);
  return std::unique_ptr<network>{std::make_unique<cnn_network>(
      cfg.model, cfg.train.dp.mode != dp_sgd_mode::none)};
}

std::vector<torch::Tensor> tensors_of(const std::vector<named_tensor>& state) {
  std::vector<torch::Tensor> out;
  for (const auto& [name, t] : state)
    out.push_back(t);
  return out;
}

model_view view_of(const std::vector<torch::Tensor>& tensors) {
  model_view view;
  for (const auto& t : tensors)
    view.tensors.emplace_back(static_cast<std::byte*>(t.data_ptr()),
                              t.nbytes());
  return view;
}

uint32_t threads_or_all(uint32_t n) {
  return n > 0 ? n : std::max(1u, std::thread::hardware_concurrency());
}

torch::ScalarType scalar_type_of(dtype t) {
  switch (t) {
  case dtype::uint8:
    return torch::kUInt8;
  case dtype::int64:
    return torch::kInt64;
  default:
    return torch::kFloat32;
  }
}

torch::Tensor tensor_of(const tensor_array& a) {
  std::vector<int64_t> shape(a.shape.begin(), a.shape.end());
  return torch::from_blob(const_cast<uint8_t*>(a.bytes.data()), shape,
                          scalar_type_of(a.type));
}

bool is_classification(const std::string& loss) {
  return loss == "cross_entropy" || loss == "nll";
}

/// Samples as tensors viewing a tensor_set's memory (no copy), and the
/// batches cut from them.
struct torch_samples {
  torch::Tensor features;
  torch::Tensor labels;
  double mean = 0;
  double stddev = 1;

  /// Features of samples `idx` as float32: uint8 scaled to [0, 1], then
  /// (x - mean) / stddev.
  torch::Tensor x(const torch::Tensor& idx) const {
    auto x = features.index_select(0, idx).to(torch::kFloat32);
    if (features.scalar_type() == torch::kUInt8)
      x.div_(255.0);
    if (mean != 0 || stddev != 1)
      x.sub_(mean).div_(stddev);
    return x;
  }

  /// Labels of samples `idx`: int64 class ids for a classification loss,
  /// float32 otherwise.
  torch::Tensor y(const torch::Tensor& idx, const std::string& loss) const {
    return labels.index_select(0, idx).to(
        is_classification(loss) ? torch::kInt64 : torch::kFloat32);
  }
};

torch_samples samples_of(const tensor_set& s) {
  return {tensor_of(s.features), tensor_of(s.labels), s.mean, s.stddev};
}

torch_samples samples_of(const image_set& d) {
  auto n = static_cast<int64_t>(d.count);
  return {torch::from_blob(const_cast<uint8_t*>(d.pixels.data()),
                           {n, 1, int64_t{d.rows}, int64_t{d.cols}},
                           torch::kUInt8),
          torch::from_blob(const_cast<uint8_t*>(d.labels.data()), {n},
                           torch::kUInt8),
          fashion_mnist_mean, fashion_mnist_stddev};
}

/// Returns an error iff `labels` do not suit `loss`: a classification loss
/// needs one class id (int64 or uint8) per sample.
result<void> check_labels(const tensor_array& labels, const std::string& loss) {
  bool ids = labels.type != dtype::float32 && labels.shape.size() == 1;
  if (is_classification(loss) && !ids)
    return error{errc::bad_config,
                 "train_configs.loss_fn " + loss +
                     " needs one class id per sample as labels (int64 or "
                     "uint8, shape [n]); these are " +
                     std::string{dtype_name(labels.type)} + " of " +
                     std::to_string(labels.shape.size()) + " dimensions"};
  return {};
}

/// The loss `name` of `out` against `y` (reduction: at::Reduction).
torch::Tensor loss_of(const std::string& name, const torch::Tensor& out,
                      const torch::Tensor& y,
                      int64_t reduction = at::Reduction::Mean) {
  if (name == "nll")
    return torch::nll_loss(out, y, {}, reduction);
  if (name == "mse")
    return torch::mse_loss(out, y, reduction);
  if (name == "bce_with_logits")
    return torch::binary_cross_entropy_with_logits(out, y, {}, {}, reduction);
  return torch::cross_entropy_loss(out, y, {}, reduction);
}

/// Correct predictions in a batch, as a fraction of samples times the batch
/// size: argmax for classification, the sign of the logit against y > 0.5
/// for bce_with_logits (per output element), none for mse.
double correct_in(const std::string& loss, const torch::Tensor& out,
                  const torch::Tensor& y) {
  if (is_classification(loss))
    return out.argmax(1).eq(y).sum().item<double>();
  if (loss == "bce_with_logits")
    return out.gt(0).eq(y.gt(0.5)).to(torch::kFloat64).mean().item<double>() *
           static_cast<double>(y.size(0));
  return 0;
}

/// Returns the error of work stopped before `unit` `at` of `of` (`what`:
/// training, evaluation).
error stopped(const char* what, const char* unit, int64_t at, int64_t of) {
  return {errc::cancelled, std::string{what} + " stopped at " + unit + " " +
                               std::to_string(at + 1) + " of " +
                               std::to_string(of) + ": the run is ending"};
}

/// Evaluates `net` on samples `idx` of `data` in batches of `batch`.
/// Returns cancelled iff `by` is asked to stop (checked between batches).
result<eval_metrics> evaluate_on(network& net, const torch_samples& data,
                                 const torch::Tensor& idx, int64_t batch,
                                 const std::string& loss,
                                 const torch::Device& device,
                                 const stoppable& by) {
  torch::NoGradGuard no_grad;
  net.set_training(false);
  const int64_t n = idx.numel();
  double loss_sum = 0, correct = 0;
  for (int64_t at = 0; at < n; at += batch) {
    if (by.stop_asked())
      return stopped("evaluation", "batch", at / batch,
                     (n + batch - 1) / batch);
    auto part = idx.slice(0, at, std::min(n, at + batch));
    auto y = data.y(part, loss).to(device);
    auto out = net.forward(data.x(part).to(device));
    loss_sum += loss_of(loss, out, y).item<double>() *
                static_cast<double>(part.numel());
    correct += correct_in(loss, out, y);
  }
  auto count = static_cast<double>(std::max<int64_t>(n, 1));
  eval_metrics m;
  m.loss = loss_sum / count;
  m.accuracy = correct / count;
  m.samples = static_cast<uint64_t>(n);
  return m;
}

template <class F> auto guarded(const char* what, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const std::exception& e) {
    std::string why = e.what();
    return error{errc::internal,
                 std::string{what} + ": " + why.substr(0, why.find('\n'))};
  }
}

torch::Tensor index_tensor(const std::vector<uint32_t>& indices) {
  std::vector<int64_t> idx(indices.begin(), indices.end());
  return torch::tensor(idx, torch::kInt64);
}

/// cpu, or cuda iff LibTorch sees a CUDA device (config.cpp accepts cuda
/// only when LibTorch was built with it). Throws iff none is visible.
torch::Device device_of(const train_config& t) {
  if (t.device != "cuda")
    return torch::kCPU;
  if (!torch::cuda::is_available())
    throw std::invalid_argument{"train_configs.device cuda: LibTorch sees "
                                "no CUDA device"};
  return torch::kCUDA;
}

/// A network's state in host memory, what parameters() views. On the CPU
/// it is the network's own tensors; on a GPU a host copy, loaded into the
/// network before it runs and stored back after it trained.
/// Integer and bool buffers travel as float32 (fedcaf/carried.hpp): what
/// parameters() views of them is a float32 copy, rounded into the network
/// before it runs (load) and widened from it after (store).
class host_state {
public:
  host_state(network& net, const torch::Device& device) {
    auto state = net.state();
    layout_ = layout_of(state);
    host_ = tensors_of(state);
    for (size_t i = 0; i < host_.size(); ++i)
      if (layout_.tensors[i].held) {
        held_.push_back({i, host_[i]});
        host_[i] = torch::empty(host_[i].sizes(), torch::kFloat32);
      }
    if (!device.is_cpu()) {
      net.to(device);
      device_ = tensors_of(net.state());
      for (auto& t : host_)
        if (t.is_floating_point())
          t = t.clone();
    }
    if (auto ok = store(); !ok)
      throw std::invalid_argument{ok.err().message};
  }

  const manifest& layout() const { return layout_; }
  model_view view() const { return view_of(host_); }

  void load() {
    copy(host_, device_);
    for (auto& [i, held] : held_) {
      narrow(layout_.tensors[i], bytes_of(host_[i]), bytes_of(held));
      if (!device_.empty())
        device_[i].copy_(held);
    }
  }

  /// Fails iff a counter outgrew float32's integers (2^24).
  result<void> store() {
    copy(device_, host_);
    for (auto& [i, held] : held_) {
      if (!device_.empty())
        held.copy_(device_[i]);
      if (auto ok =
              widen(layout_.tensors[i], bytes_of(held), bytes_of(host_[i]));
          !ok)
        return ok;
    }
    return {};
  }

private:
  static std::span<std::byte> bytes_of(const torch::Tensor& t) {
    return {static_cast<std::byte*>(t.data_ptr()), t.nbytes()};
  }

  /// Copies `from` into `to`; nothing on the CPU (device_ is empty).
  void copy(const std::vector<torch::Tensor>& from,
            std::vector<torch::Tensor>& to) {
    torch::NoGradGuard no_grad;
    if (device_.empty())
      return;
    for (size_t i = 0; i < to.size(); ++i)
      to[i].copy_(from[i]);
  }

  manifest layout_;
  std::vector<torch::Tensor> host_;
  std::vector<torch::Tensor> device_; // empty on the CPU
  /// Carried tensors: their index, and the network's own (on the CPU) or
  /// a host copy of it.
  std::vector<std::pair<size_t, torch::Tensor>> held_;
};

class torch_trainer final : public trainer {
public:
  torch_trainer(const client_configs& cfg, std::unique_ptr<network> net,
                client_data data, uint64_t seed, uint32_t num_threads)
      : cfg_(cfg.train), net_(std::move(net)), device_(device_of(cfg.train)),
        state_(*net_, device_), data_(std::move(data)),
        train_(samples_of(*data_.train)),
        indices_(index_tensor(data_.train_indices)),
        generator_(at::detail::createCPUGenerator(seed)), seed_(seed),
        num_threads_(
            threads_or_all(num_threads ? num_threads : cfg.train.num_threads)) {
    if (data_.test && !data_.test_indices.empty()) {
      test_ = samples_of(*data_.test);
      test_indices_ = index_tensor(data_.test_indices);
    }
  }

  const manifest& layout() const override { return state_.layout(); }

  /// Each round's shuffles (and DP-SGD's noise) come from the seed and the
  /// round: a round trains the same whatever this process did before (a
  /// client, or a run, resumed after a restart trains as one never
  /// stopped).
  void begin_round(uint32_t round, bool) override {
    generator_.set_current_seed(seed_ * 1000003ull + round);
  }

  model_view parameters() override { return state_.view(); }

  uint64_t sample_count() const override { return indices_.numel(); }

  result<train_metrics> train() override {
    return guarded("training", [this]() -> result<train_metrics> {
      state_.load();
      auto m = run_training();
      if (auto ok = state_.store(); !ok)
        return ok.err();
      return m;
    });
  }

  result<std::optional<eval_metrics>> evaluate_local() override {
    if (!test_)
      return std::optional<eval_metrics>{};
    return guarded("evaluation",
                   [this]() -> result<std::optional<eval_metrics>> {
                     at::set_num_threads(static_cast<int>(num_threads_));
                     state_.load();
                     auto m = evaluate_on(*net_, *test_, test_indices_,
                                          cfg_.val_batch_size, cfg_.loss_fn,
                                          device_, *this);
                     if (!m)
                       return m.err();
                     return std::optional<eval_metrics>{*m};
                   });
  }

private:
  std::unique_ptr<torch::optim::Optimizer> make_optimizer() {
    const auto& o = cfg_.optim;
    if (o.name == "Adam")
      return std::make_unique<torch::optim::Adam>(
          net_->parameters(),
          torch::optim::AdamOptions(o.lr).weight_decay(o.weight_decay));
    return std::make_unique<torch::optim::SGD>(
        net_->parameters(), torch::optim::SGDOptions(o.lr)
                                .momentum(o.momentum)
                                .weight_decay(o.weight_decay));
  }

  bool dp_on() const { return cfg_.dp.mode != dp_sgd_mode::none; }

  dp::clip_mode clip_mode() const {
    if (cfg_.dp.mode == dp_sgd_mode::per_sample)
      return dp::clip_mode::per_sample;
    return cfg_.dp.mode == dp_sgd_mode::ghost ? dp::clip_mode::ghost
                                              : dp::clip_mode::fused;
  }

  /// The samples of step `step`: a Poisson sample of rate `rate` (DP-SGD
  /// with poisson_sampling), else the next slice of a shuffled epoch.
  torch::Tensor draw_batch(int64_t step, int64_t batches_per_epoch,
                           double rate) {
    const int64_t n = indices_.numel();
    const int64_t batch = cfg_.train_batch_size;
    if (dp_on() && cfg_.dp.poisson_sampling)
      return indices_.masked_select(
          torch::rand({n}, generator_, torch::kFloat64) < rate);
    auto b = step % batches_per_epoch;
    if (b == 0)
      order_ = indices_.index_select(
          0, torch::randperm(n, generator_, torch::kInt64));
    return order_.slice(0, b * batch, std::min(n, (b + 1) * batch));
  }

  /// One DP-SGD gradient: the sum of per-sample gradients clipped to C,
  /// plus N(0, (sigma C)^2) per element, over the expected batch size.
  /// Returns the batch's summed loss.
  double private_gradient(const torch::Tensor& x, const torch::Tensor& y,
                          double expected_batch) {
    double loss_sum = 0;
    auto& tape = *net_->dp_tape();
    if (y.numel() > 0) { // a Poisson sample may be empty: noise only
      tape.clear();
      auto losses =
          loss_of(cfg_.loss_fn, net_->forward(x), y, at::Reduction::None);
      if (losses.dim() > 1) // one loss per sample
        losses = losses.flatten(1).mean(1);
      loss_sum = losses.sum().item<double>();
      dp::clip_and_accumulate(tape, losses, cfg_.dp.max_grad_norm, clip_mode());
    }
    dp::add_noise_and_average(net_->parameters(),
                              cfg_.dp.noise_multiplier * cfg_.dp.max_grad_norm,
                              expected_batch, generator_);
    return loss_sum;
  }

  /// One step on samples `idx`; returns the batch's summed loss.
  double step(torch::optim::Optimizer& optimizer, const torch::Tensor& idx,
              double expected_batch) {
    auto x = train_.x(idx).to(device_);
    auto y = train_.y(idx, cfg_.loss_fn).to(device_);
    optimizer.zero_grad();
    double loss_sum = 0;
    if (dp_on()) {
      loss_sum = private_gradient(x, y, expected_batch);
    } else {
      auto loss = loss_of(cfg_.loss_fn, net_->forward(x), y);
      loss.backward();
      loss_sum = loss.item<double>() * static_cast<double>(idx.numel());
    }
    add_proximal_gradient();
    optimizer.step();
    return loss_sum;
  }

  /// FedProx (Li et al. 2020): the local objective gets
  /// mu / 2 ||w - w_global||^2, whose gradient mu (w - w_global) is added
  /// to every parameter's (after DP-SGD's noise: it reads no data).
  void add_proximal_gradient() {
    if (cfg_.proximal_mu <= 0)
      return;
    torch::NoGradGuard no_grad;
    auto params = net_->parameters();
    for (size_t i = 0; i < params.size(); ++i) {
      auto& g = params[i].mutable_grad();
      auto pull = (params[i] - global_[i]) * cfg_.proximal_mu;
      if (g.defined())
        g.add_(pull);
      else
        g = pull;
    }
  }

  /// Trains step by step; returns cancelled iff a stop is asked before the
  /// last step.
  result<train_metrics> run_training() {
    auto start = std::chrono::steady_clock::now();
    at::set_num_threads(static_cast<int>(num_threads_));
    net_->set_training(true);
    auto optimizer = make_optimizer();
    global_.clear();
    if (cfg_.proximal_mu > 0) { // the model received, to be pulled towards
      torch::NoGradGuard no_grad;
      for (const auto& p : net_->parameters())
        global_.push_back(p.detach().clone());
    }
    const int64_t n = indices_.numel();
    const int64_t batch = cfg_.train_batch_size;
    const int64_t batches_per_epoch = (n + batch - 1) / batch;
    const int64_t steps = cfg_.mode == "step"
                              ? cfg_.num_local_steps
                              : batches_per_epoch * cfg_.num_local_epochs;
    const double expected_batch =
        static_cast<double>(std::min<int64_t>(batch, n));
    const double rate = expected_batch / static_cast<double>(n);
    double loss_sum = 0;
    uint64_t seen = 0;
    for (int64_t s = 0; s < steps; ++s) {
      if (stop_asked())
        return stopped("training", "step", s, steps);
      auto idx = draw_batch(s, batches_per_epoch, rate);
      loss_sum += step(*optimizer, idx, expected_batch);
      seen += idx.numel();
    }
    std::chrono::duration<double> took =
        std::chrono::steady_clock::now() - start;
    train_metrics m;
    m.loss = seen ? loss_sum / static_cast<double>(seen) : 0;
    m.samples = seen;
    m.seconds = took.count();
    if (dp_on()) {
      m.dp_steps = static_cast<uint64_t>(steps);
      m.dp_sample_rate = rate;
    }
    return m;
  }

  train_config cfg_;
  std::unique_ptr<network> net_;
  torch::Device device_;
  host_state state_;
  client_data data_; // owns the memory train_ and test_ view
  torch_samples train_;
  std::optional<torch_samples> test_;
  torch::Tensor indices_;
  torch::Tensor test_indices_;
  torch::Tensor order_;               // this epoch's shuffled samples
  std::vector<torch::Tensor> global_; ///< FedProx: the round's received model
  at::Generator generator_;
  uint64_t seed_; ///< the client's; each round reseeds generator_ from it
  uint32_t num_threads_;
};

class torch_evaluator final : public evaluator {
public:
  torch_evaluator(const client_configs& cfg,
                  std::shared_ptr<const image_set> test, uint32_t num_threads)
      : net_(cfg.model, false), state_(net_, torch::kCPU),
        test_(std::move(test)), samples_(samples_of(*test_)),
        batch_(cfg.train.val_batch_size),
        num_threads_(threads_or_all(num_threads)) {}

  result<eval_metrics> evaluate(const const_model_view& model) override {
    auto params = state_.view();
    FEDCAF_REQUIRE(model.tensors.size() == params.tensors.size(),
                   errc::manifest_mismatch, model.tensors.size(),
                   params.tensors.size());
    for (size_t i = 0; i < params.tensors.size(); ++i) {
      FEDCAF_REQUIRE(model.tensors[i].size() == params.tensors[i].size(),
                     errc::manifest_mismatch, i, model.tensors[i].size());
      std::memcpy(params.tensors[i].data(), model.tensors[i].data(),
                  params.tensors[i].size());
    }
    return guarded("evaluation", [this]() -> result<eval_metrics> {
      at::set_num_threads(static_cast<int>(num_threads_));
      auto all = torch::arange(int64_t{test_->count}, torch::kInt64);
      return evaluate_on(net_, samples_, all, batch_, "cross_entropy",
                         torch::kCPU, *this);
    });
  }

private:
  cnn_network net_;
  host_state state_;
  std::shared_ptr<const image_set> test_;
  torch_samples samples_;
  uint32_t batch_;
  uint32_t num_threads_;
};

} // namespace

result<std::unique_ptr<trainer>> make_trainer(const client_configs& cfg,
                                              client_data data, uint64_t seed,
                                              uint32_t num_threads) {
  FEDCAF_REQUIRE(data.train && !data.train_indices.empty(), errc::bad_config,
                 data.train_indices.size());
  if (auto ok = check_labels(data.train->labels, cfg.train.loss_fn); !ok)
    return ok.err();
  return guarded(
      "building the trainer", [&]() -> result<std::unique_ptr<trainer>> {
        auto net = make_network(cfg);
        if (!net)
          return net.err();
        return std::make_unique<torch_trainer>(
            cfg, std::move(*net), std::move(data), seed, num_threads);
      });
}

result<std::unique_ptr<evaluator>>
make_evaluator(const client_configs& cfg, std::shared_ptr<const image_set> test,
               uint32_t num_threads) {
  return guarded("building the evaluator",
                 [&]() -> result<std::unique_ptr<evaluator>> {
                   return std::make_unique<torch_evaluator>(
                       cfg, std::move(test), num_threads);
                 });
}

result<model_snapshot> make_initial_model(const model_config& cfg) {
  return guarded("building the initial model", [&]() -> result<model_snapshot> {
    torch::manual_seed(cfg.seed);
    client_configs cc;
    cc.model = cfg;
    auto net = make_network(cc);
    if (!net)
      return net.err();
    auto state = (*net)->state();
    model_snapshot s;
    s.layout = layout_of(state);
    s.bytes = byte_buffer::uninitialized(s.layout.total_bytes());
    size_t at = 0;
    for (size_t i = 0; i < state.size(); ++i) {
      const auto& t = state[i].second;
      const auto& info = s.layout.tensors[i];
      std::span<const std::byte> from{static_cast<std::byte*>(t.data_ptr()),
                                      t.nbytes()};
      if (!info.held)
        std::memcpy(s.bytes.data() + at, from.data(), from.size());
      else if (auto ok = widen(info, from,
                               s.bytes.bytes().subspan(at, info.byte_size));
               !ok)
        return ok.err();
      at += info.byte_size;
    }
    return s;
  });
}

} // namespace fedcaf
