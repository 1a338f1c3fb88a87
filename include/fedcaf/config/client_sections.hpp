#pragma once
// The sections that say how a client trains: client_configs (train_configs,
// model_configs, the uploads' compression), which the server hands every
// client, and data_configs. The LibTorch trainer sees these and nothing of
// the server's or the network's configuration. Value types only.

#include <cstdint>
#include <string>

#include "fedcaf/compression.hpp"
#include "fedcaf/config/words.hpp"

namespace fedcaf {

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

/// client_configs: what the server hands every client at registration.
struct client_configs {
  train_config train;
  model_config model;
  /// comm_configs.compression: {method: none | fp16 | bf16 | int8 | zfp,
  /// direction: up | down | both, zfp_tolerance, error_feedback}.
  compression_config compression;
};

} // namespace fedcaf
