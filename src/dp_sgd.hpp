#pragma once
// DP-SGD's clipping without one backward per sample. LibTorch has no module
// hooks, so DP-aware layers record their input and their output on a tape
// during the forward pass, and put a gradient hook on the output. One call
// to torch::autograd::grad (with respect to the outputs of the layers whose
// input needs no gradient, so the engine runs every layer's backward but
// computes no parameter gradient) fires each hook with the layer's
// per-sample output gradients G (the loss is a sum of per-sample losses).
// There, from the input activations A and G, the layer adds its per-sample
// squared gradient norms and keeps what the clipped sum will need, and lets
// go of the rest, so activations are freed as the backward pass goes on:
//   direct  ||G_i^T A_i||^2, keeping the per-sample gradients (B d p);
//   ghost   <A_i A_i^T, G_i G_i^T> (T x T Gram matrices, Li et al. 2022),
//           keeping A and G (B T (d + p));
//   fused   per layer, whichever keeps less: direct where d p < T (d + p),
//           else the Gram form; embeddings by their distinct tokens per
//           sample (B T D), never a dense table per sample.
// Once every norm is known, c_i = min(1, C / (||g_i|| + 1e-6)) and each
// layer adds sum_i c_i g_i to its parameters' grads from what it kept,
// without a second backward pass (book-keeping, Bu et al. 2023).
// Layers: Linear (2-D and sequence 3-D inputs), Conv2d (groups 1: the
// per-sample gradients from its own backward kernel with the batch as
// groups, the Gram form via unfold, the clipped sum from its backward kernel
// with scaled output gradients), Embedding, LayerNorm (affine over the last
// dimension). Matrix products go through BLAS: LibTorch on Debian calls the
// system's libblas.so.3, so install OpenBLAS (libopenblas0-openmp), not the
// reference BLAS, or they run about ten times slower.
// Includes LibTorch: only src/torch_*.cpp and src/dp_*.cpp may include it.
// Thread-safety: a tape belongs to one trainer.

#include <string>
#include <vector>

#include <torch/torch.h>

namespace fedcaf::dp {

enum class clip_mode { per_sample, ghost, fused };

enum class layer_kind { linear, conv2d, embedding, layer_norm };

/// What one DP-aware layer saw in one forward pass, and what its gradient
/// left for the clipped sum.
struct layer_record {
  layer_kind kind = layer_kind::linear;
  torch::nn::Module* module = nullptr; ///< holds `weight` and maybe `bias`
  torch::Tensor input;  ///< detached activations (embedding: indices)
  torch::Tensor output; ///< the layer's output, until its gradient came
  bool entry = false;   ///< its input needs no gradient
  bool done = false;    ///< its gradient has been seen
  torch::Tensor grad;   ///< G, where the clipped sum needs it
  /// Per-sample parameter gradients [B, ...] (direct), or an embedding's
  /// rows per distinct (sample, token) with their tokens and samples.
  torch::Tensor per_sample, per_sample_bias, rows_token, rows_sample;
};

/// The records of the forward passes since the last clear().
class tape {
public:
  /// Records a layer's forward pass (when enabled) and hooks its output.
  void record(layer_kind kind, torch::nn::Module* module,
              const torch::Tensor& input, const torch::Tensor& output);
  std::vector<layer_record>& records() { return records_; }
  void clear() { records_.clear(); }
  void enable(bool on) { enabled_ = on; }

  /// Called with record `i`'s output gradient: adds its per-sample squared
  /// norms to `squares` and keeps what clip mode `mode` needs.
  void take_gradient(size_t i, const torch::Tensor& grad);

  clip_mode mode = clip_mode::fused;
  torch::Tensor squares; ///< [B], during clip_and_accumulate

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
/// returns each sample's gradient norm over every recorded layer, and adds
/// to each recorded parameter's grad the sum over samples of its gradient
/// clipped to `max_grad_norm` (no noise). Clears the tape.
torch::Tensor clip_and_accumulate(tape& t, const torch::Tensor& sample_losses,
                                  double max_grad_norm, clip_mode mode);

/// The rest of a DP-SGD step after clip_and_accumulate: adds N(0, std^2)
/// per element to every parameter's grad (a missing grad counts as zero,
/// e.g. after an empty Poisson sample) and divides it by `expected_batch`.
/// Draws from `generator` (none: LibTorch's default generator).
void add_noise_and_average(const std::vector<torch::Tensor>& parameters,
                           double std, double expected_batch,
                           c10::optional<at::Generator> generator);

} // namespace fedcaf::dp
