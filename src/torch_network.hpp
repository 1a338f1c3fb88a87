#pragma once
// The networks the LibTorch trainer runs, behind one interface: the built-in
// CNN (torch_trainer.cpp) and a TorchScript module (torch_script.cpp).
// Included only by src/torch_*.cpp. Thread-safety: one user at a time.

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "fedcaf/error.hpp"
#include "fedcaf/manifest.hpp"

namespace fedcaf {

namespace dp {
struct tape;
} // namespace dp

/// A tensor of a model's state with its state_dict name.
using named_tensor = std::pair<std::string, torch::Tensor>;

class network {
public:
  virtual ~network() = default;

  /// The output for a batch of inputs.
  virtual torch::Tensor forward(const torch::Tensor& x) = 0;

  /// Training mode (dropout, batch statistics) iff `on`.
  virtual void set_training(bool on) = 0;

  /// The trainable parameters, for the optimizer.
  virtual std::vector<torch::Tensor> parameters() = 0;

  /// What travels: parameters, then buffers (integer and bool ones are
  /// carried in float32, fedcaf/carried.hpp), named and ordered as in
  /// PyTorch's state_dict.
  virtual std::vector<named_tensor> state() = 0;

  /// Moves every tensor to `device` (state() then names the moved ones).
  virtual void to(const torch::Device& device) = 0;

  /// The tape its DP-aware layers record on; null for a network without.
  virtual dp::tape* dp_tape() { return nullptr; }
};

/// Returns the TorchScript module in `path` as a network. Returns an error
/// naming the file iff LibTorch cannot load it, or a tensor of its state is
/// not float32 or not contiguous.
result<std::unique_ptr<network>> load_script_network(const std::string& path);

/// Returns the dtype an integer or bool tensor is held as, or nullopt for
/// any other.
std::optional<dtype> held_dtype_of(const torch::Tensor& t);

/// Returns the layout of `state`, each tensor as float32 (integer and bool
/// ones carried: tensor_info::held).
manifest layout_of(const std::vector<named_tensor>& state);

} // namespace fedcaf
