// A client's model driven by hand with a dummy trainer: the trainer built
// when registered (or not), its layout checked, evaluation without test
// data, the encoder's hooks only with compressed uploads, and the model
// given up between rounds; the model made from the server's Welcome.

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>

#include "fedcaf/dummy_trainer.hpp"
#include "protocol/client_model.hpp"

using namespace fedcaf;

namespace {

manifest small_model() {
  manifest m;
  m.tensors.push_back(make_tensor_info("a", dtype::float32, {10}));
  m.tensors.push_back(make_tensor_info("b", dtype::float32, {4, 10}));
  return m;
}

struct fixture {
  manifest layout = small_model();
  client_configs plain;
  int built = 0;
  client_model::trainer_factory factory = [this](const client_configs&,
                                                 const msg::welcome& w) {
    ++built;
    CHECK(w.num_clients == 4);
    return make_dummy_trainer(layout, 0.5f, 30);
  };

  msg::round_start announced(uint32_t round) const {
    msg::round_start rs;
    rs.round = round;
    rs.model = layout;
    rs.chunk_bytes = 64;
    return rs;
  }
};

} // namespace

TEST_CASE("registration builds the trainer iff the client holds its model") {
  fixture x;
  client_model holds{"C1", x.factory, x.plain, msg::welcome{2, 4, "", {}}};
  auto line = holds.registered(true);
  REQUIRE(line);
  CHECK(*line == "registered as client 2 of 4, 30 samples");
  CHECK(holds.has_trainer());
  client_model lazy{"C2", x.factory, x.plain, msg::welcome{3, 4, "", {}}};
  auto later = lazy.registered(false);
  REQUIRE(later);
  CHECK(
      *later ==
      "registered as client 3 of 4; builds its model when chosen for a round");
  CHECK_FALSE(lazy.has_trainer());
  CHECK(x.built == 1);
}

TEST_CASE("the Welcome makes the model from the configs it carries") {
  fixture x;
  auto made =
      client_model::welcome("C1", x.factory, msg::welcome{2, 4, "", {}}, true);
  REQUIRE(made);
  CHECK(made->line == "registered as client 2 of 4, 30 samples");
  CHECK(made->model->has_trainer());
  CHECK(made->model->client_id() == "C1");
  CHECK(x.built == 1);
  auto bad = client_model::welcome(
      "C1", x.factory, msg::welcome{2, 4, "train_configs: [", {}}, true);
  REQUIRE_FALSE(bad);
  CHECK(bad.err().code == errc::bad_config);
  CHECK(x.built == 1); // no trainer from configs that do not parse
}

TEST_CASE("a server's storage_dir never picks where a remote client's model "
          "lives: the client's own does") {
  fixture x;
  std::string seen;
  client_model::trainer_factory factory = [&](const client_configs& cc,
                                              const msg::welcome&) {
    seen = cc.train.storage_dir;
    return make_dummy_trainer(x.layout, 0.5f, 30);
  };
  msg::welcome w{2,
                 4,
                 "train_configs: {trainer: dummy, storage: disk, "
                 "storage_dir: /etc}",
                 {}};
  REQUIRE(client_model::welcome("C1", factory, w, true, {},
                                std::string{"/var/tmp/mine"}));
  CHECK(seen == "/var/tmp/mine");
  REQUIRE(client_model::welcome("C1", factory, w, true)); // in-process
  CHECK(seen == "/etc");
}

TEST_CASE("a round builds the trainer once, and again after it was given up") {
  fixture x;
  client_model m{"C1", x.factory, x.plain, msg::welcome{0, 4, "", {}}};
  auto plan = m.begin_round(x.announced(1));
  REQUIRE(plan);
  CHECK((*plan)->chunk_count() == 4);
  CHECK(m.params().tensors.size() == 2);
  REQUIRE(m.begin_round(x.announced(2)));
  CHECK(x.built == 1);
  m.drop();
  CHECK_FALSE(m.has_trainer());
  REQUIRE(m.begin_round(x.announced(3)));
  CHECK(x.built == 2);
}

TEST_CASE("a layout other than the trainer's is refused") {
  fixture x;
  client_model m{"C1", x.factory, x.plain, msg::welcome{0, 4, "", {}}};
  auto rs = x.announced(1);
  rs.model.tensors[0].name = "other";
  CHECK_FALSE(m.begin_round(rs));
}

TEST_CASE("without test data the final evaluation has no figures") {
  fixture x;
  client_model m{"C1", x.factory, x.plain, msg::welcome{0, 4, "", {}}};
  REQUIRE(m.begin_round(x.announced(5)));
  auto e = m.evaluate_final(5);
  REQUIRE(e);
  CHECK(e->evaluation.round == 4);
  CHECK(e->evaluation.sample_count == 0);
  CHECK(e->evaluation.metrics.empty());
  CHECK(e->line.empty());
  auto received = m.evaluate_received(5);
  REQUIRE(received);
  CHECK_FALSE(*received); // federated evaluation is off
}

TEST_CASE("the encoder's hooks exist iff uploads are compressed") {
  fixture x;
  client_model plain{"C1", x.factory, x.plain, msg::welcome{0, 4, "", {}}};
  REQUIRE(plain.begin_round(x.announced(1)));
  REQUIRE(plain.prepare_encoder(x.announced(1)));
  CHECK_FALSE(plain.encode_hook());
  CHECK_FALSE(plain.arrival_hook(false));

  client_configs z;
  z.compression.method = compression_method::int8;
  z.compression.up = true;
  client_model packed{"C2", x.factory, z, msg::welcome{0, 4, "", {}}};
  REQUIRE(packed.begin_round(x.announced(1)));
  REQUIRE(packed.prepare_encoder(x.announced(1)));
  CHECK(packed.encode_hook());
  CHECK(packed.arrival_hook(false));
  CHECK_FALSE(packed.arrival_hook(true)); // a round that only evaluates
}

TEST_CASE("training offers the update with its encoding and no DP epsilon") {
  fixture x;
  client_configs z;
  z.compression.method = compression_method::bf16;
  z.compression.up = true;
  client_model m{"C1", x.factory, z, msg::welcome{0, 4, "", {}}};
  auto plan = m.begin_round(x.announced(2));
  REQUIRE(plan);
  REQUIRE(m.prepare_encoder(x.announced(2)));
  auto t = m.train(2, **plan);
  REQUIRE(t);
  CHECK(t->offer.round == 2);
  CHECK(t->offer.sample_count == 30);
  CHECK(t->offer.encoding == static_cast<uint8_t>(compression_method::bf16));
  CHECK(t->offer.dp_epsilon == 0);
  CHECK_FALSE(t->dp_sgd_epsilon);
}

namespace {

/// A relay's trainer as client_model sees it: the dummy trainer's model
/// (each value + 0.5 a round) offered as a partial sum.
class summing_trainer final : public trainer, public relay_hooks {
public:
  explicit summing_trainer(std::unique_ptr<trainer> inner)
      : inner_(std::move(inner)) {}
  const manifest& layout() const override { return inner_->layout(); }
  model_view parameters() override { return inner_->parameters(); }
  result<train_metrics> train() override { return inner_->train(); }
  uint64_t sample_count() const override { return 4; }
  bool partial_sum() const override { return true; }

private:
  std::unique_ptr<trainer> inner_;
};

/// The first float of the model client_model uploads after training.
float first_value(const client_model& m) {
  float x = 0;
  std::memcpy(&x, m.const_params().tensors[0].data(), sizeof x);
  return x;
}

} // namespace

TEST_CASE("a client's update is clipped to update_clip_norm and its norm "
          "declared, a relay's partial sum is neither") {
  fixture x;
  client_configs clipped;
  clipped.train.update_clip_norm = 1.0; // the update's norm: 0.5 sqrt(50)
  clipped.train.declare_update_norm = true;
  for (bool relay : {false, true}) {
    CAPTURE(relay);
    client_model::trainer_factory factory =
        [&](const client_configs&,
            const msg::welcome&) -> result<std::unique_ptr<trainer>> {
      auto dummy = make_dummy_trainer(x.layout, 0.5f, 30);
      if (!dummy || !relay)
        return dummy;
      return std::unique_ptr<trainer>{new summing_trainer{std::move(*dummy)}};
    };
    client_model m{"C1", factory, clipped, msg::welcome{0, 4, "", {}}};
    auto plan = m.begin_round(x.announced(1));
    REQUIRE(plan);
    auto t = m.train(1, **plan);
    REQUIRE(t);
    CHECK(t->offer.partial_sum == relay);
    if (relay) {
      CHECK(first_value(m) == doctest::Approx(0.5)); // the sum, whole
      CHECK(t->offer.update_norm == 0);
    } else {
      CHECK(first_value(m) == doctest::Approx(1.0 / std::sqrt(50.0)));
      CHECK(t->offer.update_norm == doctest::Approx(1.0)); // once clipped
    }
  }
}
