// Reads client_configs (train_configs, model_configs, the uploads'
// compression, APPFL's DP and compressor switches) and data_configs. A
// file these name and this process opens is checked here.

#include "read_sections.hpp"

#include <filesystem>
#include <utility>

#include "fedcaf/install_layout.hpp"
#include "fedcaf/manifest.hpp"

namespace fedcaf::config_reader {

namespace {

void read(section s, optim_config& o) {
  s.get("lr", o.lr);
  s.get("momentum", o.momentum);
  s.get("weight_decay", o.weight_decay);
  if (!(o.lr > 0))
    s.fail("lr", "must be greater than 0");
}

void read(section s, dp_sgd_config& d) {
  s.one_of("mode", d.mode);
  s.get("noise_multiplier", d.noise_multiplier);
  if (!(d.noise_multiplier >= 0))
    s.fail("noise_multiplier", "must be 0 (no noise) or positive");
  s.positive("max_grad_norm", d.max_grad_norm);
  s.get("poisson_sampling", d.poisson_sampling);
  s.get("delta", d.delta);
  if (!(d.delta > 0 && d.delta < 1))
    s.fail("delta", "must lie strictly between 0 and 1");
}

constexpr const char* python_file_refusal =
    "names a Python file, which fedcaf's C++ trainer does not run: for a "
    "model, loss or dataset in Python use the Python client (`import "
    "fedcaf`, see examples/python/fashion_mnist.py); for no Python on "
    "clients export the model with torch.jit.script "
    "(examples/python/export_torchscript.py) and set model_configs.name: "
    "torchscript, data_configs.dataset_name: tensors and "
    "train_configs.loss_fn";

#ifdef FEDCAF_TORCH_HAS_CUDA
constexpr bool torch_has_cuda = true;
#else
constexpr bool torch_has_cuda = false;
#endif

/// Reads train_configs.loss_fn; APPFL's class names become fedcaf's.
void read_loss(section& s, std::string& loss) {
  constexpr std::pair<const char*, const char*> appfl_names[] = {
      {"CrossEntropyLoss", "cross_entropy"},
      {"NLLLoss", "nll"},
      {"MSELoss", "mse"},
      {"BCEWithLogitsLoss", "bce_with_logits"}};
  s.one_of("loss_fn", loss,
           {"cross_entropy", "nll", "mse", "bce_with_logits",
            "CrossEntropyLoss", "NLLLoss", "MSELoss", "BCEWithLogitsLoss"});
  for (auto [appfl, name] : appfl_names)
    if (loss == appfl)
      loss = name;
}

/// `path` made absolute against the working directory, as it is opened.
std::string absolute_of(const std::string& path) {
  std::error_code ec;
  auto abs = std::filesystem::absolute(path, ec);
  return ec ? path : abs.lexically_normal().string();
}

/// Records that `key` names `path`, which is not a file: one short line,
/// the absolute path tried and `how` to write it ("" where no example
/// does). (A relative path in a config file is read from its folder, one
/// given with --set from the working directory: the path shows which.)
void fail_missing_file(section& s, const char* key, const std::string& path,
                       const std::string& how = "") {
  std::string why = "'" + absolute_of(path) + "' is not a file";
  s.fail(key, how.empty() ? why : why + " (" + how + ")");
}

/// How a model file of `kind` is written; "" where no example does (the
/// built-in CNN's weights come from fedcaf itself).
std::string model_writer(model_kind kind) {
  if (kind == model_kind::torchscript)
    return example_command("export_torchscript.py", "-o FILE") + " writes one";
  if (kind == model_kind::safetensors)
    return "fedcaf.save_safetensors(model.state_dict(), FILE) writes one, "
           "as " +
           example_command("fashion_mnist.py", "--init FILE") + " does";
  return "";
}

/// APPFL's DP switches. use_dp with dp_mechanism: opacus is DP-SGD (Opacus
/// clips each sample's gradient and adds Gaussian noise), read as fedcaf's
/// dp with dp_config's noise_multiplier and max_grad_norm (mode fused: the
/// modes differ in memory, not in the gradients). APPFL's output
/// perturbation (dp_mechanism laplace, its default, or gaussian) has no
/// counterpart and is refused: a privacy switch is never dropped. With
/// use_dp false the keys are ignored.
void read_appfl_dp(section& s, dp_sgd_config& dp) {
  bool use_dp = false;
  s.get("use_dp", use_dp);
  if (!use_dp)
    return s.ignore({"use_dp", "dp_mechanism", "dp_config"});
  std::string mechanism = "laplace"; // APPFL's default
  s.get("dp_mechanism", mechanism);
  if (mechanism != "opacus")
    return s.fail("use_dp",
                  "APPFL's '" + mechanism +
                      "' mechanism perturbs the trained model, which fedcaf "
                      "does not do: use dp_mechanism: opacus or "
                      "train_configs.dp (DP-SGD), or server_configs."
                      "aggregator_kwargs.dp_fedavg (user-level DP)");
  if (dp.mode != dp_sgd_mode::none)
    return s.fail("use_dp", "give train_configs.dp or APPFL's use_dp, not "
                            "both");
  read(s.child("dp_config"), dp); // noise_multiplier, max_grad_norm
  if (dp.mode == dp_sgd_mode::none)
    dp.mode = dp_sgd_mode::fused;
}

void read(section s, train_config& t) {
  s.one_of("trainer", t.trainer);
  s.get("add", t.add);
  s.get("add_by_index", t.add_by_index);
  s.get("noise", t.noise);
  if (!(t.noise >= 0 && t.noise <= 1e30))
    s.fail("noise", "must be 0 (off) or a positive finite number");
  s.get("federated_evaluation", t.federated_evaluation);
  s.get("proximal_mu", t.proximal_mu);
  if (!(t.proximal_mu >= 0))
    s.fail("proximal_mu", "must be 0 (off) or positive");
  s.get("declare_update_norm", t.declare_update_norm);
  s.get("update_clip_norm", t.update_clip_norm);
  if (t.update_clip_norm < 0)
    s.fail("update_clip_norm", "must be 0 (none) or positive");
  s.one_of("storage", t.storage);
  s.get("storage_dir", t.storage_dir);
  s.one_of("mode", t.mode, {"epoch", "step"});
  s.get("num_local_epochs", t.num_local_epochs, 1);
  s.get("num_local_steps", t.num_local_steps, 1);
  s.one_of("optim", t.optim.name, {"SGD", "Adam"});
  read(s.child("optim_args"), t.optim);
  s.get("train_batch_size", t.train_batch_size, 1);
  s.get("val_batch_size", t.val_batch_size, 1);
  read_loss(s, t.loss_fn);
  read_device(s, t.device);
  s.get("num_threads", t.num_threads, 0, max_threads);
  read(s.child("dp"), t.dp);
  read_appfl_dp(s, t.dp);
  // APPFL's keys that name Python files (a model, a loss, a metric, a
  // dataset loader): fedcaf's trainer runs no Python, so each is refused
  // rather than ignored.
  s.refuse("loss_fn_path", python_file_refusal);
  s.refuse("metric_path", python_file_refusal);
  // APPFL's validation, metric name, output perturbation's epsilon, batch
  // gradient clipping and loader shuffling: fedcaf evaluates on the server
  // (or the clients, federated_evaluation) with accuracy and loss, and
  // always shuffles training data. loss_fn_name names a class in the
  // loss_fn_path file; without that file the loss is loss_fn.
  s.ignore({"logging_output_dirname", "logging_output_filename",
            "do_validation", "do_pre_validation", "metric_name", "epsilon",
            "clip_grad", "clip_value", "clip_norm", "train_data_shuffle",
            "val_data_shuffle", "loss_fn_name"});
}

/// Reads model_configs; `opens_file`: this process reads model_configs.path
/// (the server, and clients that train with fedcaf's trainers), so the file
/// must exist here.
void read(section s, model_config& m, bool opens_file) {
  auto key = s.has("name") ? "name" : "model_name";
  s.one_of(key, m.model_name);
  s.one_of("preset", m.preset, {"llama-3.2-1b", "llama-3.1-8b", "llama-tiny"});
  s.get("path", m.path);
  if (!m.path.empty() && opens_file &&
      !std::filesystem::is_regular_file(m.path))
    fail_missing_file(s, "path", m.path, model_writer(m.model_name));
  else if (m.model_name == model_kind::safetensors && m.path.empty())
    s.fail("path", "is required for a safetensors model: the file of its "
                   "initial weights, whose tensors are the model's layout "
                   "(fedcaf.save_safetensors(model.state_dict(), path))");
  else if (m.model_name == model_kind::torchscript && m.path.empty())
    s.fail("path", "is required for a torchscript model: the file that "
                   "torch.jit.script(model).save(path) wrote (see "
                   "examples/python/export_torchscript.py)");
  s.get("seed", m.seed);
  s.get("num_tensors", m.num_tensors, 1, max_model_tensors);
  s.get("total_bytes", m.total_bytes, 64, max_model_bytes);
  s.one_of("dtype", m.dtype, {"float32", "bfloat16", "float16"});
  if (m.total_bytes / 4 < m.num_tensors)
    s.fail("total_bytes", "too small for num_tensors tensors");
  auto kwargs = s.child("model_kwargs");
  kwargs.get("num_channel", m.num_channel, 1, 1024);
  kwargs.get("num_classes", m.num_classes, 2, 1 << 16);
  kwargs.get("num_pixel", m.num_pixel, 28);
  if (m.num_pixel != 28)
    kwargs.fail("num_pixel", "the CNN is built for 28 x 28 images");
  s.refuse("model_path", python_file_refusal);
}

void read(section s, compression_config& c) {
  std::string method = "none", direction = "up";
  s.one_of("method", method, {"none", "fp16", "bf16", "int8", "zfp"});
  s.one_of("direction", direction, {"up", "down", "both"});
  c.method = parse_compression(method).value_or(compression_method::none);
  bool on = c.method != compression_method::none;
  c.up = on && direction != "down";
  c.down = on && direction != "up";
  s.positive("zfp_tolerance", c.zfp_tolerance);
  s.get("error_feedback", c.error_feedback);
}

/// APPFL's compressor_configs, read as fedcaf's compression where they
/// mean the same. enable_compression false: none (the other keys, used only
/// when it is on, are ignored). On, with an error-bounded lossy compressor
/// (SZ2, SZ3, SZx or ZFP) and error_bounding_mode ABS: zfp on uploads (APPFL
/// compresses uploads only), every value within zfp_tolerance = error_bound
/// of what the client sent, so without error feedback (which moves a value
/// by the last round's loss too). APPFL's lossless stage, flat dtype and
/// param_cutoff have no counterpart (zfp encodes every float tensor): they
/// are ignored. A REL bound (error_bound times each tensor's value range)
/// has none either: the block is then ignored whole, and nothing is
/// compressed.
void read_appfl_compressor(section s, compression_config& c) {
  bool enabled = false;
  std::string lossy = "SZ2Compressor", bounding;
  double bound = 0;
  s.get("enable_compression", enabled);
  s.get("error_bounding_mode", bounding);
  s.get("error_bound", bound);
  if (enabled)
    s.one_of("lossy_compressor", lossy,
             {"SZ2Compressor", "SZ3Compressor", "SZxCompressor",
              "ZFPCompressor", "SZ2", "SZ3", "SZx", "ZFP"});
  if (enabled && bounding != "ABS" && bounding != "REL")
    s.fail("error_bounding_mode", "must be ABS or REL, got '" + bounding + "'");
  if (!enabled || bounding != "ABS") {
    if (enabled)
      s.ignore({"enable_compression"});
    return s.ignore({"lossy_compressor", "lossless_compressor",
                     "error_bounding_mode", "error_bound", "flat_model_dtype",
                     "param_cutoff"});
  }
  if (!(bound > 0))
    return s.fail("error_bound", "must be greater than 0");
  c.method = compression_method::zfp;
  c.up = true;
  c.down = false;
  c.zfp_tolerance = bound;
  c.error_feedback = false;
  s.ignore({"lossless_compressor", "flat_model_dtype", "param_cutoff"});
}

/// The file of a tensors-dataset key: "x.safetensors:NAME" names x.safetensors.
std::string tensor_file_of(const std::string& value) {
  auto at = value.rfind(".safetensors:");
  return at == std::string::npos
             ? value
             : value.substr(0, at + sizeof ".safetensors" - 1);
}

/// How examples/python/export_tensors.py writes tensor file `path`
/// (Fashion-MNIST as DIR/{train,test}_{features,labels}.npy); "" for a
/// file of another name.
std::string tensor_writer(const std::string& path) {
  auto name = std::filesystem::path{path}.filename().string();
  for (const char* known : {"train_features.npy", "train_labels.npy",
                            "test_features.npy", "test_labels.npy"})
    if (name == known)
      return example_command("export_tensors.py", "-o DIR") +
             " writes Fashion-MNIST there";
  return "";
}

/// Checks a tensors-dataset file key: required iff `needed`, and its file
/// must exist.
void check_tensor_file(section& kwargs, const char* key,
                       const std::string& value, bool needed) {
  auto file = tensor_file_of(value);
  if (value.empty() && needed)
    kwargs.fail(key, "is required with dataset_name: tensors (a .npy or "
                     ".safetensors file)");
  else if (!value.empty() && !std::filesystem::is_regular_file(file))
    fail_missing_file(kwargs, key, file, tensor_writer(file));
}

void read_tensor_files(section& kwargs, data_config& d) {
  const std::pair<const char*, std::string*> keys[] = {
      {"train_features", &d.train_features},
      {"train_labels", &d.train_labels},
      {"test_features", &d.test_features},
      {"test_labels", &d.test_labels}};
  for (auto [key, value] : keys)
    kwargs.get(key, *value);
  bool tensors = d.dataset_name == "tensors";
  bool has_test = !d.test_features.empty() || !d.test_labels.empty();
  for (auto [key, value] : keys) {
    if (!tensors && !value->empty())
      kwargs.fail(key, "tensor files need dataset_name: tensors");
    else if (tensors)
      check_tensor_file(kwargs, key, *value,
                        std::string_view{key}.starts_with("train") || has_test);
  }
}

void read_dataset_path(section& s, data_config& d) {
  s.get("dataset_path", d.dataset_path);
  namespace fs = std::filesystem;
  if (d.dataset_path.ends_with(".py"))
    s.fail("dataset_path", python_file_refusal);
  else if (d.dataset_name == "FashionMNIST" &&
           !fs::exists(fs::path{d.dataset_path} /
                       "t10k-images-idx3-ubyte.gz") &&
           !fs::exists(fs::path{d.dataset_path} / "t10k-images-idx3-ubyte"))
    s.fail("dataset_path", "'" + d.dataset_path +
                               "' holds no Fashion-MNIST IDX files (install "
                               "dataset-fashion-mnist or point it elsewhere)");
}

} // namespace

void read_device(section& s, std::string& device) {
  s.one_of("device", device, {"cpu", "cuda"});
  if (device == "cuda" && !torch_has_cuda)
    s.fail("device",
           "cuda: the LibTorch this fedcaf was built with has no CUDA "
           "(Debian's has none); use cpu, or the Python client with a "
           "PyTorch that has CUDA (`import fedcaf`, see "
           "examples/python/fashion_mnist.py)");
}

void read(section s, client_configs& c, bool on_server) {
  read(s.child("train_configs"), c.train);
  read(s.child("model_configs"), c.model,
       on_server || c.train.trainer != trainer_kind::python);
  {
    auto comm = s.child("comm_configs");
    read(comm.child("compression"), c.compression);
    if (comm.has("compressor_configs") && comm.has("compression"))
      comm.fail("compressor_configs", "give compression (fedcaf's) or "
                                      "compressor_configs (APPFL's), not both");
    else if (comm.has("compressor_configs"))
      read_appfl_compressor(comm.child("compressor_configs"), c.compression);
  }
  // APPFL's data readiness report: fedcaf makes none.
  s.ignore({"data_readiness_configs"});
  if (c.train.storage == model_storage::disk &&
      c.train.trainer != trainer_kind::dummy)
    s.fail("train_configs.storage", "disk storage needs trainer: dummy");
  if (c.train.dp.mode != dp_sgd_mode::none &&
      c.train.trainer != trainer_kind::vanilla)
    s.fail("train_configs.dp.mode",
           "DP-SGD needs the LibTorch trainer (VanillaTrainer)");
  bool torch_model = c.model.model_name == model_kind::cnn ||
                     c.model.model_name == model_kind::torchscript;
  if (c.model.model_name == model_kind::safetensors &&
      c.train.trainer != trainer_kind::python &&
      c.train.trainer != trainer_kind::dummy)
    s.fail("train_configs.trainer",
           "a safetensors model is trained by the clients' own Python code: "
           "use trainer: python and the Python client (import fedcaf; see "
           "examples/python/fashion_mnist.py), or model_configs.name: "
           "torchscript for fedcaf's own trainer");
  else if (!torch_model && c.train.trainer != trainer_kind::dummy &&
           c.train.trainer != trainer_kind::python)
    s.fail("train_configs.trainer",
           "a " + std::string{name_of(c.model.model_name)} +
               " model has no data to train on "
               "here; use trainer: dummy");
  if (c.train.dp.mode != dp_sgd_mode::none &&
      c.model.model_name != model_kind::cnn)
    s.fail("train_configs.dp.mode", "DP-SGD needs the built-in CNN");
}

void read(section s, data_config& d, bool needs_partition) {
  s.one_of("dataset_name", d.dataset_name, {"FashionMNIST", "tensors"});
  read_dataset_path(s, d);
  auto kwargs = s.child("dataset_kwargs");
  read_tensor_files(kwargs, d);
  kwargs.get("num_clients", d.num_clients, 1, max_clients);
  kwargs.get("client_id", d.client_index, 0, max_clients - 1);
  kwargs.one_of("partition_strategy", d.partition_strategy,
                {"iid", "class_noniid", "dirichlet_noniid"});
  kwargs.get("classes_per_client", d.classes_per_client, 1, 256); // uint8
  kwargs.positive("dirichlet_alpha", d.dirichlet_alpha);
  kwargs.get("seed", d.seed);
  // APPFL's plot of the partition (a PDF): fedcaf draws none.
  kwargs.ignore({"visualization", "output_dirname", "output_filename"});
  if (needs_partition && !kwargs.has("num_clients"))
    kwargs.fail("num_clients",
                "is required: fedcaf client trains on its partition "
                "(dataset_kwargs.client_id, from 0) of the data set split "
                "num_clients ways; a Python client (import fedcaf) brings its "
                "own data and needs no data_configs");
  else if (needs_partition && d.client_index >= d.num_clients)
    kwargs.fail("client_id", "must be below num_clients (" +
                                 std::to_string(d.num_clients) + ")");
  s.refuse("dataset_path_py", python_file_refusal);
}

} // namespace fedcaf::config_reader
