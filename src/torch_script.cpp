// TorchScript models (model_configs.name: torchscript): a module saved by
// torch.jit.script(model).save(path), run as a network. Every c10::Error of
// loading is caught here and becomes an error naming the file.

#include <torch/script.h>

#include "torch_network.hpp"

namespace fedcaf {

namespace {

/// Appends `m`'s parameters, then its buffers (floating, integer and
/// bool), then its children's, depth first: PyTorch's state_dict order.
void collect_state(const torch::jit::Module& m, const std::string& prefix,
                   std::vector<named_tensor>& out) {
  for (const auto& p : m.named_parameters(false))
    out.emplace_back(prefix + p.name, p.value);
  for (const auto& b : m.named_buffers(false))
    if (b.value.is_floating_point() || held_dtype_of(b.value))
      out.emplace_back(prefix + b.name, b.value);
  for (const auto& c : m.named_children())
    collect_state(c.value, prefix + c.name + ".", out);
}

class script_network final : public network {
public:
  explicit script_network(torch::jit::Module module)
      : module_(std::move(module)) {}

  torch::Tensor forward(const torch::Tensor& x) override {
    return module_.forward({x}).toTensor();
  }

  void set_training(bool on) override { module_.train(on); }

  std::vector<torch::Tensor> parameters() override {
    std::vector<torch::Tensor> out;
    for (const auto& p : module_.parameters())
      out.push_back(p);
    return out;
  }

  std::vector<named_tensor> state() override {
    std::vector<named_tensor> out;
    collect_state(module_, "", out);
    return out;
  }

  void to(const torch::Device& device) override { module_.to(device); }

private:
  torch::jit::Module module_;
};

/// Returns an error naming `path` iff a tensor of `state` cannot travel
/// (not float32 nor an integer or bool buffer, or not contiguous).
result<void> check_state(const std::vector<named_tensor>& state,
                         const std::string& path) {
  if (state.empty())
    return error{errc::bad_config, path + ": the TorchScript model has no "
                                          "parameters or float buffers"};
  for (const auto& [name, t] : state)
    if ((t.scalar_type() != torch::kFloat32 && !held_dtype_of(t)) ||
        !t.is_contiguous())
      return error{errc::unsupported_dtype,
                   path + ": tensor '" + name +
                       "' is not a contiguous float32, integer or bool "
                       "tensor (it is " +
                       std::string{c10::toString(t.scalar_type())} +
                       "): save the model in float32"};
  return {};
}

} // namespace

result<std::unique_ptr<network>> load_script_network(const std::string& path) {
  std::unique_ptr<network> net;
  try {
    net = std::make_unique<script_network>(torch::jit::load(path));
  } catch (const std::exception& e) {
    std::string why = e.what();
    return error{errc::bad_config,
                 path +
                     ": LibTorch cannot load it as a TorchScript model "
                     "(write one with torch.jit.script(model).save(path), "
                     "see examples/python/export_torchscript.py): " +
                     why.substr(0, why.find('\n'))};
  }
  if (auto ok = check_state(net->state(), path); !ok)
    return ok.err();
  return net;
}

std::optional<dtype> held_dtype_of(const torch::Tensor& t) {
  switch (t.scalar_type()) {
  case torch::kInt64:
    return dtype::int64;
  case torch::kInt32:
    return dtype::int32;
  case torch::kInt16:
    return dtype::int16;
  case torch::kInt8:
    return dtype::int8;
  case torch::kUInt8:
    return dtype::uint8;
  case torch::kBool:
    return dtype::boolean;
  default:
    return std::nullopt;
  }
}

manifest layout_of(const std::vector<named_tensor>& state) {
  manifest m;
  for (const auto& [name, t] : state) {
    std::vector<uint64_t> shape(t.sizes().begin(), t.sizes().end());
    auto info = make_tensor_info(name, dtype::float32, shape);
    info.held = held_dtype_of(t);
    m.tensors.push_back(std::move(info));
  }
  return m;
}

} // namespace fedcaf
