#include <cstring>

#include <doctest/doctest.h>

#include "fedcaf/trainer.hpp"

using namespace fedcaf;

namespace {

std::shared_ptr<const image_set> test_set() {
  static auto set = std::make_shared<image_set>(
      *read_fashion_mnist("/usr/share/datasets/fashion-mnist", "t10k"));
  return set;
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
  auto t = make_trainer(cfg, test_set(), indices, 1, 2);
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
