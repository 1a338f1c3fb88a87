#include "relay.hpp"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>

#include <caf/all.hpp>
#include <yaml-cpp/yaml.h>

#include "actors/messages.hpp"
#include "cli/relay_courier.hpp"
#include "fedcaf/dummy_trainer.hpp" // anonymous_file_buffer
#include "fedcaf/log.hpp"
#include "fedcaf/models.hpp"
#include "fedcaf/relay_residency.hpp"
#include "fedcaf/trainer.hpp"

namespace fedcaf::cli {

namespace {

/// Emits `node` under the single key `key`, as a file of its own.
std::string yaml_under(const char* key, const YAML::Node& node) {
  YAML::Node root;
  root[key] = node;
  YAML::Emitter out;
  out << root;
  return out.c_str();
}

/// What a relay's children's side cannot do, or "" where it can.
std::string relay_refusal(bool epochs, const server_config& sc) {
  if (epochs)
    return "num_global_epochs: a relay runs its parent's rounds";
  if (sc.aggregator != server_rule::fedavg)
    return "aggregator: a relay sums its children's updates, and the "
           "parent's rule (" +
           std::string{aggregator_name(sc.aggregator)} +
           " here) runs once, at the root: use FedAvgAggregator (the default)";
  if (sc.rule.client_weights_mode != client_weighting::equal)
    return "aggregator_kwargs.client_weights_mode: a relay weighs each of "
           "its clients 1 (sample_size through relays is not built)";
  if (sc.secure_aggregation.enabled && sc.memory_mode != memory_mode::ram)
    return "secure_aggregation: within a relay's group in memory_mode ram "
           "only (the group's unmasked sum goes up, not its mean)";
  if (sc.rule.dp_noise_multiplier > 0 || sc.rule.dp_clip_norm > 0)
    return "aggregator_kwargs: DP-FedAvg's noise is added at the root";
  if (sc.rule.partial_updates == partial_updates::keep)
    return "aggregator_kwargs.partial_updates: a relay decides it by its "
           "memory_mode (window and disk: its sum streams up, and a child "
           "cut mid-upload stays where it delivered; ram: its updates are "
           "collected again without it): leave it at discard (the default)";
  if (sc.rule.norm_bound > 0 || !sc.rule.tensor_rules.empty())
    return "aggregator_kwargs: norm_bound and tensor_rules belong to the root";
  if (!sc.checkpoint.dir.empty())
    return "checkpoint: a relay keeps no state between rounds; its parent "
           "checkpoints the run";
  return {};
}

/// The state every relay trainer of one process shares: the children's side
/// is spawned once, as soon as the model's layout is known (from the
/// parent's client_configs, or its first round).
struct relay_link {
  relay_spawner spawn;
  std::optional<relay_side> side;
  caf::actor courier; ///< to side->server, once it is spawned
  std::shared_ptr<relay_answers> answers = std::make_shared<relay_answers>();
  uint64_t models = 0;     ///< handed down so far (their numbers)
  std::string storage_dir; ///< disk mode: where model-sized buffers live
  uint32_t buffers = 0;    ///< made so far (their files' names)
  /// The upstream client's: fetches model bytes again (window mode).
  std::function<void(uint64_t, uint64_t)> ask;
  /// The upstream client's: its download or upload may go on.
  std::function<void()> wake;

  /// True iff the side runs in window mode: the model's memory is held
  /// chunk by chunk (relay_residency).
  bool windowed() const { return side && side->cache > 0; }

  /// `size` bytes of zeroes: on the heap, or (disk mode) a mapped file
  /// whose pages the relay gives back as it goes, or (window mode) an
  /// anonymous mapping given back chunk by chunk.
  result<byte_buffer> model_buffer(uint64_t size) {
    if (windowed())
      return byte_buffer::anonymous(size);
    if (storage_dir.empty())
      return byte_buffer::zeroed(size);
    return anonymous_file_buffer(storage_dir + "/fedcaf-relay-" +
                                     std::to_string(::getpid()) + "-" +
                                     std::to_string(++buffers) + ".bin",
                                 size);
  }

  /// Spawns the children's side with `initial` as its model, and the
  /// courier to it.
  result<void> spawn_side(model_snapshot initial, const msg::welcome& w) {
    auto s =
        spawn(relay_upstream{std::move(initial), w.terms, w.client_configs});
    if (!s)
      return s.err();
    side = *s;
    courier = side->system->spawn(relay_courier, side->server, answers);
    return {};
  }

  /// Spawns the children's side now if client_configs give the layout
  /// without LibTorch or a file only the parent has (synthetic models, and
  /// safetensors ones whose file is here), so the children register before
  /// the first round; its model is replaced by the parent's each round.
  void spawn_early(const client_configs& cc, const msg::welcome& w) {
    if (side || cc.model.model_name == model_kind::cnn ||
        cc.model.model_name == model_kind::torchscript)
      return;
    auto layout = model_layout(cc.model);
    if (!layout)
      return; // at the first round, from the parent's model
    model_snapshot zeros;
    zeros.layout = std::move(*layout);
    auto bytes = model_buffer(zeros.layout.total_bytes());
    if (!bytes)
      return; // at the first round, which says why
    zeros.bytes = std::move(*bytes);
    (void)spawn_side(std::move(zeros), w); // else at the first round
  }
};

/// A relay's upstream "trainer". Each round the parent's model goes down
/// as it downloads: begin_round hands the children's side the memory the
/// download is written into, and each chunk written is announced to it
/// (release), so the side serves its children each chunk as soon as it is
/// in. train() waits for the children's partial sum and uploads it from
/// the memory the side summed it in (window and disk modes: the model's
/// own), without a copy; it is held until the next round starts (the
/// parent may collect it again).
class relay_trainer final : public trainer {
public:
  relay_trainer(std::shared_ptr<relay_link> link, msg::welcome welcome)
      : link_(std::move(link)), welcome_(std::move(welcome)) {}

  const manifest& layout() const override { return layout_; }

  /// Any layout: the relay holds whatever model its parent serves. Makes
  /// the memory this round's download goes into (and, at the first round,
  /// the children's side).
  result<void> adopt_layout(const manifest& parent) override {
    if (link_->side && !(parent == link_->side->layout))
      return error{errc::manifest_mismatch,
                   "the parent's model has another layout than the one the "
                   "relay serves its children (" +
                       std::to_string(link_->side->layout.total_bytes()) +
                       " bytes)"};
    sums_.reset(); // a new round: the parent collects the last one no more
    streamed_ = {};
    download_ = {};
    if (residency_) // what of its sum has not gone up never will
      residency_->abandon();
    residency_.reset();
    bool fresh = !(parent == layout_) ||
                 params_.size() != parent.total_bytes() || link_->windowed();
    layout_ = parent;
    if (!link_->side) {
      model_snapshot initial;
      initial.layout = layout_;
      auto bytes = link_->model_buffer(layout_.total_bytes());
      if (!bytes)
        return bytes.err();
      initial.bytes = std::move(*bytes);
      if (auto ok = link_->spawn_side(std::move(initial), welcome_); !ok)
        return ok.err();
    }
    if (fresh) { // window mode: each round's positions start given back
      auto bytes = link_->model_buffer(parent.total_bytes());
      if (!bytes)
        return bytes.err();
      params_ = std::move(*bytes);
    }
    return {};
  }

  /// A round to train: the memory the download goes into becomes the
  /// children's side's model of the round now, its bytes arriving.
  void begin_round(uint32_t round, bool evaluate_only) override {
    (void)round;
    if (evaluate_only || !link_->side)
      return;                    // the final model: nothing goes down
    download_ = params_.share(); // written here, whatever the side does
    model_snapshot model;
    model.layout = layout_;
    model.residency = residency_ = make_residency();
    model.bytes = std::move(params_);
    number_ = ++link_->models;
    link_->answers->forget_before(number_);
    caf::anon_send(
        link_->courier, relay_atom::value,
        snapshot_ptr{std::make_shared<model_snapshot>(std::move(model))}, true,
        number_);
  }

  /// Chunks written by the download are announced to the children's side
  /// (disk mode: their pages go back); chunks uploaded give their pages
  /// back (disk mode).
  void release(uint64_t model_offset, uint64_t bytes) override {
    if (download_.size() > 0) {
      download_.release(model_offset, bytes);
      caf::anon_send(link_->courier, arrived_atom::value, model_offset, bytes);
    } else if (streamed_.size() > 0 && residency_) {
      residency_->sent(model_offset, bytes); // kept for a resend, given back
    } else if (streamed_.size() > 0) {
      streamed_.release(model_offset, bytes);
    } else if (sums_) {
      sums_->bytes.release(model_offset, bytes);
    } else {
      params_.release(model_offset, bytes);
    }
  }

  model_view parameters() override {
    if (download_.size() > 0)
      return split_contiguous(layout_, download_.bytes());
    if (streamed_.size() > 0) // read only, as it settles
      return split_contiguous(layout_, streamed_.bytes());
    if (sums_) // read only: the upload of a sum neither masks nor encodes
      return split_contiguous(
          layout_,
          std::span<std::byte>{const_cast<std::byte*>(sums_->bytes.data()),
                               sums_->bytes.size()});
    return split_contiguous(layout_, params_.bytes());
  }

  /// One round of the children: their partial sum comes back into
  /// parameters(), whole, or (window and disk modes) as it settles: then
  /// this returns once position 0 has, with the round's weight, and the
  /// upload follows ready_bytes().
  result<train_metrics> train() override {
    auto started = std::chrono::steady_clock::now();
    if (number_ == 0 || download_.size() == 0)
      return error{errc::internal, "the relay's round has no model"};
    auto memory = std::exchange(download_, {}); // the side's now, whole
    if (residency_) // every byte was written: the cache's are all in
      residency_->download_complete();
    auto number = std::exchange(number_, 0);
    auto got = link_->answers->start(number);
    if (!got)
      return got.err();
    if (const auto& s = got->stream) {
      streamed_ = std::move(memory); // the side sums into it in place
      streamed_number_ = number;
      return went_up(s->weight, s->loss, s->clients, started,
                     " updates streaming up, weight ");
    }
    const auto& r = got->answer;
    if (r.weight == 0) // its round fell short of min_clients
      return sit_out(started);
    if (auto ok = take_sums(r); !ok)
      return ok.err();
    return went_up(r.weight, r.loss, r.clients, started,
                   " updates summed, weight ");
  }

  uint64_t ready_bytes() const override {
    return streamed_.size() > 0 ? link_->answers->ready(streamed_number_)
                                : std::numeric_limits<uint64_t>::max();
  }

  void on_ready(std::function<void()> wake) override {
    link_->wake = wake;
    link_->answers->on_settled(std::move(wake));
  }

  bool may_fetch(uint64_t model_offset, uint64_t bytes) override {
    if (!residency_ || download_.size() == 0)
      return true;
    residency_->upstream_chunk(bytes); // the upload's chunks are its size
    return residency_->may_download(model_offset, bytes);
  }

  void on_refetch(std::function<void(uint64_t, uint64_t)> ask) override {
    link_->ask = std::move(ask);
  }

  void refetched(uint64_t model_offset,
                 std::span<const std::byte> bytes) override {
    if (residency_)
      residency_->fill(model_offset, bytes);
  }

  result<void> stage(uint64_t model_offset, uint64_t bytes) override {
    if (residency_ && streamed_.size() > 0)
      return residency_->restore_sums(model_offset, bytes);
    return {};
  }

  uint64_t sample_count() const override {
    return static_cast<uint64_t>(std::llround(weight_));
  }

  bool partial_sum() const override { return true; }

private:
  /// Window mode: which bytes of this round's model stay resident, from
  /// the children's chunk plan (null otherwise).
  std::shared_ptr<relay_residency> make_residency() {
    if (!link_->windowed())
      return nullptr;
    auto plan = chunk_plan::make(layout_, link_->side->chunk_bytes);
    if (!plan) {
      log_line(log_level::warning, "relay",
               "the model is held whole this round: " + plan.err().message);
      return nullptr;
    }
    auto r = std::make_shared<relay_residency>(
        params_.share(), std::move(*plan), link_->side->cache);
    r->set_asker(link_->ask);
    r->set_download_waker(link_->wake);
    // The upstream client fetches again only once train() returned, at
    // the first position settled: the first window stays for the checks.
    for (uint64_t seq = 0;
         seq < std::min<uint64_t>(link_->side->cache, r->plan().chunk_count());
         ++seq)
      r->pin(seq, relay_residency::check);
    return r;
  }

  /// The round's sum of `clients` updates, of weight `weight`, goes up.
  result<train_metrics> went_up(double weight, double loss, uint32_t clients,
                                std::chrono::steady_clock::time_point started,
                                const char* what) {
    weight_ = weight;
    train_metrics m;
    m.loss = loss;
    m.samples = static_cast<uint64_t>(std::llround(weight));
    m.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                              started)
                    .count();
    log_line("relay", std::to_string(clients) + what + std::to_string(weight));
    return m;
  }

  /// The children's round could not have its min_clients: this round goes
  /// up as a partial sum of weight 0 (Offer.sampleCount 0), which the
  /// parent answers by taking the relay out of the round (and it sends no
  /// chunk); the relay takes the next round. The parameters are zeroes
  /// (untouched pages: no memory).
  result<train_metrics> sit_out(std::chrono::steady_clock::time_point started) {
    auto bytes = link_->model_buffer(layout_.total_bytes());
    if (!bytes)
      return bytes.err();
    params_ = std::move(*bytes);
    weight_ = 0;
    log_line(log_level::warning, "relay",
             "the children's round fell short of min_clients: this round "
             "goes up as a sum of no update");
    train_metrics m;
    m.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                              started)
                    .count();
    return m;
  }

  /// The round's sums, uploaded from where the side left them (no copy;
  /// positions a cut-off child did not reach were scaled to the round's
  /// weight by the side as it published them: model_exchange::scale_sum).
  result<void> take_sums(const relay_result& r) {
    if (!r.sums || r.sums->bytes.size() != layout_.total_bytes())
      return error{errc::internal, "the relay's sum has another size"};
    if (r.weight <= 0)
      return error{errc::internal, "the relay's round summed no update"};
    sums_ = r.sums;
    return {};
  }

  std::shared_ptr<relay_link> link_;
  msg::welcome welcome_;
  manifest layout_;
  byte_buffer params_;   ///< the next download's memory, or a sit-out's
  byte_buffer download_; ///< the memory the download writes (shared)
  snapshot_ptr sums_;    ///< the round's sum, uploaded
  std::shared_ptr<relay_residency> residency_; ///< window mode: the round's
  byte_buffer streamed_; ///< the side's memory, its sum going up as it settles
  uint64_t streamed_number_ = 0; ///< its model's number
  uint64_t number_ = 0;          ///< the model handed down, awaiting its answer
  double weight_ = 0;
};

} // namespace

result<relay_files> load_relay_file(const std::string& path,
                                    const std::vector<std::string>& overrides) {
  std::ifstream in{path};
  if (!in)
    return error{errc::bad_config, path + ": cannot be read"};
  std::stringstream text;
  text << in.rdbuf();
  YAML::Node root;
  try {
    root = YAML::Load(text.str());
  } catch (const YAML::Exception& e) {
    return error{errc::bad_config, path + ": " + e.what()};
  }
  if (!root.IsMap() || !root["server_configs"] ||
      !root["server_configs"].IsMap())
    return error{errc::bad_config,
                 path + ": server_configs: is required (the relay's side "
                        "towards its children)"};
  auto server_node = YAML::Clone(root["server_configs"]);
  root.remove("server_configs");
  std::vector<std::string> up, down;
  bool epochs = false; // given in the file or by --set
  constexpr std::string_view simulated = "server_configs.simulated_clients=";
  for (const auto& o : overrides)
    if (o.starts_with(simulated))
      server_node["simulated_clients"] = o.substr(simulated.size());
    else
      (o.starts_with("server_configs.") ? down : up).push_back(o);
  int64_t simulated_clients = 0;
  if (auto n = server_node["simulated_clients"]) {
    try {
      simulated_clients = n.as<int64_t>();
    } catch (const YAML::Exception&) {
      simulated_clients = -1;
    }
    server_node.remove("simulated_clients");
  }
  for (const auto& o : down)
    epochs = epochs || o.starts_with("server_configs.num_global_epochs=");
  YAML::Emitter client_text;
  client_text << root;
  auto client =
      load_config(client_text.c_str(), path, config_role::python_client, up);
  if (!client)
    return client.err();
  auto server = load_config(yaml_under("server_configs", server_node), path,
                            config_role::server, down);
  if (!server)
    return server.err();
  if (auto why = relay_refusal(epochs || server_node["num_global_epochs"],
                               server->server);
      !why.empty())
    return error{errc::bad_config, path + ": server_configs." + why};
  if (simulated_clients < 0 ||
      simulated_clients > static_cast<int64_t>(server->server.num_clients))
    return error{errc::bad_config,
                 path +
                     ": server_configs.simulated_clients: a number from 0 "
                     "to num_clients (" +
                     std::to_string(server->server.num_clients) +
                     ") of the children to run in this process"};
  return relay_files{std::move(*client), std::move(*server),
                     static_cast<uint32_t>(simulated_clients)};
}

trainer_factory relay_trainers(relay_spawner spawn, std::string storage_dir) {
  auto link = std::make_shared<relay_link>();
  link->spawn = std::move(spawn);
  link->storage_dir = std::move(storage_dir);
  return [link](const client_configs& cc,
                const msg::welcome& w) -> result<std::unique_ptr<trainer>> {
    link->spawn_early(cc, w);
    return std::unique_ptr<trainer>{new relay_trainer{link, w}};
  };
}

} // namespace fedcaf::cli
