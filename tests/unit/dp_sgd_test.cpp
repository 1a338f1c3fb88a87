// Per-sample norms and clipped gradient sums from the tape, in every mode,
// against explicit per-sample gradients (one backward per sample), float64.

#include "../../src/dp_sgd.hpp"

#include <doctest/doctest.h>

using namespace fedcaf;

namespace {

/// Tokens -> Embedding -> LayerNorm -> Linear over the sequence (3-D) ->
/// mean over tokens -> Linear (2-D): every supported layer but Conv2d.
struct seq_net : torch::nn::Module {
  explicit seq_net(dp::tape* t)
      : emb(register_module("emb", dp::embedding(11, 6, t))),
        norm(register_module("norm", dp::layer_norm(6, t))),
        mix(register_module("mix", dp::linear(6, 5, t))),
        head(register_module("head", dp::linear(5, 3, t))) {}
  torch::Tensor forward(const torch::Tensor& idx) {
    auto h = torch::tanh(mix(norm(emb(idx))));
    return head(h.mean(1));
  }
  dp::embedding emb;
  dp::layer_norm norm;
  dp::linear mix;
  dp::linear head;
};

/// Images -> Conv2d -> ReLU -> Linear.
struct conv_net : torch::nn::Module {
  explicit conv_net(dp::tape* t)
      : conv(register_module(
            "conv",
            dp::conv2d(torch::nn::Conv2dOptions(2, 3, 3).padding(1).stride(2),
                       t))),
        head(register_module("head", dp::linear(3 * 4 * 4, 4, t))) {}
  torch::Tensor forward(const torch::Tensor& x) {
    return head(torch::relu(conv(x)).flatten(1));
  }
  dp::conv2d conv;
  dp::linear head;
};

template <class Net>
void check_against_explicit(Net& net, dp::tape& t, const torch::Tensor& x,
                            const torch::Tensor& y) {
  auto b = x.size(0);
  auto params = net.parameters();
  // Explicit: one backward per sample.
  std::vector<std::vector<torch::Tensor>> per_sample;
  std::vector<double> want_norms;
  t.enable(false);
  for (int64_t i = 0; i < b; ++i) {
    net.zero_grad();
    auto loss = torch::nn::functional::cross_entropy(
        net.forward(x.slice(0, i, i + 1)), y.slice(0, i, i + 1));
    loss.backward();
    double sq = 0;
    for (auto& p : params)
      sq += p.grad().pow(2).sum().template item<double>();
    want_norms.push_back(std::sqrt(sq));
    per_sample.emplace_back();
    for (auto& p : params)
      per_sample.back().push_back(p.grad().clone());
  }
  // A clip norm between the smallest and the largest: it bites for some.
  auto [lo, hi] = std::minmax_element(want_norms.begin(), want_norms.end());
  REQUIRE(*lo < *hi);
  const double clip = (*lo + *hi) / 2;
  std::vector<torch::Tensor> want_sum;
  for (auto& p : params)
    want_sum.push_back(torch::zeros_like(p));
  for (int64_t i = 0; i < b; ++i) {
    auto c = std::min(1.0, clip / (want_norms[i] + 1e-6));
    for (size_t k = 0; k < params.size(); ++k)
      want_sum[k] += c * per_sample[i][k];
  }
  t.enable(true);
  for (auto mode : {dp::clip_mode::per_sample, dp::clip_mode::ghost,
                    dp::clip_mode::fused}) {
    CAPTURE(static_cast<int>(mode));
    net.zero_grad();
    auto losses = torch::nn::functional::cross_entropy(
        net.forward(x), y,
        torch::nn::functional::CrossEntropyFuncOptions().reduction(
            torch::kNone));
    auto norms = dp::clip_and_accumulate(t, losses, clip, mode);
    for (int64_t i = 0; i < b; ++i)
      CHECK(std::fabs(norms[i].template item<double>() - want_norms[i]) <=
            1e-9);
    for (size_t k = 0; k < params.size(); ++k) {
      REQUIRE(params[k].grad().defined());
      auto err =
          (params[k].grad() - want_sum[k]).abs().max().template item<double>();
      CHECK(err <= 1e-9);
    }
  }
}

} // namespace

TEST_CASE("DP-SGD norms and clipped sums equal per-sample backward passes") {
  torch::manual_seed(3);
  torch::set_default_dtype(caffe2::TypeMeta::Make<double>());
  {
    dp::tape t;
    seq_net net{&t};
    auto x = torch::randint(0, 11, {7, 9}, torch::kInt64);
    x.index_put_({0, 1}, x.index({0, 0})); // a repeated token
    auto y = torch::randint(0, 3, {7}, torch::kInt64);
    check_against_explicit(net, t, x, y);
  }
  {
    dp::tape t;
    conv_net net{&t};
    auto x = torch::randn({6, 2, 8, 8});
    auto y = torch::randint(0, 4, {6}, torch::kInt64);
    check_against_explicit(net, t, x, y);
  }
  torch::set_default_dtype(caffe2::TypeMeta::Make<float>());
}

TEST_CASE("a parameter no DP-aware layer owns is named") {
  dp::tape t;
  struct mixed : torch::nn::Module {
    mixed(dp::tape* t)
        : ok(register_module("ok", dp::linear(2, 2, t))),
          plain(register_module("plain", torch::nn::Linear(2, 2))) {}
    dp::linear ok;
    torch::nn::Linear plain;
  } net{&t};
  CHECK(dp::uncovered_parameter(net) == "plain.weight");
  seq_net covered{&t};
  CHECK(dp::uncovered_parameter(covered) == "");
}
