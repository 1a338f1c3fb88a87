// Every sync aggregation rule, run chunk by chunk through the accumulators of
// both memory layouts, against a whole-model reference written here with
// plain LibTorch ops on full float64 tensors (formulas: McMahan et al. 2017
// for FedAvg, Hsu et al. 2019 for FedAvgM, Reddi et al. 2021 Algorithm 2 for
// FedAdagrad, FedAdam and FedYogi).

#include "fedcaf/fedavg_accumulator.hpp"
#include "fedcaf/server_optimizer.hpp"
#include "fedcaf/window_accumulator.hpp"

#include <cstring>
#include <filesystem>

#include <doctest/doctest.h>
#include <torch/torch.h>

using namespace fedcaf;

namespace {

constexpr int64_t model_floats = 37 + 91;
constexpr int rounds = 4;
const std::vector<double> weights{1, 2, 3};

manifest two_tensors() {
  manifest m;
  m.tensors.push_back(make_tensor_info("a", dtype::float32, {37}));
  m.tensors.push_back(make_tensor_info("b", dtype::float32, {7, 13}));
  return m;
}

rule_config test_rule() {
  rule_config r;
  r.server_learning_rate = 0.05;
  r.server_adapt_param = 0.01;
  r.server_momentum_param_1 = 0.9;
  r.server_momentum_param_2 = 0.99;
  return r;
}

/// The clients' models of round t: the global model plus noise.
std::vector<torch::Tensor> client_models(const torch::Tensor& global, int t) {
  torch::manual_seed(1000 + t);
  std::vector<torch::Tensor> out;
  for (size_t i = 0; i < weights.size(); ++i)
    out.push_back((global + 0.1 * torch::randn_like(global))
                      .to(torch::kFloat32)
                      .to(torch::kFloat64));
  return out;
}

/// The whole-model reference: every round on full tensors.
struct reference {
  server_rule rule;
  rule_config cfg;
  torch::Tensor x, m, v;

  void step(const std::vector<torch::Tensor>& clients) {
    auto avg = torch::zeros_like(x);
    double total = 0;
    for (size_t i = 0; i < clients.size(); ++i) {
      avg += weights[i] * clients[i];
      total += weights[i];
    }
    avg /= total;
    if (rule == server_rule::fedavg) {
      x = avg;
      return;
    }
    auto delta = avg - x;
    auto eta = cfg.server_learning_rate, tau = cfg.server_adapt_param;
    auto b1 = cfg.server_momentum_param_1, b2 = cfg.server_momentum_param_2;
    if (!m.defined()) {
      m = torch::zeros_like(x);
      v = torch::full_like(x, tau * tau);
    }
    if (rule == server_rule::fedavgm) {
      m = b1 * m + delta;
      x = x + eta * m;
      return;
    }
    m = b1 * m + (1 - b1) * delta;
    auto d2 = delta * delta;
    if (rule == server_rule::fedadagrad)
      v = v + d2;
    else if (rule == server_rule::fedadam)
      v = b2 * v + (1 - b2) * d2;
    else
      v = v - (1 - b2) * d2 * torch::sign(v - d2);
    x = x + eta * m / (torch::sqrt(v) + tau);
  }
};

std::vector<float> floats_of(const torch::Tensor& t) {
  auto f = t.to(torch::kFloat32).contiguous();
  return {f.data_ptr<float>(), f.data_ptr<float>() + f.numel()};
}

torch::Tensor tensor_of(const std::byte* p) {
  std::vector<float> v(model_floats);
  std::memcpy(v.data(), p, v.size() * 4);
  return torch::from_blob(v.data(), {model_floats}, torch::kFloat32)
      .to(torch::kFloat64);
}

std::unique_ptr<server_optimizer> optimizer_for(server_rule rule,
                                                const std::string& dir) {
  if (rule == server_rule::fedavg)
    return nullptr;
  auto opt = server_optimizer::make(rule, test_rule(), dtype::float32,
                                    model_floats, dir);
  REQUIRE(opt);
  return std::move(*opt);
}

/// Runs the rounds through a ram-mode accumulator, the clients' chunks
/// interleaved (client 2's chunk s, then client 0's, then client 1's).
torch::Tensor run_ram(server_rule rule, uint64_t chunk_bytes,
                      torch::Tensor start, const std::string& dir) {
  auto layout = two_tensors();
  auto acc =
      fedavg_accumulator::make(layout, *chunk_plan::make(layout, chunk_bytes));
  REQUIRE(acc);
  auto opt = optimizer_for(rule, dir);
  auto global = floats_of(start);
  for (int t = 0; t < rounds; ++t) {
    auto clients = client_models(
        tensor_of(reinterpret_cast<std::byte*>(global.data())), t);
    std::vector<std::vector<float>> data;
    for (auto& c : clients)
      data.push_back(floats_of(c));
    for (uint64_t s = 0; s < acc->plan().chunk_count(); ++s) {
      const auto& e = acc->plan().extent(s);
      for (size_t i : {2, 0, 1}) {
        auto bytes =
            std::as_bytes(std::span{data[i]}).subspan(e.model_offset, e.bytes);
        REQUIRE(
            acc->fold(s, bytes, weights[i], std::as_bytes(std::span{global})));
      }
    }
    auto out = acc->finalize(std::as_bytes(std::span{global}), opt.get());
    REQUIRE(out);
    std::memcpy(global.data(), out->data(), out->size());
  }
  return tensor_of(reinterpret_cast<std::byte*>(global.data()));
}

/// The same through a window-mode accumulator (2 open positions), averaged
/// into the model in place.
torch::Tensor run_window(server_rule rule, uint64_t chunk_bytes,
                         torch::Tensor start) {
  auto layout = two_tensors();
  auto acc = window_accumulator::make(
      layout, *chunk_plan::make(layout, chunk_bytes), 2, 3);
  REQUIRE(acc);
  auto opt = optimizer_for(rule, "");
  auto global = floats_of(start);
  auto model = std::as_writable_bytes(std::span{global});
  for (int t = 0; t < rounds; ++t) {
    auto clients = client_models(tensor_of(model.data()), t);
    std::vector<std::vector<float>> data;
    for (auto& c : clients)
      data.push_back(floats_of(c));
    for (uint64_t s = 0; s < acc->plan().chunk_count(); ++s) {
      const auto& e = acc->plan().extent(s);
      for (size_t i = 0; i < data.size(); ++i) {
        auto bytes =
            std::as_bytes(std::span{data[i]}).subspan(e.model_offset, e.bytes);
        REQUIRE(acc->fold(s, bytes, weights[i], model));
      }
      while (acc->ready())
        acc->finalize_next(model, opt.get());
    }
    REQUIRE(acc->finish_round());
    if (opt)
      opt->finish_round();
  }
  return tensor_of(model.data());
}

void check_close(const torch::Tensor& got, const torch::Tensor& want) {
  auto scale = want.abs().max().item<double>();
  auto err = (got - want).abs().max().item<double>();
  CAPTURE(err);
  CAPTURE(scale);
  CHECK(err <= 1e-6 * scale);
}

} // namespace

TEST_CASE("every sync rule chunk by chunk equals its whole-model reference") {
  torch::manual_seed(7);
  auto start = torch::randn({model_floats}, torch::kFloat64)
                   .to(torch::kFloat32)
                   .to(torch::kFloat64);
  auto dir = std::filesystem::temp_directory_path().string();
  for (auto rule :
       {server_rule::fedavg, server_rule::fedavgm, server_rule::fedadagrad,
        server_rule::fedadam, server_rule::fedyogi}) {
    reference ref{rule, test_rule(), start.clone(), {}, {}};
    for (int t = 0; t < rounds; ++t)
      ref.step(client_models(ref.x.to(torch::kFloat32).to(torch::kFloat64), t));
    for (uint64_t chunk_bytes : {4 * 16, 4 * 48, 4 * 128}) {
      CAPTURE(static_cast<int>(rule));
      CAPTURE(chunk_bytes);
      check_close(run_ram(rule, chunk_bytes, start, ""), ref.x);
      check_close(run_window(rule, chunk_bytes, start), ref.x);
    }
    // disk mode: the optimizer state in files, pages given back per chunk.
    check_close(run_ram(rule, 4 * 32, start, dir), ref.x);
  }
}

TEST_CASE("the rules move the model differently") {
  // Guards the comparison above against a reference that ignores the rule.
  torch::manual_seed(7);
  auto start = torch::randn({model_floats}, torch::kFloat64);
  auto fedavg = run_ram(server_rule::fedavg, 4 * 32, start, "");
  for (auto rule : {server_rule::fedavgm, server_rule::fedadagrad,
                    server_rule::fedadam, server_rule::fedyogi}) {
    auto other = run_ram(rule, 4 * 32, start, "");
    CHECK((other - fedavg).abs().max().item<double>() > 1e-3);
  }
}

TEST_CASE("aggregator names map to their rules") {
  CHECK(rule_of("FedAvgAggregator") == server_rule::fedavg);
  CHECK(rule_of("FedAvgMAggregator") == server_rule::fedavgm);
  CHECK(rule_of("FedAdagradAggregator") == server_rule::fedadagrad);
  CHECK(rule_of("FedAdamAggregator") == server_rule::fedadam);
  CHECK(rule_of("FedYogiAggregator") == server_rule::fedyogi);
}
