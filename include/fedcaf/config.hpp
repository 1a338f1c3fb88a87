#pragma once
// Typed configuration in APPFL's layout (server_configs, client_configs with
// train_configs and model_configs, data_configs, comm_configs), read from YAML
// and validated before anything starts. Value types only.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fedcaf/aggregation_rule.hpp"
#include "fedcaf/compression.hpp"
#include "fedcaf/error.hpp"

namespace fedcaf {

// -- the config's word choices --------------------------------------------------
// Each is parsed once, by load_config, into one of these enums; the rest of
// the code never compares config strings. name_of gives the word back, for
// messages and reports.

/// client_configs.model_configs.name: CNN | torchscript | safetensors |
/// synthetic | llama.
enum class model_kind { cnn, torchscript, safetensors, synthetic, llama };
/// train_configs.trainer: VanillaTrainer (LibTorch) | dummy | python.
enum class trainer_kind { vanilla, dummy, python };
/// train_configs.storage (dummy trainer): ram | disk.
enum class model_storage { ram, disk };
/// train_configs.dp.mode: none | per_sample | ghost | fused.
enum class dp_sgd_mode { none, per_sample, ghost, fused };
/// aggregator_kwargs.client_weights_mode: equal | sample_size.
enum class client_weighting { equal, sample_size };
/// aggregator_kwargs.staleness_fn: constant | polynomial | hinge.
enum class staleness_kind { constant, polynomial, hinge };
/// aggregator_kwargs.partial_updates: discard | keep.
enum class partial_updates { discard, keep };
/// aggregator_kwargs.tensor_rules' values: average (as the tensor's kind
/// says: floats by the rule, integers rounded, bools by majority) | keep
/// (the server's value stays; clients' values are not used).
enum class tensor_rule { average, keep };
/// server_configs.checkpoint.on_error: stop | continue.
enum class checkpoint_failure { stop, go_on };
/// scheduler_kwargs.on_deadline: fail | wait.
enum class deadline_action { fail, wait };

std::string_view name_of(model_kind k);
std::string_view name_of(trainer_kind k);
std::string_view name_of(model_storage k);
std::string_view name_of(dp_sgd_mode k);
std::string_view name_of(client_weighting k);
std::string_view name_of(staleness_kind k);
std::string_view name_of(partial_updates k);
std::string_view name_of(deadline_action k);

/// A config's seconds (`*_s` keys) as milliseconds, truncated.
std::chrono::milliseconds millis_of(double seconds);

/// train_configs.optim and optim_args.
struct optim_config {
  std::string name = "SGD"; ///< SGD | Adam
  double lr = 0.01;
  double momentum = 0;
  double weight_decay = 0;
};

/// client_configs.train_configs.dp: DP-SGD in the LibTorch trainer (see
/// src/dp_sgd.hpp). Each step draws a Poisson sample of rate
/// q = train_batch_size / local samples, clips every per-sample gradient to
/// max_grad_norm, adds N(0, (noise_multiplier max_grad_norm)^2) per element
/// to their sum and divides by the expected batch size.
struct dp_sgd_config {
  dp_sgd_mode mode = dp_sgd_mode::none;
  double noise_multiplier = 1.0;
  double max_grad_norm = 1.0;
  /// false: shuffled batches of train_batch_size (epsilon is then computed
  /// as if they were Poisson samples, as Opacus does).
  bool poisson_sampling = true;
  double delta = 1e-5; ///< for the epsilon the reports give
};

/// client_configs.train_configs.
struct train_config {
  /// VanillaTrainer (LibTorch) | dummy | python: the clients are fedcaf's
  /// Python client, training with their own code (fedcaf server only).
  trainer_kind trainer = trainer_kind::vanilla;
  double add = 0; ///< dummy: added to every element (0: no change)
  /// Evaluate each global model received on the client's own test data and
  /// report it to the server. Set by server_configs.federated_evaluation.
  bool federated_evaluation = false;
  /// Clip the update (trained minus received model) to this L2 norm before
  /// sending it; 0: no clipping. Set by the server's dp_fedavg.clip_norm.
  double update_clip_norm = 0;
  /// Set by a server with aggregator_kwargs.norm_bound: the client keeps
  /// the model it received and declares its update's L2 norm in its offer.
  bool declare_update_norm = false;
  /// dummy: client i (its data partition index, from 0) adds add * (i + 1),
  /// so that updates differ between clients.
  bool add_by_index = false;
  /// dummy: also adds to each float32 element a pseudo-random value uniform
  /// in [-noise, noise) (0: none; make_dummy_trainer).
  double noise = 0;
  std::string mode = "epoch"; ///< epoch | step
  uint32_t num_local_epochs = 1;
  uint32_t num_local_steps = 100;
  optim_config optim;
  uint32_t train_batch_size = 64;
  uint32_t val_batch_size = 1000;
  /// loss_fn: cross_entropy | nll (labels are class ids) | mse |
  /// bce_with_logits (labels are float targets shaped like the output).
  /// APPFL's class names CrossEntropyLoss, NLLLoss, MSELoss and
  /// BCEWithLogitsLoss are read as these.
  std::string loss_fn = "cross_entropy";
  /// FedProx's mu (Li et al. 2020): the local loss gets
  /// mu / 2 ||w - w_global||^2; 0: plain local training.
  double proximal_mu = 0;
  /// cpu, or cuda iff the LibTorch fedcaf was built with has CUDA
  /// (FEDCAF_TORCH_HAS_CUDA; Debian's has not).
  std::string device = "cpu";
  uint32_t num_threads = 0; ///< LibTorch intra-op threads; 0: automatic
  /// dummy trainer: ram keeps the model on the heap; disk in a file under
  /// storage_dir whose pages are given back after use.
  model_storage storage = model_storage::ram;
  std::string storage_dir = "/tmp";
  dp_sgd_config dp;
};

/// client_configs.model_configs.
struct model_config {
  /// `name` (or APPFL's `model_name`): CNN | torchscript | synthetic |
  /// llama.
  model_kind model_name = model_kind::cnn;
  std::string preset = "llama-tiny"; ///< llama: a Hugging Face shape preset
  /// A safetensors file holding the initial model; its layout is the
  /// model's (for CNN it must match the network). Empty: drawn from seed.
  /// torchscript: the TorchScript file (torch.jit.script(m).save(path)),
  /// required; its weights are the initial model.
  std::string path;
  /// synthetic: float tensors of about equal size adding up to total_bytes.
  uint32_t num_tensors = 64;
  uint64_t total_bytes = 64 << 20;
  std::string dtype = "float32"; ///< float32 | bfloat16 | float16 (not CNN)
  uint32_t num_channel = 1;
  uint32_t num_classes = 10;
  uint32_t num_pixel = 28;
  uint64_t seed = 42; ///< initial weights (same_init_model)
};

/// data_configs.
struct data_config {
  std::string dataset_name = "FashionMNIST"; ///< FashionMNIST | tensors
  std::string dataset_path = "/usr/share/datasets/fashion-mnist";
  uint32_t num_clients = 0;  ///< dataset_kwargs.num_clients
  uint32_t client_index = 0; ///< dataset_kwargs.client_id: the partition
  std::string partition_strategy =
      "iid"; ///< iid | class_noniid | dirichlet_noniid
  uint32_t classes_per_client = 2;
  double dirichlet_alpha = 0.5; ///< dirichlet_noniid: smaller, more skew
  uint64_t seed = 42;
  /// tensors: dataset_kwargs.train_features, train_labels, test_features,
  /// test_labels, each "x.npy", "x.safetensors" (its only tensor) or
  /// "x.safetensors:NAME" (see read_tensor_array). The test pair is
  /// optional (without it clients have no test data).
  std::string train_features;
  std::string train_labels;
  std::string test_features;
  std::string test_labels;
};

/// comm_configs.stream_configs: this project's transfer keys.
struct stream_config {
  uint64_t chunk_bytes = 1 << 20; ///< payload bytes per chunk
  uint32_t window = 4;            ///< chunks unacknowledged per stream
  double idle_timeout_s = 60;     ///< fail a stream idle this long
  /// Server: an upload stream that moved fewer bytes per second than this
  /// over the last rate_window_s of the time it could send (the server's
  /// withheld credits left out) is ended and its client leaves the round;
  /// 0: no minimum. The default is a 512 kbit/s link, the slowest one a
  /// deployment is expected to have.
  double min_rate_bytes_per_s = 65536;
  /// Server: the window the minimum rate is measured over (at least two
  /// chunks at the minimum rate: a longer one is used where chunk_bytes /
  /// min_rate_bytes_per_s asks for it).
  double rate_window_s = 120;

  /// The window the minimum rate is measured over, in seconds, for chunks
  /// of `chunk_bytes` (bytes count as whole chunks arrive): rate_window_s,
  /// or the time two chunks take at min_rate_bytes_per_s if longer.
  double rate_window_for(uint64_t chunk_bytes) const {
    if (min_rate_bytes_per_s <= 0)
      return rate_window_s;
    return std::max(rate_window_s, 2.0 * static_cast<double>(chunk_bytes) /
                                       min_rate_bytes_per_s);
  }
  /// Between processes: each side sends a heartbeat this often, and drops a
  /// connection on which nothing arrived for connection_timeout_s.
  double heartbeat_s = 5;
  double connection_timeout_s = 30;
  /// Server: how long a lost client may take to reconnect and resume before
  /// it is dropped from the run (the scheduler's rule then applies); 30 s.
  /// Client: how long it keeps trying to get back to a lost server; by
  /// default client_reconnect_grace_s, long enough for a server's restart
  /// from its checkpoint.
  double reconnect_grace_s = 30;
  /// Server: a connection must finish its TLS handshake and its Hello within
  /// this time, or it is closed.
  double handshake_timeout_s = 10;
  /// Server: connections that have not yet been welcomed, at once; one more
  /// makes the oldest of them give way (it is closed).
  uint32_t max_unauthenticated = 64;
};

/// grpc_configs TLS keys. With use_ssl both sides present a certificate and
/// verify the peer's against root_certificate (mutual TLS).
struct tls_config {
  std::string certificate;      ///< server_certificate | client_certificate
  std::string certificate_key;  ///< server_certificate_key | client_...
  std::string root_certificate; ///< the CA that signed the peer
};

/// grpc_configs authenticator keys (APPFL's NaiveAuthenticator): a client
/// sends its token in Hello; the server holds one token per client id.
struct auth_config {
  bool enabled = false; ///< use_authenticator
  std::string token;    ///< client: authenticator_args.auth_token(_file)
  /// server: authenticator_args.tokens (client id -> token), or tokens_file
  /// (a YAML mapping of the same).
  std::vector<std::pair<std::string, std::string>> tokens;
};

/// comm_configs (grpc_configs keep APPFL's meaning).
struct comm_config {
  std::string server_uri = "127.0.0.1:50051";
  uint64_t max_message_size = 16 << 20;
  bool use_model_chunking = true;
  bool use_ssl = false;
  tls_config tls;
  auth_config auth;
  stream_config stream;

  /// Returns the chunk size for a model of `model_bytes`: the configured
  /// chunk size, or the whole model when chunking is off. Returns an error
  /// iff the chunk does not fit in max_message_size.
  result<uint64_t> chunk_bytes_for(uint64_t model_bytes) const;
};

/// server_configs.aggregator_kwargs: what the named aggregator does with the
/// updates. Keys and meanings as APPFL names them.
struct rule_config {
  client_weighting client_weights_mode = client_weighting::equal;
  /// Defaults: with each rule's, the default 3-round run reaches 0.85 or more
  /// (0.865 - 0.898; configs/simulate.yaml: CNN, Fashion-MNIST, 2 clients, SGD lr
  /// 0.05 momentum 0.9), as FedAvg does, and lies in its paper's range.
  ///
  /// eta, when aggregator_kwargs names none: FedAdam and FedYogi 0.1 =
  /// 10^-1, FedAdagrad 1 = 10^0 (Reddi et al. 2021 sweep 10^-3 .. 10^1 in
  /// half-decades; in 3 rounds an adaptive step moves an element by about
  /// eta per round, FedAdagrad's by about eta/10, so smaller etas stop near
  /// 0.8), FedAvgM and FedBuff 1 (Hsu et al. 2019; Nguyen et al. 2022).
  double server_learning_rate = 1.0;
  /// tau (adaptive rules): 10^-3, Reddi et al.'s default.
  double server_adapt_param = 1e-3;
  /// beta1: 0.9 (Reddi et al.; FedAvgM's beta, Hsu et al.).
  double server_momentum_param_1 = 0.9;
  double server_momentum_param_2 = 0.99; ///< beta2 (FedAdam, FedYogi): 0.99
  /// FedAsync, FedBuff: mixing weight; 0.9 (Xie et al. 2019 use 0.6 - 0.9).
  double alpha = 0.9;
  /// staleness_fn (FedAsync, FedBuff): constant | polynomial | hinge, with
  /// staleness_fn_kwargs a (and b for hinge), as in Xie et al. 2019.
  staleness_kind staleness_fn = staleness_kind::constant;
  double staleness_a = 0.5;
  double staleness_b = 4;
  uint32_t buffer_k = 3; ///< FedBuff: K, updates per server step
  /// An update that was cut off (its client dropped mid-upload): keep its
  /// delivered chunks (every position averages the updates that reached it),
  /// or discard it whole (the others send theirs again).
  fedcaf::partial_updates partial_updates = fedcaf::partial_updates::discard;
  /// dp_fedavg (user-level DP-FedAvg, McMahan et al. 2018): clients clip
  /// their update to L2 norm clip_norm; the server adds Gaussian noise of
  /// std noise_multiplier * clip_norm / m to each averaged element (m: the
  /// updates averaged there). 0: off.
  double dp_clip_norm = 0;
  double dp_noise_multiplier = 0;
  double dp_delta = 1e-5;
  uint64_t dp_seed = 0;
  /// Refuse an update whose L2 distance from the global model exceeds this;
  /// 0: no bound.
  double max_update_norm = 0;
  /// On by default: refuse an update whose L2 distance from the global
  /// model g exceeds max_update_ratio * max(||g||, update_norm_floor); 0:
  /// off. Honest updates measured at most 1.89 ||g|| (docs/design.md,
  /// "Bounded influence"): 10 leaves a margin of 5. Not applied under
  /// secure aggregation (masked updates), where clipping_range bounds each
  /// element instead.
  double max_update_ratio = 10;
  /// The least ||g|| the ratio is taken of, so that a model near zero (a
  /// zero initialisation) still takes updates; must be positive.
  double update_norm_floor = 1;
  /// Sample counts a client claims (its offer's weight under
  /// client_weights_mode sample_size, the weight of its evaluations) are
  /// capped at this; must be positive (default 2^20 = 1,048,576).
  uint64_t max_sample_size = uint64_t{1} << 20;
  /// Averaging rules (Sun et al. 2019, norm bounding): an update further
  /// than this (L2) from the model its client received is scaled back to
  /// it, x' = g + (x - g) min(1, norm_bound / ||x - g||); 0: off. The
  /// client declares ||x - g|| in its offer; the server measures it as the
  /// chunks arrive and refuses an update that exceeds what it declared.
  double norm_bound = 0;
  /// TrimmedMeanAggregator: the fraction of a coordinate's values dropped
  /// from each end, in [0, 0.5); 0.2 as Flower's FedTrimmedAvg.
  double trim_ratio = 0.2;
  /// tensor_rules: per tensor name pattern (fnmatch: *, ?, [...]), in the
  /// config's order, the rule for the tensors it matches (the first
  /// pattern that matches decides); a tensor no pattern matches is
  /// averaged. Every pattern must match a tensor of the model.
  std::vector<std::pair<std::string, tensor_rule>> tensor_rules;
};

/// server_configs.memory_mode, parsed once here. ram: the global model and
/// a model-sized sum (about 2 x model). window: only stream_configs.window
/// chunk positions open, each averaged into the global model as soon as
/// every client delivered it (about 1 x model). disk: as window, the global
/// model in a file mapping whose pages are given back after use.
enum class memory_mode { ram, window, disk };

/// "ram", "window" or "disk".
const char* to_string(memory_mode m);

/// The mode named `name` ("ram", "window", "disk"); nullopt for another.
std::optional<memory_mode> parse_memory_mode(std::string_view name);

/// A client's default reconnect_grace_s: 10 minutes.
constexpr double client_reconnect_grace_s = 600;

/// server_configs.checkpoint: after every every_rounds-th round (and the
/// last) the server writes what the run needs to go on into dir (see
/// fedcaf/checkpoint.hpp), keeping the last `keep`; a checkpoint that
/// cannot be written stops the run (on_error: stop) or is logged and
/// skipped (continue). Empty dir: none.
struct checkpoint_config {
  std::string dir;
  uint32_t every_rounds = 1;
  uint32_t keep = 2;
  checkpoint_failure on_error = checkpoint_failure::stop;
};

/// server_configs.secure_aggregation: SecAgg+ (Bell et al. 2020). Each
/// client shares its secrets with `neighbours` others (the paper: O(log n)
/// suffices against a fraction of dropouts and corrupt clients; 0: every
/// other client), any `threshold` of whom can unmask it (more than half of
/// its neighbours, so that the server cannot get both of a client's
/// secrets from different halves; 0: floor(neighbours / 2) + 1). Weighted
/// models are clipped to [-clipping_range, clipping_range] and quantized to
/// quantization_bits bits; the mean of n clients is within n 2c / ((2^b -
/// 1) W) of the exact one per element.
struct secure_aggregation_config {
  bool enabled = false;
  uint32_t threshold = 0;
  double clipping_range = 8.0;
  uint32_t quantization_bits = 22;
  uint32_t neighbours = 0;
};

struct server_config {
  uint32_t num_clients = 2;
  uint32_t num_global_epochs = 3;
  std::string scheduler = "SyncScheduler";
  /// scheduler_kwargs.min_clients: a round may finalize with this many
  /// updates when clients were dropped or missed the deadline (default:
  /// num_clients, i.e. every client).
  uint32_t min_clients = 0;
  /// scheduler_kwargs.round_deadline_s: how long a round may take, from its
  /// start to the last update: clients that have not delivered their whole
  /// update by then (not offered, or still uploading) are cut off and sit
  /// the round out; 0: none.
  double round_deadline_s = 600;
  /// scheduler_kwargs.registration_deadline_s: how long the server waits,
  /// from its start, for num_clients to register; then the run starts with
  /// those registered if they are at least min_clients, else fails naming
  /// the clients that never came. 0: no deadline.
  double registration_deadline_s = 600;
  /// scheduler_kwargs.on_deadline: fail | wait, when the deadline passes
  /// with fewer than min_clients updates offered.
  deadline_action on_deadline = deadline_action::fail;
  /// scheduler_kwargs.clients_per_round (or client_fraction of num_clients):
  /// the clients sampled for each round, drawn with scheduler_kwargs.seed;
  /// 0: every registered client.
  uint32_t clients_per_round = 0;
  uint64_t sampling_seed = 42;
  /// FedAvgAggregator | FedAvgMAggregator | FedAdamAggregator |
  /// FedYogiAggregator | FedAdagradAggregator | FedAsyncAggregator |
  /// FedBuffAggregator
  server_rule aggregator = server_rule::fedavg;
  rule_config rule;     ///< aggregator_kwargs
  bool evaluate = true; ///< evaluate each global model on the test set
  /// Clients evaluate each global model on their own data and the server
  /// averages their figures, weighted by sample count, into the round's
  /// client_metrics (and test_accuracy where the server has no evaluator).
  /// Unset: on iff the clients train (not the dummy trainer) a model the
  /// server cannot evaluate (not the built-in CNN). Resolved by load_config.
  std::optional<bool> federated_evaluation;
  /// See memory_mode above.
  fedcaf::memory_mode memory_mode = fedcaf::memory_mode::ram;
  /// disk mode: where the global model's file lives (removed at exit).
  std::string storage_dir = "/tmp";
  /// Write each new global model to this safetensors file ("{round}" is
  /// replaced by the round number); empty: do not save.
  std::string save_global_model;
  checkpoint_config checkpoint;
  secure_aggregation_config secure_aggregation;
  /// relays: client id -> the most clients under it (fedcaf relay; see
  /// docs/design.md, "Trees of aggregators"). Such a client offers its
  /// group's partial sum, weighing as many clients as it folded.
  std::map<std::string, uint64_t> relays;
  /// simulate only: run the num_clients clients under this many relays in
  /// the one process (Relay1..R, the clients in R blocks of consecutive
  /// ids, clients_per_round shared among them); 0: a flat run.
  uint32_t simulated_relays = 0;
  comm_config comm;
};

/// client_configs: what the server hands every client at registration.
struct client_configs {
  train_config train;
  model_config model;
  /// comm_configs.compression: {method: none | fp16 | bf16 | int8 | zfp,
  /// direction: up | down | both, zfp_tolerance, error_feedback}.
  compression_config compression;
};

/// The keys of a client's own file.
struct client_config {
  std::string client_id = "Client1";
  std::string device = "cpu";
  uint32_t num_threads = 0;
  data_config data;
  comm_config comm;
};

/// Which command a config file is for; decides the allowed top-level keys.
/// client is `fedcaf client`, whose trainer reads its partition of the data
/// set (data_configs.dataset_kwargs.num_clients is required);
/// python_client is `fedcaf.Client` in Python, whose own code brings the
/// data: its data_configs is optional and accepted unread.
enum class config_role { simulate, server, client, python_client };

/// Returns true iff `r` is a client's own file (client or python_client).
constexpr bool is_client_role(config_role r) {
  return r == config_role::client || r == config_role::python_client;
}

/// A validated configuration.
struct config {
  config_role role = config_role::simulate;
  server_config server;
  client_configs clients;
  data_config data;
  client_config client;
  std::string source;              ///< file name, or "<embedded simulate.yaml>"
  std::string client_configs_text; ///< client_configs as YAML, after --set
  std::string effective_yaml;      ///< the YAML after --set, for reports
  /// Keys of APPFL's layout that fedcaf does not use and accepted (for the
  /// one warning that lists them; --strict refuses them).
  std::vector<std::string> ignored_keys;
};

/// Parses and validates `yaml_text` after applying each `--set` override
/// ("a.b.c=value"). Returns an error naming the source and the key path iff a
/// key is unknown, a value has the wrong type or range, a required key is
/// missing, or a named file does not exist.
result<config> load_config(std::string_view yaml_text, std::string source,
                           config_role role,
                           const std::vector<std::string>& overrides = {});

/// Reads a file and calls load_config on it.
result<config> load_config_file(const std::string& path, config_role role,
                                const std::vector<std::string>& overrides = {});

/// Returns the keys of c.ignored_keys joined by ", " ("" if none).
std::string ignored_keys_text(const config& c);

/// Returns the one warning that lists the keys of APPFL's layout the config
/// gave and fedcaf does not use: "warning: SOURCE: ignored N keys fedcaf does
/// not use: K1, K2 (--strict refuses them)"; "" iff there are none.
std::string ignored_keys_warning(const config& c);

/// Returns the client_configs section as YAML (sent to clients in Welcome).
std::string client_configs_yaml(const config& c);

/// Parses the client_configs YAML received from a server.
result<client_configs> parse_client_configs(std::string_view yaml_text);

/// What `fedcaf profile` runs: every combination of the lists, each as a
/// server and N clients in processes of their own.
struct profile_matrix {
  std::string base = "configs/synthetic_dummy.yaml"; ///< server config
  std::vector<uint64_t> sizes_mib{256};
  std::vector<uint32_t> clients{2};
  std::vector<bool> chunking{true, false};
  std::vector<std::string> memory_modes{"ram"};
  uint32_t rounds = 3;
  uint32_t sample_ms = 50;   ///< RSS sampling period
  uint32_t timeout_s = 1800; ///< per run
};

/// Reads and validates a profile matrix file (unknown keys, types, values)
/// after applying each `--set` override ("a.b=value"). A relative `base`
/// names a file beside the matrix file, or else one in the working
/// directory; m.base holds the path found.
result<profile_matrix>
load_profile_matrix(const std::string& path,
                    const std::vector<std::string>& overrides = {});

/// What `fedcaf dp-profile` measures: DP-SGD's memory and time on a small
/// transformer sequence classifier over synthetic tokens, for every mode and
/// sequence length, each run in a process of its own.
struct dp_profile_config {
  // The model: token and position embeddings, num_layers pre-LayerNorm
  // blocks (multi-head self-attention, a GELU feed-forward of d_ff), a final
  // LayerNorm, the mean over tokens, a linear head of num_labels.
  uint32_t vocab_size = 8192;
  uint32_t d_model = 256;
  uint32_t num_heads = 4;
  uint32_t num_layers = 2;
  uint32_t d_ff = 1024;
  uint32_t num_labels = 3;
  uint32_t batch_size = 4;
  std::vector<uint32_t> seq_lengths{128, 256, 512, 1024};
  /// none | per_sample | ghost | fused; none is the baseline of overheads.
  std::vector<std::string> modes{"none", "ghost", "fused", "per_sample"};
  uint32_t warmup_iter = 1;
  uint32_t num_iter = 3;
  /// Each (mode, length) is measured this often, the modes of a length
  /// taking turns; its time is the median of the repeats' means (shared
  /// machines drift).
  uint32_t repeats = 1;
  double noise_multiplier = 1.0;
  double max_grad_norm = 1.0;
  double learning_rate = 1e-3; ///< SGD
  uint32_t num_threads = 0;    ///< LibTorch threads; 0: all cores
  uint64_t seed = 0;
  uint32_t timeout_s = 600; ///< per run; a run past it is recorded as failed
};

/// Reads and validates a dp-profile file (unknown keys, types, values)
/// after applying each `--set` override ("a.b=value").
result<dp_profile_config>
load_dp_profile_config(const std::string& path,
                       const std::vector<std::string>& overrides = {});

/// The default configuration that `fedcaf simulate` runs without -c.
std::string_view embedded_simulate_yaml();

} // namespace fedcaf
