// The LibTorch adapter: every c10::Error is caught here and becomes an error.

#include <chrono>
#include <cstring>
#include <thread>

#include <torch/torch.h>

#include "dp_sgd.hpp"
#include "fedcaf/trainer.hpp"

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

manifest layout_of(cnn& net) {
  manifest m;
  for (const auto& p : net->named_parameters()) {
    std::vector<uint64_t> shape(p.value().sizes().begin(),
                                p.value().sizes().end());
    m.tensors.push_back(make_tensor_info(p.key(), dtype::float32, shape));
  }
  return m;
}

model_view params_of(cnn& net) {
  model_view view;
  for (auto& p : net->parameters())
    view.tensors.emplace_back(static_cast<std::byte*>(p.data_ptr()),
                              p.nbytes());
  return view;
}

uint32_t threads_or_all(uint32_t n) {
  return n > 0 ? n : std::max(1u, std::thread::hardware_concurrency());
}

/// Pixels of samples `idx` as a normalised float batch [n, 1, rows, cols].
torch::Tensor batch_images(const torch::Tensor& all, const torch::Tensor& idx) {
  constexpr double mean = 0.2860, stddev = 0.3530; // Fashion-MNIST
  auto x = all.index_select(0, idx).to(torch::kFloat32).div_(255.0);
  return x.sub_(mean).div_(stddev).unsqueeze(1);
}

torch::Tensor images_tensor(const image_set& d) {
  return torch::from_blob(const_cast<uint8_t*>(d.pixels.data()),
                          {d.count, d.rows, d.cols}, torch::kUInt8);
}

torch::Tensor labels_tensor(const image_set& d) {
  return torch::from_blob(const_cast<uint8_t*>(d.labels.data()), {d.count},
                          torch::kUInt8)
      .to(torch::kInt64);
}

template <class F> auto guarded(const char* what, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const std::exception& e) {
    return error{errc::internal, std::string{what} + ": " + e.what()};
  }
}

class torch_trainer final : public trainer {
public:
  torch_trainer(const client_configs& cfg,
                std::shared_ptr<const image_set> data,
                std::vector<uint32_t> indices, uint64_t seed,
                uint32_t num_threads)
      : cfg_(cfg.train),
        net_(cfg.model, cfg.train.dp.mode == "none" ? nullptr : &tape_),
        data_(std::move(data)), images_(images_tensor(*data_)),
        labels_(labels_tensor(*data_)),
        generator_(at::detail::createCPUGenerator(seed)),
        num_threads_(
            threads_or_all(num_threads ? num_threads : cfg.train.num_threads)) {
    std::vector<int64_t> idx(indices.begin(), indices.end());
    indices_ = torch::tensor(idx, torch::kInt64);
    layout_ = layout_of(net_);
    if (cfg_.dp.mode != "none")
      if (auto name = dp::uncovered_parameter(*net_); !name.empty())
        throw std::invalid_argument{
            "DP-SGD: parameter '" + name +
            "' belongs to no DP-aware layer, so its per-sample gradients "
            "cannot be clipped"};
  }

  const manifest& layout() const override { return layout_; }

  model_view parameters() override { return params_of(net_); }

  uint64_t sample_count() const override { return indices_.numel(); }

  result<train_metrics> train() override {
    return guarded("training", [this]() -> result<train_metrics> {
      return run_training();
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

  bool dp_on() const { return cfg_.dp.mode != "none"; }

  dp::clip_mode clip_mode() const {
    if (cfg_.dp.mode == "per_sample")
      return dp::clip_mode::per_sample;
    return cfg_.dp.mode == "ghost" ? dp::clip_mode::ghost
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
    if (y.numel() > 0) { // a Poisson sample may be empty: noise only
      tape_.clear();
      auto losses = torch::nn::functional::cross_entropy(
          net_->forward(x), y,
          torch::nn::functional::CrossEntropyFuncOptions().reduction(
              torch::kNone));
      loss_sum = losses.sum().item<double>();
      dp::clip_and_accumulate(tape_, losses, cfg_.dp.max_grad_norm,
                              clip_mode());
    }
    dp::add_noise_and_average(net_->parameters(),
                              cfg_.dp.noise_multiplier * cfg_.dp.max_grad_norm,
                              expected_batch, generator_);
    return loss_sum;
  }

  train_metrics run_training() {
    auto start = std::chrono::steady_clock::now();
    at::set_num_threads(static_cast<int>(num_threads_));
    net_->train();
    auto optimizer = make_optimizer();
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
    for (int64_t step = 0; step < steps; ++step) {
      auto idx = draw_batch(step, batches_per_epoch, rate);
      auto x = batch_images(images_, idx);
      auto y = labels_.index_select(0, idx);
      optimizer->zero_grad();
      if (dp_on()) {
        loss_sum += private_gradient(x, y, expected_batch);
      } else {
        auto loss = torch::nn::functional::cross_entropy(net_->forward(x), y);
        loss.backward();
        loss_sum += loss.item<double>() * static_cast<double>(idx.numel());
      }
      optimizer->step();
      seen += idx.numel();
    }
    std::chrono::duration<double> took =
        std::chrono::steady_clock::now() - start;
    train_metrics m{seen ? loss_sum / static_cast<double>(seen) : 0, seen,
                    took.count()};
    if (dp_on()) {
      m.dp_steps = static_cast<uint64_t>(steps);
      m.dp_sample_rate = rate;
    }
    return m;
  }

  train_config cfg_;
  dp::tape tape_; // before net_, whose layers record on it
  cnn net_;
  std::shared_ptr<const image_set> data_;
  torch::Tensor images_;
  torch::Tensor labels_;
  torch::Tensor indices_;
  torch::Tensor order_; // this epoch's shuffled samples
  at::Generator generator_;
  uint32_t num_threads_;
  manifest layout_;
};

class torch_evaluator final : public evaluator {
public:
  torch_evaluator(const client_configs& cfg,
                  std::shared_ptr<const image_set> test, uint32_t num_threads)
      : net_(cfg.model), test_(std::move(test)), images_(images_tensor(*test_)),
        labels_(labels_tensor(*test_)), batch_(cfg.train.val_batch_size),
        num_threads_(threads_or_all(num_threads)) {
    layout_ = layout_of(net_);
  }

  result<eval_metrics> evaluate(const const_model_view& model) override {
    FEDCAF_REQUIRE(model.tensors.size() == layout_.tensors.size(),
                   errc::manifest_mismatch, model.tensors.size(),
                   layout_.tensors.size());
    auto params = params_of(net_);
    for (size_t i = 0; i < params.tensors.size(); ++i) {
      FEDCAF_REQUIRE(model.tensors[i].size() == params.tensors[i].size(),
                     errc::manifest_mismatch, i, model.tensors[i].size());
      std::memcpy(params.tensors[i].data(), model.tensors[i].data(),
                  params.tensors[i].size());
    }
    return guarded("evaluation", [this]() -> result<eval_metrics> {
      return run_evaluation();
    });
  }

private:
  eval_metrics run_evaluation() {
    at::set_num_threads(static_cast<int>(num_threads_));
    torch::NoGradGuard no_grad;
    net_->eval();
    const int64_t n = test_->count;
    double loss_sum = 0;
    int64_t correct = 0;
    for (int64_t at = 0; at < n; at += batch_) {
      auto idx =
          torch::arange(at, std::min(n, at + int64_t{batch_}), torch::kInt64);
      auto logits = net_->forward(batch_images(images_, idx));
      auto y = labels_.index_select(0, idx);
      loss_sum +=
          torch::nn::functional::cross_entropy(
              logits, y,
              torch::nn::functional::CrossEntropyFuncOptions().reduction(
                  torch::kSum))
              .item<double>();
      correct += logits.argmax(1).eq(y).sum().item<int64_t>();
    }
    auto count = static_cast<double>(n);
    return {loss_sum / count, static_cast<double>(correct) / count,
            static_cast<uint64_t>(n)};
  }

  cnn net_;
  std::shared_ptr<const image_set> test_;
  torch::Tensor images_;
  torch::Tensor labels_;
  uint32_t batch_;
  uint32_t num_threads_;
  manifest layout_;
};

} // namespace

result<std::unique_ptr<trainer>>
make_trainer(const client_configs& cfg, std::shared_ptr<const image_set> data,
             std::vector<uint32_t> indices, uint64_t seed,
             uint32_t num_threads) {
  FEDCAF_REQUIRE(!indices.empty(), errc::bad_config, indices.size());
  return guarded(
      "building the trainer", [&]() -> result<std::unique_ptr<trainer>> {
        return std::make_unique<torch_trainer>(
            cfg, std::move(data), std::move(indices), seed, num_threads);
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
    cnn net{cfg};
    model_snapshot s;
    s.layout = layout_of(net);
    s.bytes = byte_buffer::uninitialized(s.layout.total_bytes());
    size_t at = 0;
    for (auto& p : net->parameters()) {
      std::memcpy(s.bytes.data() + at, p.data_ptr(), p.nbytes());
      at += p.nbytes();
    }
    return s;
  });
}

} // namespace fedcaf
