#pragma once
// A client's model and what it does with it between transfers: builds its
// trainer from the server's Welcome (and again for a round, if it gives
// its model up between rounds), takes each round's layout and chunk plan,
// keeps the upload encoder (its residual carries from round to round),
// trains and makes the offer (update clipping, the update's norm, DP-SGD
// accounting over every trainer it has built), and evaluates the model it
// received. It sends nothing and reads no clock: the client actor asks it
// at each step of a round.
// Thread-safety: none; owned by the client actor.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fedcaf/chunk_plan.hpp"
#include "fedcaf/config/client_sections.hpp"
#include "fedcaf/delta_codec.hpp"
#include "fedcaf/log.hpp"
#include "fedcaf/shard.hpp"
#include "fedcaf/trainer.hpp"
#include "messages/codec.hpp"
#include "protocol/download_stream.hpp"
#include "protocol/relay_hooks.hpp"
#include "protocol/upload_stream.hpp"

namespace fedcaf {

class client_model {
public:
  /// Builds a trainer from the client_configs and the Welcome (the same
  /// type as the client actor's trainer_factory).
  using trainer_factory = std::function<result<std::unique_ptr<trainer>>(
      const client_configs&, const msg::welcome&)>;

  /// An update trained, as offered.
  struct trained {
    msg::offer offer;
    /// Set iff DP-SGD steps were taken: the epsilon spent so far.
    std::optional<double> dp_sgd_epsilon;
  };

  /// The run's final model evaluated, and a line for the log (empty: none).
  struct final_evaluation {
    msg::evaluation evaluation;
    std::string line;
  };

  /// A model made from the server's Welcome, and the line that says the
  /// client registered.
  struct welcomed {
    std::unique_ptr<client_model> model;
    std::string line;
  };

  /// The server welcomed client `client_id` with `w`: returns its model,
  /// made with w's client configs, and the line that says it registered
  /// (registered(build)). Returns an error iff the configs do not parse or
  /// building the trainer fails.
  /// `shard`: which rank of a sharded client it is (set_shard).
  /// `storage_dir`, if set, replaces w's train_configs.storage_dir: a
  /// remote client's model file lies where its own config says, never
  /// where a server says.
  static result<welcomed>
  welcome(std::string client_id, trainer_factory factory, const msg::welcome& w,
          bool build, shard_spec shard = {},
          const std::optional<std::string>& storage_dir = std::nullopt);

  /// The model of client `client_id`, which the server welcomed with
  /// `welcome` and `configs`; no trainer yet.
  client_model(std::string client_id, trainer_factory factory,
               client_configs configs, msg::welcome welcome);
  /// Pinned: the hooks it hands out point at it.
  client_model(const client_model&) = delete;
  client_model& operator=(const client_model&) = delete;

  /// The server welcomed the client again (a reconnection): its terms
  /// are this Welcome's from now on (a server restarted since may be
  /// another build), for a relay's next round (parent_round) and a
  /// trainer made later. Nothing else changes.
  void welcomed_again(const msg::welcome& w) { welcome_.terms = w.terms; }

  const client_configs& configs() const { return configs_; }

  /// This process is rank `shard.rank` of a sharded client: its trainer
  /// holds, and its rounds move, only its shard (fedcaf/shard.hpp).
  void set_shard(shard_spec shard) { shard_ = std::move(shard); }
  const std::string& client_id() const { return client_id_; }

  /// Builds the trainer unless it exists. Returns an error iff the factory
  /// fails.
  result<void> make_trainer();

  /// The line that says the client registered; builds the trainer first
  /// iff `build` (a client that holds its model between rounds). Returns
  /// an error iff building fails.
  result<std::string> registered(bool build);

  /// Returns true iff the trainer exists.
  bool has_trainer() const { return trainer_ != nullptr; }

  /// The bytes of the update that may go up now (relay_hooks::ready_bytes).
  uint64_t ready_bytes() const { return hooks_->ready_bytes(); }
  /// `wake` is called (from any thread) when ready_bytes() grows; every
  /// trainer built is handed it.
  void on_ready(std::function<void()> wake);

  /// One of many clients in one process (simulate): its round lines go to
  /// the log at debug level.
  void quiet_rounds() { round_level_ = log_level::debug; }
  /// REQUIRES: has_trainer().
  const trainer& local() const { return *trainer_; }

  /// Round `rs` starts: builds the trainer if needed, has it take the
  /// server's layout and begin the round, and views its parameters.
  /// Returns the round's chunk plan (a rank's: its shard's), or an error
  /// iff the trainer cannot be built, its layout differs (a rank's: from
  /// its shard of the server's), or the plan or the slices are invalid.
  result<std::shared_ptr<const chunk_plan>>
  begin_round(const msg::round_start& rs);

  /// Compressed uploads: makes the encoder (once, and again only if the
  /// layout changed) and, unless `rs` only evaluates, starts its round.
  /// Returns an error iff the encoder cannot be made.
  /// REQUIRES: begin_round(rs) succeeded.
  result<void> prepare_encoder(const msg::round_start& rs);

  /// The parameters' memory, where chunks arrive. REQUIRES: has_trainer().
  const model_view& params() const { return params_; }
  /// The same memory, read-only, where uploads read from.
  const const_model_view& const_params() const { return const_params_; }

  /// What a download shows the encoder: empty without an encoder or when
  /// the round only evaluates. Valid while this model lives.
  download_stream::arrival_hook arrival_hook(bool evaluate_only);

  /// The upload's encode hook: empty without an encoder. Valid while this
  /// model lives.
  upload_stream::encode_hook encode_hook();
  /// The upload's floatSums flag per chunk (a streaming relay's positions
  /// that did not settle on the grid). Valid while this model lives.
  upload_stream::float_sums_hook float_sums_hook();

  /// Model bytes [e.model_offset, + e.bytes) are not needed for now.
  void release(const chunk_extent& e) {
    trainer_->release(e.model_offset, e.bytes);
  }
  /// May the download fetch `e` now (relay_hooks::may_fetch)?
  bool may_fetch(const chunk_extent& e) {
    return hooks_->may_fetch(e.model_offset, e.bytes);
  }
  /// `e` is about to be uploaded (relay_hooks::stage).
  result<void> stage(const chunk_extent& e) {
    return hooks_->stage(e.model_offset, e.bytes);
  }
  /// Model bytes at `offset`, fetched again (relay_hooks::refetched).
  void refetched(uint64_t offset, std::span<const std::byte> bytes) {
    hooks_->refetched(offset, bytes);
  }
  /// `ask` fetches model bytes again (relay_hooks::on_refetch); every
  /// trainer built is handed it.
  void on_refetch(std::function<void(uint64_t, uint64_t)> ask);

  /// Trains on the model received (clipped to train.update_clip_norm, its
  /// norm declared iff train.declare_update_norm) and returns the offer of
  /// round `round`'s update, cut by `plan`. Logs the training. Returns an
  /// error iff training fails. REQUIRES: begin_round succeeded.
  result<trained> train(uint32_t round, const chunk_plan& plan);

  /// Federated evaluation of the model received, as that of round
  /// `announced - 1`. Returns nothing iff not asked for (off, or announced
  /// <= 1) or the trainer has no test data; an error iff evaluation failed.
  result<std::optional<msg::evaluation>> evaluate_received(uint32_t announced);
  /// A relay's: its children's evaluation of round `announced`'s model,
  /// once trained (see relay_hooks::children_evaluation); nullopt where
  /// none, or evaluate_received would not evaluate.
  std::optional<msg::evaluation> children_evaluation(uint32_t announced);

  /// Evaluates the run's final model (announced as round `announced`).
  /// Without test data the evaluation has no figures. Returns an error iff
  /// evaluation failed.
  result<final_evaluation> evaluate_final(uint32_t announced);

  /// The server closed the upload: the encoder keeps what its encoding
  /// lost, the trainer may give up the memory it was read from.
  void upload_closed();

  /// Round `round` starts here. Returns, for the first round this
  /// process takes part in if that is past round 1, the warning that what
  /// a client keeps across rounds (error-feedback residuals, the DP-SGD
  /// accountant's steps) starts here, as a client that restarted has lost
  /// it; "" otherwise, or where nothing is kept.
  std::string first_round(uint32_t round);

  /// Gives the trainer and its model up (the encoder's residual taken
  /// first); the next round builds them again.
  void drop();

private:
  /// Adds `m`'s DP-SGD steps to the client's and returns the epsilon spent
  /// so far; nothing without DP-SGD steps.
  std::optional<double> account_dp_sgd(const train_metrics& m);
  /// The figures of `m` as the evaluation of round `announced - 1`.
  static msg::evaluation evaluation_of(uint32_t announced,
                                       const eval_metrics& m);
  void view_parameters();

  std::string client_id_;
  trainer_factory factory_;
  client_configs configs_;
  msg::welcome welcome_;             ///< its terms: the latest Welcome's
  std::unique_ptr<trainer> trainer_; ///< null between rounds if dropped
  relay_hooks plain_;                ///< a plain trainer's: the defaults
  relay_hooks* hooks_ = &plain_;     ///< trainer_'s, or plain_
  std::function<void()> wake_;       ///< see on_ready
  std::function<void(uint64_t, uint64_t)> ask_; ///< see on_refetch
  model_view params_;
  const_model_view const_params_;   ///< the same memory, for uploads
  std::vector<std::byte> received_; ///< DP-FedAvg: the model trained from
  std::optional<delta_encoder> encoder_;
  manifest encoded_layout_;
  uint64_t dp_steps_ = 0; ///< DP-SGD steps taken on this client's data
  bool started_ = false;  ///< a round has started here
  shard_spec shard_;      ///< ranks 1: the whole model
  uint64_t digest_ = 0;   ///< the server's layout's, for the offer
  log_level round_level_ = log_level::info;
};

} // namespace fedcaf
