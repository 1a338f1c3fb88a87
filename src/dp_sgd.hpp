#pragma once
// DP-SGD's clipping without one backward per sample (work in progress).
// LibTorch has no module hooks, so DP-aware layers record their input and
// their output on a tape during the forward pass; one call to
// torch::autograd::grad with respect to the recorded outputs then gives every
// layer's per-sample output gradients G (the loss is a sum of per-sample
// losses). From the input activations A and G:
//   per-sample squared gradient norms:
//     direct  ||G_i^T A_i||^2 (materialises one d x p gradient per sample)
//     ghost   <A_i A_i^T, G_i G_i^T> (T x T Gram matrices, Li et al. 2022)
//     fused   per layer, whichever costs less: T (d + p) against d p
//   and the clipped sum of gradients sum_i c_i G_i^T A_i with
//   c_i = min(1, C / (||g_i|| + 1e-6)), without a second backward
//   (book-keeping, Bu et al. 2023).
// Layers: Linear (2-D and sequence 3-D inputs), Conv2d (groups 1, via
// unfold), Embedding, LayerNorm (affine over the last dimension).
// Includes LibTorch: only src/torch_*.cpp and src/dp_sgd.cpp may include it.
// Thread-safety: a tape belongs to one trainer.

#include <string>
#include <vector>

#include <torch/torch.h>

namespace fedcaf::dp {

enum class clip_mode { per_sample, ghost, fused };

enum class layer_kind { linear, conv2d, embedding, layer_norm };

/// What one DP-aware layer saw in one forward pass.
struct layer_record {
  layer_kind kind;
  torch::nn::Module* module; ///< holds `weight` and maybe `bias`
  torch::Tensor input;       ///< detached activations (embedding: indices)
  torch::Tensor output;      ///< the layer's output, in the graph
};

/// The records of the forward passes since the last clear().
class tape {
public:
  void record(layer_record r) {
    if (enabled_)
      records_.push_back(std::move(r));
  }
  std::vector<layer_record>& records() { return records_; }
  void clear() { records_.clear(); }
  void enable(bool on) { enabled_ = on; }

private:
  std::vector<layer_record> records_;
  bool enabled_ = true;
};

/// A Linear layer that records on `t` (null: records nothing).
struct linear_impl : torch::nn::LinearImpl {
  linear_impl(int64_t in, int64_t out, tape* t)
      : torch::nn::LinearImpl(in, out), tape_(t) {}
  torch::Tensor forward(const torch::Tensor& x);
  tape* tape_;
};
TORCH_MODULE_IMPL(linear, linear_impl);

/// A Conv2d layer (groups 1) that records on `t`.
struct conv2d_impl : torch::nn::Conv2dImpl {
  conv2d_impl(torch::nn::Conv2dOptions o, tape* t)
      : torch::nn::Conv2dImpl(std::move(o)), tape_(t) {}
  torch::Tensor forward(const torch::Tensor& x);
  tape* tape_;
};
TORCH_MODULE_IMPL(conv2d, conv2d_impl);

/// An Embedding layer that records on `t`.
struct embedding_impl : torch::nn::EmbeddingImpl {
  embedding_impl(int64_t num, int64_t dim, tape* t)
      : torch::nn::EmbeddingImpl(num, dim), tape_(t) {}
  torch::Tensor forward(const torch::Tensor& idx);
  tape* tape_;
};
TORCH_MODULE_IMPL(embedding, embedding_impl);

/// A LayerNorm over the last dimension, with weight and bias, recording on
/// `t`.
struct layer_norm_impl : torch::nn::LayerNormImpl {
  layer_norm_impl(int64_t dim, tape* t)
      : torch::nn::LayerNormImpl(torch::nn::LayerNormOptions({dim})), tape_(t) {
  }
  torch::Tensor forward(const torch::Tensor& x);
  tape* tape_;
};
TORCH_MODULE_IMPL(layer_norm, layer_norm_impl);

/// Returns the name of the first trainable parameter of `model` that no
/// DP-aware layer owns, or "" iff every one is covered.
std::string uncovered_parameter(torch::nn::Module& model);

/// From the tape of one forward pass and its per-sample losses (shape [B]):
/// returns each sample's gradient norm over every recorded layer, and sets
/// each recorded parameter's grad to the sum over samples of its gradient
/// clipped to `max_grad_norm` (no noise). Clears the tape.
torch::Tensor clip_and_accumulate(tape& t, const torch::Tensor& sample_losses,
                                  double max_grad_norm, clip_mode mode);

} // namespace fedcaf::dp
