#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <thread>

#include <doctest/doctest.h>
#include <torch/script.h>

#include <filesystem>
#include <unistd.h>

#include "fedcaf/trainer.hpp"

using namespace fedcaf;

namespace {

std::shared_ptr<const image_set> test_set() {
  static auto set = std::make_shared<image_set>(
      *read_fashion_mnist("/usr/share/datasets/fashion-mnist", "t10k"));
  return set;
}

/// Samples `indices` of Fashion-MNIST's t10k set, to train on.
client_data test_samples(std::vector<uint32_t> indices) {
  static auto set = std::make_shared<tensor_set>(
      *read_fashion_mnist_set("/usr/share/datasets/fashion-mnist", "t10k"));
  return {set, std::move(indices)};
}

client_configs small_configs() {
  client_configs c;
  c.train.mode = "step";
  c.train.num_local_steps = 60;
  c.train.optim = {"SGD", 0.05, 0.9, 0};
  c.train.train_batch_size = 32;
  c.train.val_batch_size = 500;
  return c;
}

} // namespace

TEST_CASE("the initial model is drawn from the seed") {
  model_config m;
  auto a = make_initial_model(m);
  auto b = make_initial_model(m);
  m.seed = 43;
  auto c = make_initial_model(m);
  REQUIRE(a);
  REQUIRE(b);
  REQUIRE(c);
  CHECK(a->layout == b->layout);
  CHECK(a->layout.tensors.front().name == "conv1.weight");
  CHECK(std::memcmp(a->bytes.data(), b->bytes.data(), a->bytes.size()) == 0);
  CHECK(std::memcmp(a->bytes.data(), c->bytes.data(), a->bytes.size()) != 0);
}

TEST_CASE("training from the global model lowers the test loss") {
  auto cfg = small_configs();
  auto initial = make_initial_model(cfg.model);
  REQUIRE(initial);
  std::vector<uint32_t> indices(2000);
  for (uint32_t i = 0; i < indices.size(); ++i)
    indices[i] = i;
  auto t = make_trainer(cfg, test_samples(indices), 1, 2);
  REQUIRE(t);
  auto& tr = **t;
  CHECK(tr.layout() == initial->layout);
  CHECK(tr.sample_count() == 2000);
  // Load the global model through the same views the chunk writer uses.
  auto params = tr.parameters();
  auto global = initial->view();
  for (size_t i = 0; i < params.tensors.size(); ++i)
    std::memcpy(params.tensors[i].data(), global.tensors[i].data(),
                global.tensors[i].size());
  auto eval = make_evaluator(cfg, test_set(), 2);
  REQUIRE(eval);
  auto before = (*eval)->evaluate(global);
  REQUIRE(before);
  CHECK(before->samples == 10000);
  CHECK(before->accuracy < 0.3);
  auto m = tr.train();
  REQUIRE(m);
  CHECK(m->samples == 60u * 32);
  const_model_view trained;
  for (auto s : tr.parameters().tensors)
    trained.tensors.emplace_back(s);
  auto after = (*eval)->evaluate(trained);
  REQUIRE(after);
  CHECK(after->loss < before->loss);
  CHECK(after->accuracy > 0.5);
}

TEST_CASE("an evaluator refuses a model of another layout") {
  auto eval = make_evaluator(small_configs(), test_set(), 1);
  REQUIRE(eval);
  const_model_view wrong;
  std::vector<std::byte> one(4);
  wrong.tensors.emplace_back(one);
  auto r = (*eval)->evaluate(wrong);
  REQUIRE_FALSE(r);
  CHECK(r.err().code == errc::manifest_mismatch);
}

namespace {

std::vector<uint32_t> first(uint32_t n) {
  std::vector<uint32_t> v(n);
  for (uint32_t i = 0; i < n; ++i)
    v[i] = i;
  return v;
}

/// The model's parameters as one flat vector of floats.
std::vector<double> flat(trainer& t) {
  std::vector<double> out;
  for (auto s : t.parameters().tensors) {
    const auto* f = reinterpret_cast<const float*>(s.data());
    out.insert(out.end(), f, f + s.size() / sizeof(float));
  }
  return out;
}

/// Copies the initial CNN into `t`.
void load_initial(trainer& t, const model_config& m) {
  auto initial = make_initial_model(m);
  REQUIRE(initial);
  auto params = t.parameters();
  auto from = initial->view();
  for (size_t i = 0; i < params.tensors.size(); ++i)
    std::memcpy(params.tensors[i].data(), from.tensors[i].data(),
                from.tensors[i].size());
}

/// One SGD step (lr 1, no momentum) on sample `i` alone, without DP:
/// returns the sample's gradient, initial minus trained.
std::vector<double> sample_gradient(uint32_t i) {
  auto cfg = small_configs();
  cfg.train.num_local_steps = 1;
  cfg.train.train_batch_size = 1;
  cfg.train.optim = {"SGD", 1.0, 0, 0};
  auto t = make_trainer(cfg, test_samples({i}), 1, 1);
  REQUIRE(t);
  load_initial(**t, cfg.model);
  auto before = flat(**t);
  REQUIRE((*t)->train());
  auto after = flat(**t);
  for (size_t k = 0; k < before.size(); ++k)
    before[k] -= after[k];
  return before;
}

double norm_of(const std::vector<double>& v) {
  double s = 0;
  for (auto x : v)
    s += x * x;
  return std::sqrt(s);
}

/// One DP-SGD step of lr 1 over samples 0..n-1 as one batch; returns the
/// parameter change (initial minus trained).
std::vector<double> dp_step(dp_sgd_mode mode, uint32_t n, double clip,
                            double sigma) {
  auto cfg = small_configs();
  cfg.train.num_local_steps = 1;
  cfg.train.train_batch_size = n;
  cfg.train.optim = {"SGD", 1.0, 0, 0};
  cfg.train.dp = {mode, sigma, clip, /*poisson_sampling=*/false, 1e-5};
  auto t = make_trainer(cfg, test_samples(first(n)), 7, 1);
  REQUIRE(t);
  load_initial(**t, cfg.model);
  auto before = flat(**t);
  auto m = (*t)->train();
  REQUIRE(m);
  CHECK(m->dp_steps == 1);
  CHECK(m->dp_sample_rate == doctest::Approx(1.0));
  auto after = flat(**t);
  for (size_t k = 0; k < before.size(); ++k)
    before[k] -= after[k];
  return before;
}

} // namespace

TEST_CASE("a DP-SGD step of the CNN is the mean of the clipped per-sample "
          "gradients, plus noise of std sigma C over the batch") {
  constexpr uint32_t n = 12;
  constexpr double clip = 0.5;
  // Explicit per-sample gradients, clipped, summed, over the batch size.
  std::vector<double> want;
  int clipped = 0;
  for (uint32_t i = 0; i < n; ++i) {
    auto g = sample_gradient(i);
    auto norm = norm_of(g);
    clipped += norm > clip;
    auto c = std::min(1.0, clip / (norm + 1e-6));
    want.resize(g.size());
    for (size_t k = 0; k < g.size(); ++k)
      want[k] += c * g[k] / n;
  }
  CHECK(clipped > 0); // the clip bites for some samples
  auto scale = norm_of(want);
  for (auto mode :
       {dp_sgd_mode::per_sample, dp_sgd_mode::ghost, dp_sgd_mode::fused}) {
    CAPTURE(name_of(mode));
    auto got = dp_step(mode, n, clip, 0.0);
    REQUIRE(got.size() == want.size());
    double err = 0;
    for (size_t k = 0; k < got.size(); ++k)
      err = std::max(err, std::abs(got[k] - want[k]));
    CHECK(err < 1e-4 * scale);
  }
  // With noise: the difference from the noiseless step is N(0, (sigma C /
  // n)^2) per element.
  constexpr double sigma = 2.0;
  auto noisy = dp_step(dp_sgd_mode::fused, n, clip, sigma);
  double sum = 0, squares = 0;
  for (size_t k = 0; k < noisy.size(); ++k) {
    auto d = noisy[k] - want[k];
    sum += d;
    squares += d * d;
  }
  auto count = static_cast<double>(noisy.size());
  auto mean = sum / count;
  auto stddev = std::sqrt(squares / count - mean * mean);
  auto expected = sigma * clip / n;
  CHECK(std::abs(mean) < 0.02 * expected);
  CHECK(stddev == doctest::Approx(expected).epsilon(0.02));
}

TEST_CASE("DP-SGD draws Poisson samples of rate batch / samples") {
  auto cfg = small_configs();
  cfg.train.mode = "epoch";
  cfg.train.num_local_epochs = 2;
  cfg.train.train_batch_size = 40;
  cfg.train.dp.mode = dp_sgd_mode::fused;
  auto t = make_trainer(cfg, test_samples(first(1000)), 3, 2);
  REQUIRE(t);
  auto m = (*t)->train();
  REQUIRE(m);
  CHECK(m->dp_steps == 50); // 2 epochs of 1000 / 40
  CHECK(m->dp_sample_rate == doctest::Approx(0.04));
  // 50 steps x 1000 Bernoulli(0.04) draws: mean 2000, std about 43.8; a
  // fixed batch would give exactly 2000.
  CHECK(m->samples != 2000);
  CHECK(std::abs(static_cast<double>(m->samples) - 2000.0) < 5 * 43.8);
}

namespace {

/// A TorchScript module saved to a temporary file: a float buffer `scale`,
/// an int64 buffer `steps` (counts training forwards, as BatchNorm's
/// num_batches_tracked does; carried in float32), and a linear child `fc`
/// of 4 inputs and 2 outputs. state_dict order: scale, steps, fc.weight,
/// fc.bias.
std::string save_script_model() {
  torch::manual_seed(1);
  torch::jit::Module fc("Linear");
  fc.register_parameter("weight", (torch::randn({2, 4}) * 0.1).requires_grad_(),
                        false);
  fc.register_parameter("bias", torch::zeros({2}).requires_grad_(), false);
  fc.define(R"(
def forward(self, x):
    return torch.matmul(x, self.weight.t()) + self.bias
)");
  torch::jit::Module m("Net");
  m.register_buffer("scale", torch::ones({1}));
  m.register_buffer("steps", torch::zeros({1}, torch::kInt64));
  m.register_attribute("training", c10::BoolType::get(), true);
  m.register_module("fc", fc);
  m.define(R"(
def forward(self, x):
    if self.training:
        self.steps.add_(1)
    return self.fc.forward(x * self.scale)
)");
  auto path = (std::filesystem::temp_directory_path() /
               ("fedcaf_torch_test_" + std::to_string(::getpid()) + ".pt"))
                  .string();
  m.save(path);
  return path;
}

tensor_array array_of(dtype type, std::vector<uint64_t> shape, const void* data,
                      size_t bytes) {
  const auto* p = static_cast<const uint8_t*>(data);
  return {type, std::move(shape), std::vector<uint8_t>(p, p + bytes)};
}

/// n samples of 4 float features; class 1 iff the first is positive.
/// `one_hot`: labels are float32 [n, 2], else int64 class ids.
std::shared_ptr<const tensor_set> separable(uint32_t n, bool one_hot) {
  torch::manual_seed(2);
  auto x = torch::randn({n, 4});
  auto y = x.select(1, 0).gt(0).to(torch::kInt64);
  auto s = std::make_shared<tensor_set>();
  s->features = array_of(dtype::float32, {n, 4}, x.data_ptr(), x.nbytes());
  auto labels = one_hot ? torch::one_hot(y, 2).to(torch::kFloat32) : y;
  s->labels =
      array_of(one_hot ? dtype::float32 : dtype::int64,
               one_hot ? std::vector<uint64_t>{n, 2} : std::vector<uint64_t>{n},
               labels.data_ptr(), labels.nbytes());
  return s;
}

client_configs script_configs(const std::string& path,
                              const std::string& loss) {
  client_configs c;
  c.model.model_name = model_kind::torchscript;
  c.model.path = path;
  c.train.mode = "step";
  c.train.num_local_steps = 20;
  c.train.optim = {"SGD", 0.5, 0, 0};
  c.train.train_batch_size = 16;
  c.train.val_batch_size = 50;
  c.train.loss_fn = loss;
  return c;
}

} // namespace

TEST_CASE("a TorchScript model: its layout is its state_dict's, it trains, "
          "and it evaluates on the client's test split") {
  auto path = save_script_model();
  auto cfg = script_configs(path, "cross_entropy");
  auto initial = make_initial_model(cfg.model);
  REQUIRE(initial);
  std::vector<std::string> names;
  for (const auto& t : initial->layout.tensors)
    names.push_back(t.name);
  CHECK(names ==
        std::vector<std::string>{"scale", "steps", "fc.weight", "fc.bias"});
  CHECK(initial->layout.tensors[1].type == dtype::float32);
  CHECK(initial->layout.tensors[1].held == dtype::int64);
  CHECK(initial->layout.tensors[2].shape == std::vector<uint64_t>{2, 4});
  auto train = separable(400, false);
  auto test = separable(100, false);
  auto t = make_trainer(cfg, {train, first(400), test, first(60)}, 1, 1);
  REQUIRE(t);
  CHECK((*t)->layout() == initial->layout);
  auto before = (*t)->evaluate_local();
  REQUIRE(before);
  REQUIRE(*before);
  CHECK((*before)->samples == 60);
  auto steps = [&t] {
    float v;
    std::memcpy(&v, (*t)->parameters().tensors[1].data(), 4);
    return v;
  };
  CHECK(steps() == 0.0f);
  auto first_round = (*t)->train();
  REQUIRE(first_round);
  CHECK(steps() == 20.0f); // the int64 counter, widened after training
  // A received mean of 5.6 goes into the network as 6 and counts on.
  float received = 5.6f;
  std::memcpy((*t)->parameters().tensors[1].data(), &received, 4);
  auto second_round = (*t)->train();
  REQUIRE(second_round);
  CHECK(steps() == 26.0f);
  CHECK(second_round->loss < first_round->loss);
  auto after = (*t)->evaluate_local();
  REQUIRE(after);
  CHECK((*after)->loss < (*before)->loss);
  CHECK((*after)->accuracy >= 0.0);
  CHECK((*after)->accuracy <= 1.0);
  CHECK((*after)->accuracy > 0.8);
  // Without test data there is nothing to evaluate.
  auto no_test = make_trainer(cfg, {train, first(400)}, 1, 1);
  REQUIRE(no_test);
  auto none = (*no_test)->evaluate_local();
  REQUIRE(none);
  CHECK_FALSE(*none);
  std::filesystem::remove(path);
}

TEST_CASE("every loss_fn trains, labels must suit the loss, a bad file is "
          "named") {
  auto path = save_script_model();
  for (const auto* loss : {"cross_entropy", "nll", "mse", "bce_with_logits"}) {
    CAPTURE(loss);
    bool classes =
        std::string{loss} == "cross_entropy" || std::string{loss} == "nll";
    auto data = separable(200, !classes);
    auto t = make_trainer(script_configs(path, loss),
                          {data, first(200), data, first(200)}, 1, 1);
    REQUIRE(t);
    auto m = (*t)->train();
    REQUIRE(m);
    CHECK(std::isfinite(m->loss));
    auto e = (*t)->evaluate_local();
    REQUIRE(e);
    CHECK((*e)->accuracy >= 0.0);
    CHECK((*e)->accuracy <= 1.0);
    if (std::string{loss} == "mse")
      CHECK((*e)->accuracy == 0.0);
  }
  auto floats = separable(50, true);
  auto wrong = make_trainer(script_configs(path, "cross_entropy"),
                            {floats, first(50)}, 1, 1);
  REQUIRE_FALSE(wrong);
  CHECK(wrong.err().message.find("class id") != std::string::npos);
  std::filesystem::remove(path);
  auto missing = make_initial_model(script_configs(path, "mse").model);
  REQUIRE_FALSE(missing);
  CHECK(missing.err().message.find(path) != std::string::npos);
}

namespace {

/// The parameters after `steps` SGD steps (lr, no momentum) on sample 3
/// alone, from the initial model, with FedProx's `mu`.
std::vector<double> prox_run(uint32_t steps, double lr, double mu) {
  auto cfg = small_configs();
  cfg.train.num_local_steps = steps;
  cfg.train.train_batch_size = 1;
  cfg.train.optim = {"SGD", lr, 0, 0};
  cfg.train.proximal_mu = mu;
  auto t = make_trainer(cfg, test_samples({3}), 1, 1);
  REQUIRE(t);
  load_initial(**t, cfg.model);
  REQUIRE((*t)->train());
  return flat(**t);
}

} // namespace

TEST_CASE("FedProx adds mu (w - w_received) to every gradient") {
  // Step 1 starts at w0, where the term is 0; step 2 adds lr mu (w1 - w0)
  // to the plain step's change: w2(0) - w2(mu) = lr mu (w1 - w0).
  const double lr = 0.1, mu = 2.0;
  auto w0 = prox_run(0, lr, 0);
  auto w1 = prox_run(1, lr, mu);
  auto plain = prox_run(2, lr, 0);
  auto prox = prox_run(2, lr, mu);
  double worst = 0, moved = 0;
  for (size_t k = 0; k < w0.size(); ++k) {
    auto want = lr * mu * (w1[k] - w0[k]);
    worst = std::max(worst, std::fabs((plain[k] - prox[k]) - want));
    moved = std::max(moved, std::fabs(want));
  }
  CHECK(moved > 1e-4); // the term did something
  CHECK(worst <= 1e-6 + 1e-3 * moved);
}

TEST_CASE("a stop asked from another thread ends training at its next step, "
          "and evaluation before its next batch") {
  auto cfg = small_configs();
  cfg.train.num_local_steps = 1000000; // far longer than this test
  auto data = test_samples(first(200));
  data.test = data.train;
  data.test_indices = data.train_indices;
  auto t = make_trainer(cfg, std::move(data), 1, 1);
  REQUIRE(t);
  auto stop = std::make_shared<std::atomic<bool>>(false);
  (*t)->stop_when(stop);
  std::thread asker{[stop] {
    std::this_thread::sleep_for(std::chrono::milliseconds{100});
    stop->store(true);
  }};
  auto m = (*t)->train();
  asker.join();
  REQUIRE_FALSE(m);
  CHECK(m.err().code == errc::cancelled);
  CHECK(m.err().message.find("training stopped at step ") == 0);
  auto local = (*t)->evaluate_local();
  REQUIRE_FALSE(local);
  CHECK(local.err().code == errc::cancelled);
  auto eval = make_evaluator(cfg, test_set(), 1);
  REQUIRE(eval);
  (*eval)->stop_when(stop);
  auto initial = make_initial_model(cfg.model);
  REQUIRE(initial);
  auto e = (*eval)->evaluate(initial->view());
  REQUIRE_FALSE(e);
  CHECK(e.err().message == "evaluation stopped at batch 1 of 20: the run is "
                           "ending");
}
