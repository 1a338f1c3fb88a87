#include "protocol/client_model.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>

#include "fedcaf/config/load.hpp"
#include "fedcaf/log.hpp"
#include "fedcaf/rdp_accountant.hpp"
#include "fedcaf/update_clip.hpp"

namespace fedcaf {

client_model::client_model(std::string client_id, trainer_factory factory,
                           client_configs configs, msg::welcome welcome)
    : client_id_(std::move(client_id)), factory_(std::move(factory)),
      configs_(std::move(configs)), welcome_(std::move(welcome)) {}

result<client_model::welcomed>
client_model::welcome(std::string client_id, trainer_factory factory,
                      const msg::welcome& w, bool build, shard_spec shard,
                      const std::optional<std::string>& storage_dir) {
  auto cfg = parse_client_configs(w.client_configs);
  if (!cfg)
    return cfg.err();
  if (storage_dir)
    cfg->train.storage_dir = *storage_dir;
  auto model = std::make_unique<client_model>(
      std::move(client_id), std::move(factory), std::move(*cfg), w);
  model->set_shard(std::move(shard));
  auto line = model->registered(build);
  if (!line)
    return line.err();
  return welcomed{std::move(model), std::move(*line)};
}

result<void> client_model::make_trainer() {
  if (trainer_)
    return {};
  auto t = factory_(configs_, welcome_);
  if (!t)
    return t.err();
  trainer_ = std::move(*t);
  // A relay's upstream trainer: its sum paces the round (else the plain
  // trainer's defaults).
  hooks_ = dynamic_cast<relay_hooks*>(trainer_.get());
  if (!hooks_)
    hooks_ = &plain_;
  if (wake_)
    hooks_->on_ready(wake_);
  if (ask_)
    hooks_->on_refetch(ask_);
  return {};
}

void client_model::on_refetch(std::function<void(uint64_t, uint64_t)> ask) {
  ask_ = std::move(ask);
  hooks_->on_refetch(ask_);
}

void client_model::on_ready(std::function<void()> wake) {
  wake_ = std::move(wake);
  hooks_->on_ready(wake_);
}

result<std::string> client_model::registered(bool build) {
  auto line = "registered as client " + std::to_string(welcome_.client_index) +
              " of " + std::to_string(welcome_.num_clients);
  if (!build)
    return line + "; builds its model when chosen for a round";
  if (auto made = make_trainer(); !made)
    return made.err();
  auto samples = trainer_->sample_count();
  if (samples == 0) // a Python client's come with its updates
    return line + "; its sample count comes with each update";
  return line + ", " + std::to_string(samples) + " samples";
}

void client_model::view_parameters() {
  params_ = trainer_->parameters();
  const_params_.tensors.assign(params_.tensors.begin(), params_.tensors.end());
}

result<std::shared_ptr<const chunk_plan>>
client_model::begin_round(const msg::round_start& rs) {
  if (auto made = make_trainer(); !made)
    return made.err();
  digest_ = digest(rs.model);
  auto slices = shard_.sharded() ? slices_of(rs.model, shard_)
                                 : result<shard_slices>{shard_slices{}};
  if (!slices)
    return slices.err();
  if (auto ok = trainer_->adopt_layout(
          shard_.sharded() ? local_layout(rs.model, *slices) : rs.model);
      !ok)
    return ok.err();
  hooks_->parent_round(rs.chunk_bytes, welcome_.terms);
  trainer_->begin_round(rs.round, rs.evaluate_only);
  auto plan = shard_.sharded()
                  ? chunk_plan::make_shard(rs.model, rs.chunk_bytes, *slices)
                  : chunk_plan::make(rs.model, rs.chunk_bytes);
  if (!plan)
    return plan.err();
  view_parameters();
  return std::make_shared<const chunk_plan>(std::move(*plan));
}

result<void> client_model::prepare_encoder(const msg::round_start& rs) {
  const auto& z = configs_.compression;
  if (hooks_->partial_sum()) // a relay's sum goes up whole
    return {};
  if (z.up && !(encoder_ && encoded_layout_ == rs.model)) {
    auto plan = chunk_plan::make(rs.model, rs.chunk_bytes);
    if (!plan)
      return plan.err();
    const auto& train = configs_.train;
    auto made = delta_encoder::make(z, rs.model, std::move(*plan),
                                    train.storage == model_storage::disk
                                        ? train.storage_dir
                                        : std::string{});
    if (!made)
      return made.err();
    encoder_.emplace(std::move(*made));
    encoded_layout_ = rs.model;
  }
  if (encoder_ && !rs.evaluate_only)
    encoder_->begin_round();
  return {};
}

download_stream::arrival_hook client_model::arrival_hook(bool evaluate_only) {
  if (!encoder_ || evaluate_only)
    return {};
  return [this](uint64_t seq, std::span<const std::byte> values) {
    encoder_->arrive(seq, values, const_params_);
  };
}

upload_stream::encode_hook client_model::encode_hook() {
  if (!encoder_)
    return {};
  return [this](uint64_t seq, const const_model_view& model) {
    return encoder_->upload(seq, model);
  };
}

upload_stream::float_sums_hook client_model::float_sums_hook() {
  return [this](uint64_t model_offset) {
    return hooks_->grid_sums() && hooks_->float_sums(model_offset);
  };
}

namespace {

/// A number for one trained update, never 0 (see Offer.updateId).
uint64_t draw_update_id() {
  static thread_local std::mt19937_64 draw{std::random_device{}()};
  uint64_t id = 0;
  while (id == 0)
    id = draw();
  return id;
}

} // namespace

result<client_model::trained> client_model::train(uint32_t round,
                                                  const chunk_plan& plan) {
  // A relay's sum is no update of its own: nothing to clip or declare (its
  // children clipped and declared theirs to it).
  bool own = !hooks_->partial_sum();
  // A rank clips its shard to clip / sqrt(ranks): the client's whole
  // update stays within clip (the ranks do not share their norms).
  auto clip = own ? configs_.train.update_clip_norm /
                        std::sqrt(static_cast<double>(shard_.ranks))
                  : 0.0;
  bool declare = own && configs_.train.declare_update_norm;
  // DP-FedAvg, norm_bound: keep the model received to measure against
  if (clip > 0 || declare)
    copy_model(const_params_, received_);
  auto m = trainer_->train();
  if (!m)
    return m.err();
  view_parameters();              // a trainer may hand other memory
  if (auto sums = hooks_->sums()) // a relay's, summed by its children's side
    const_params_ = std::move(*sums);
  if (clip > 0) {
    auto norm = clip_update(trainer_->layout(), params_, received_, clip);
    log_line(log_level::debug, client_id_,
             "update norm " + std::to_string(norm) + ", clipped to " +
                 std::to_string(std::min(norm, clip)));
  }
  double norm =
      declare ? update_norm(trainer_->layout(), const_params_, received_) : 0;
  trained out;
  out.dp_sgd_epsilon = account_dp_sgd(*m);
  log_line(round_level_, client_id_,
           "round " + std::to_string(round) + ": trained on " +
               std::to_string(m->samples) + " samples in " +
               std::to_string(m->seconds) + " s, loss " +
               std::to_string(m->loss));
  out.offer =
      msg::offer{round,
                 client_id_,
                 trainer_->sample_count(),
                 shard_.sharded() ? digest_ : digest(trainer_->layout()),
                 plan.total_bytes(),
                 plan.chunk_count(),
                 m->loss,
                 m->seconds,
                 out.dp_sgd_epsilon.value_or(0),
                 std::move(m->figures),
                 static_cast<uint8_t>(encoder_ ? configs_.compression.method
                                               : compression_method::none),
                 norm,
                 hooks_->partial_sum(),
                 draw_update_id(),
                 hooks_->grid_sums()};
  return out;
}

/// DP-SGD: adds this training's noisy steps to those the client's data has
/// been through (over every trainer it has built).
std::optional<double> client_model::account_dp_sgd(const train_metrics& m) {
  if (m.dp_steps == 0)
    return std::nullopt;
  dp_steps_ += m.dp_steps;
  const auto& dp = configs_.train.dp;
  auto spent =
      epsilon_for(m.dp_sample_rate, dp.noise_multiplier, dp_steps_, dp.delta);
  log_line(client_id_, "DP-SGD: " + std::to_string(dp_steps_) +
                           " steps at rate " +
                           std::to_string(m.dp_sample_rate) + ", epsilon " +
                           std::to_string(spent.epsilon) + " (delta " +
                           std::to_string(dp.delta) + ")");
  return spent.epsilon;
}

namespace {

/// Fault injection for the tests (FEDCAF_FAULT=evaluation_claim, read at
/// each evaluation): this client lies in its evaluations, accuracy 0.99 and
/// loss 0.01 over 2^40 samples, while it trains honestly.
bool lies_in_evaluations() {
  const char* fault = std::getenv("FEDCAF_FAULT");
  return fault && std::strcmp(fault, "evaluation_claim") == 0;
}

} // namespace

msg::evaluation client_model::evaluation_of(uint32_t announced,
                                            const eval_metrics& m) {
  auto round = announced - 1;
  if (lies_in_evaluations())
    return {round,
            msg::max_evaluation_samples,
            {{"accuracy", 0.99}, {"loss", 0.01}}};
  if (!m.figures.empty())
    return {round, m.samples, m.figures};
  return {round, m.samples, {{"accuracy", m.accuracy}, {"loss", m.loss}}};
}

result<std::optional<msg::evaluation>>
client_model::evaluate_received(uint32_t announced) {
  if (!configs_.train.federated_evaluation || announced <= 1)
    return std::optional<msg::evaluation>{};
  auto m = trainer_->evaluate_local();
  if (!m)
    return m.err();
  if (!*m)
    return std::optional<msg::evaluation>{};
  return std::optional<msg::evaluation>{evaluation_of(announced, **m)};
}

std::optional<msg::evaluation>
client_model::children_evaluation(uint32_t announced) {
  auto e = hooks_->children_evaluation();
  if (!configs_.train.federated_evaluation || announced <= 1 || !e ||
      e->means.empty())
    return std::nullopt;
  return msg::evaluation{announced - 1, e->samples, std::move(e->means)};
}

result<client_model::final_evaluation>
client_model::evaluate_final(uint32_t announced) {
  auto m = trainer_->evaluate_local();
  if (!m)
    return m.err();
  if (!*m)
    return final_evaluation{msg::evaluation{announced - 1, 0, {}}, {}};
  final_evaluation out{evaluation_of(announced, **m), {}};
  if ((*m)->figures.empty())
    out.line = "final model: accuracy " + std::to_string((*m)->accuracy) +
               ", loss " + std::to_string((*m)->loss) + " on " +
               std::to_string((*m)->samples) + " test samples";
  return out;
}

void client_model::upload_closed() {
  if (encoder_) // what its encoding lost goes into the next upload
    encoder_->upload_closed();
  trainer_->upload_closed();
}

std::string client_model::first_round(uint32_t round) {
  if (std::exchange(started_, true) || round <= 1)
    return {};
  std::string fresh;
  if (configs_.compression.up && configs_.compression.error_feedback)
    fresh = "compression's error-feedback residuals start at zero";
  if (configs_.train.dp.mode != dp_sgd_mode::none)
    fresh += (fresh.empty() ? "" : "; ") +
             std::string{"the DP-SGD accountant counts this process's steps "
                         "only"};
  if (fresh.empty())
    return {};
  return "first round here is " + std::to_string(round) + ": " + fresh +
         " (a client that restarted has lost its earlier ones; see "
         "docs/restart.md)";
}

void client_model::drop() {
  if (encoder_) // the residual, before the model it comes from goes
    encoder_->settle(const_params_);
  params_ = {};
  const_params_ = {};
  hooks_ = &plain_;
  trainer_.reset();
}

} // namespace fedcaf
