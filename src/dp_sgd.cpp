#include "dp_sgd.hpp"

#include <set>

namespace fedcaf::dp {

namespace F = torch::nn::functional;

torch::Tensor linear_impl::forward(const torch::Tensor& x) {
  auto y = torch::nn::LinearImpl::forward(x);
  if (tape_)
    tape_->record(layer_kind::linear, this, x, y);
  return y;
}

torch::Tensor conv2d_impl::forward(const torch::Tensor& x) {
  auto y = torch::nn::Conv2dImpl::forward(x);
  if (tape_)
    tape_->record(layer_kind::conv2d, this, x, y);
  return y;
}

torch::Tensor embedding_impl::forward(const torch::Tensor& idx) {
  auto y = torch::nn::EmbeddingImpl::forward(idx);
  if (tape_)
    tape_->record(layer_kind::embedding, this, idx, y);
  return y;
}

torch::Tensor layer_norm_impl::forward(const torch::Tensor& x) {
  auto y = torch::nn::LayerNormImpl::forward(x);
  if (tape_)
    tape_->record(layer_kind::layer_norm, this, x, y);
  return y;
}

namespace {

bool is_dp_layer(torch::nn::Module& m) {
  return dynamic_cast<linear_impl*>(&m) || dynamic_cast<conv2d_impl*>(&m) ||
         dynamic_cast<embedding_impl*>(&m) ||
         dynamic_cast<layer_norm_impl*>(&m);
}

torch::Tensor param(torch::nn::Module* m, const char* name) {
  auto* p = m->named_parameters(false).find(name);
  return p ? *p : torch::Tensor{};
}

conv2d_impl& conv_of(const layer_record& r) {
  return *dynamic_cast<conv2d_impl*>(r.module);
}

/// A Linear or Conv2d layer's activations and output gradients as
/// [B, T, d] and [B, T, p] (conv2d through unfold).
struct as_matrices {
  torch::Tensor a, g;
};

as_matrices matrices_of(const layer_record& r, const torch::Tensor& grad) {
  auto b = grad.size(0);
  if (r.kind == layer_kind::linear) {
    auto d = r.input.size(-1), p = grad.size(-1);
    return {r.input.reshape({b, -1, d}), grad.reshape({b, -1, p})};
  }
  const auto& o = conv_of(r).options;
  auto unf = F::unfold(
      r.input, F::UnfoldFuncOptions(o.kernel_size())
                   .dilation(o.dilation())
                   .padding(c10::get<torch::ExpandingArray<2>>(o.padding()))
                   .stride(o.stride()));
  return {unf.transpose(1, 2), grad.flatten(2).transpose(1, 2)};
}

/// The weight gradient of a convolution with output gradient `grad` (with
/// `groups` groups over `input`, shaped like `weight`), by the convolution's
/// own backward kernel.
torch::Tensor conv_weight_grad(const layer_record& r,
                               const torch::Tensor& input,
                               const torch::Tensor& grad,
                               const torch::Tensor& weight, int64_t groups) {
  const auto& o = conv_of(r).options;
  auto padding = c10::get<torch::ExpandingArray<2>>(o.padding());
  return std::get<1>(at::convolution_backward(
      grad, input, weight, c10::nullopt, *o.stride(), *padding, *o.dilation(),
      false, {0, 0}, groups, {false, true, false}));
}

/// Whether the Gram form is used for a layer with T rows of d inputs and p
/// outputs per sample: always for ghost, never for per_sample, and for fused
/// where it keeps less than the d x p gradient.
bool use_gram(clip_mode mode, int64_t t, int64_t d, int64_t p) {
  return mode == clip_mode::ghost ||
         (mode == clip_mode::fused && t * (d + p) < d * p);
}

torch::Tensor squares_of(const torch::Tensor& per_sample) {
  return per_sample.reshape({per_sample.size(0), -1}).pow(2).sum(1);
}

/// Linear and Conv2d: the norms, keeping per-sample gradients or (Gram) A
/// and G.
torch::Tensor take_weighted(layer_record& r, const torch::Tensor& grad,
                            clip_mode mode) {
  auto b = grad.size(0);
  auto weight = param(r.module, "weight");
  auto p = weight.size(0), d = weight.numel() / p;
  auto t = grad.numel() / (b * p);
  torch::Tensor squares;
  if (use_gram(mode, t, d, p)) {
    auto m = matrices_of(r, grad);
    squares = (torch::bmm(m.a, m.a.transpose(1, 2)) *
               torch::bmm(m.g, m.g.transpose(1, 2)))
                  .sum(torch::IntArrayRef{1, 2});
    r.grad = grad;
  } else {
    if (r.kind == layer_kind::linear) {
      auto m = matrices_of(r, grad);
      r.per_sample = torch::bmm(m.g.transpose(1, 2), m.a);
    } else { // the batch as groups of one convolution
      auto in = r.input.reshape({1, -1, r.input.size(2), r.input.size(3)});
      auto g = grad.reshape({1, -1, grad.size(2), grad.size(3)});
      r.per_sample = conv_weight_grad(r, in, g, weight.repeat({b, 1, 1, 1}), b)
                         .view({b, p, -1});
    }
    squares = squares_of(r.per_sample);
    r.input.reset();
  }
  if (param(r.module, "bias").defined()) {
    r.per_sample_bias = r.kind == layer_kind::linear
                            ? grad.reshape({b, -1, p}).sum(1)
                            : grad.sum(torch::IntArrayRef{2, 3});
    squares = squares + squares_of(r.per_sample_bias);
  }
  return squares;
}

/// Embedding: per_sample keeps a dense [B, num, D] table per sample; ghost
/// the Gram form over equal tokens, keeping the indices and G; fused the
/// summed rows of each distinct (sample, token).
torch::Tensor take_embedding(layer_record& r, const torch::Tensor& grad,
                             clip_mode mode) {
  auto b = grad.size(0), dim = grad.size(-1);
  auto num = dynamic_cast<embedding_impl*>(r.module)->weight.size(0);
  auto idx = r.input.reshape({b, -1});
  auto t = idx.size(1);
  auto g = grad.reshape({b, t, dim});
  if (mode == clip_mode::ghost) {
    auto same = (idx.unsqueeze(2) == idx.unsqueeze(1)).to(g.dtype());
    r.grad = grad;
    return (same * torch::bmm(g, g.transpose(1, 2)))
        .sum(torch::IntArrayRef{1, 2});
  }
  if (mode == clip_mode::per_sample) {
    r.per_sample =
        torch::zeros({b, num, dim}, g.options())
            .scatter_add_(1, idx.unsqueeze(2).expand({b, t, dim}), g);
    r.input.reset();
    return squares_of(r.per_sample);
  }
  auto sample = torch::arange(b, idx.options()).unsqueeze(1).expand({b, t});
  auto key = (sample * num + idx).reshape({-1});
  auto [keys, inverse] = torch::_unique(key, /*sorted=*/false,
                                        /*return_inverse=*/true);
  r.per_sample = torch::zeros({keys.size(0), dim}, g.options())
                     .index_add_(0, inverse, g.reshape({-1, dim}));
  r.rows_token = keys.remainder(num);
  r.rows_sample = keys.div(num, "floor");
  r.input.reset();
  return torch::zeros({b}, g.options())
      .index_add_(0, r.rows_sample, r.per_sample.pow(2).sum(1));
}

/// LayerNorm's normalised input x-hat.
torch::Tensor normalised(const layer_record& r) {
  auto* ln = dynamic_cast<layer_norm_impl*>(r.module);
  auto x = r.input;
  auto mean = x.mean(-1, true);
  auto var = x.var({-1}, false, true);
  return (x - mean) / torch::sqrt(var + ln->options.eps());
}

/// LayerNorm: keeps the per-sample gradients of weight and bias ([B, dim]).
torch::Tensor take_layer_norm(layer_record& r, const torch::Tensor& grad) {
  auto b = grad.size(0), dim = grad.size(-1);
  r.per_sample = (grad * normalised(r)).reshape({b, -1, dim}).sum(1);
  r.per_sample_bias = grad.reshape({b, -1, dim}).sum(1);
  r.input.reset();
  return squares_of(r.per_sample) + squares_of(r.per_sample_bias);
}

void add_grad(torch::Tensor p, const torch::Tensor& g) {
  if (!p.grad().defined())
    p.mutable_grad() = g.detach().clone();
  else
    p.mutable_grad().add_(g.detach());
}

/// sum_i c_i x_i of per-sample tensors x [B, ...], shaped like `like`.
torch::Tensor weighted(const torch::Tensor& x, const torch::Tensor& c,
                       const torch::Tensor& like) {
  return x.reshape({x.size(0), -1}).t().mv(c).view(like.sizes());
}

/// Adds sum_i c_i g_i of the layer's parameters to their grads, from what
/// take_gradient kept.
void accumulate(const layer_record& r, const torch::Tensor& c) {
  auto weight = param(r.module, "weight");
  auto bias = param(r.module, "bias");
  if (bias.defined() && r.per_sample_bias.defined())
    add_grad(bias, weighted(r.per_sample_bias, c, bias));
  if (r.kind == layer_kind::embedding && r.rows_token.defined()) {
    add_grad(weight,
             torch::zeros_like(weight).index_add_(
                 0, r.rows_token,
                 r.per_sample * c.index_select(0, r.rows_sample).unsqueeze(1)));
    return;
  }
  if (r.per_sample.defined()) {
    add_grad(weight, weighted(r.per_sample, c, weight));
    return;
  }
  auto b = r.grad.size(0);
  switch (r.kind) { // the Gram form kept A and G
  case layer_kind::linear: {
    auto p = r.grad.size(-1), d = r.input.size(-1);
    auto cg = r.grad.reshape({b, -1, p}) * c.view({b, 1, 1});
    add_grad(weight,
             torch::mm(cg.reshape({-1, p}).t(), r.input.reshape({-1, d})));
    return;
  }
  case layer_kind::conv2d:
    add_grad(weight, conv_weight_grad(r, r.input, r.grad * c.view({b, 1, 1, 1}),
                                      weight, 1));
    return;
  case layer_kind::embedding: {
    auto dim = r.grad.size(-1);
    auto cg =
        (r.grad.reshape({b, -1, dim}) * c.view({b, 1, 1})).reshape({-1, dim});
    add_grad(weight, torch::zeros_like(weight).index_add_(
                         0, r.input.reshape({-1}), cg));
    return;
  }
  case layer_kind::layer_norm:
    return; // always kept per sample
  }
}

} // namespace

void tape::record(layer_kind kind, torch::nn::Module* module,
                  const torch::Tensor& input, const torch::Tensor& output) {
  if (!enabled_)
    return;
  auto i = records_.size();
  layer_record r;
  r.kind = kind;
  r.module = module;
  r.input = input.detach();
  r.output = output;
  r.entry = !input.requires_grad();
  records_.push_back(std::move(r));
  if (output.requires_grad())
    output.register_hook(
        [this, i](const torch::Tensor& grad) { take_gradient(i, grad); });
}

void tape::take_gradient(size_t i, const torch::Tensor& grad) {
  if (i >= records_.size() || records_[i].done || !squares.defined())
    return; // a backward pass outside clip_and_accumulate, or seen already
  torch::NoGradGuard no_grad;
  auto& r = records_[i];
  r.done = true;
  r.output.reset();
  auto g = grad.detach();
  switch (r.kind) {
  case layer_kind::linear:
  case layer_kind::conv2d:
    squares += take_weighted(r, g, mode);
    return;
  case layer_kind::embedding:
    squares += take_embedding(r, g, mode);
    return;
  case layer_kind::layer_norm:
    squares += take_layer_norm(r, g);
    return;
  }
}

std::string uncovered_parameter(torch::nn::Module& model) {
  std::set<const void*> covered;
  auto cover = [&covered](torch::nn::Module& m) {
    if (is_dp_layer(m))
      for (const auto& p : m.parameters(false))
        covered.insert(p.unsafeGetTensorImpl());
  };
  cover(model);
  for (const auto& m : model.modules(/*include_self=*/false))
    cover(*m);
  for (const auto& p : model.named_parameters(true))
    if (p.value().requires_grad() &&
        !covered.count(p.value().unsafeGetTensorImpl()))
      return p.key();
  return "";
}

void add_noise_and_average(const std::vector<torch::Tensor>& parameters,
                           double std, double expected_batch,
                           c10::optional<at::Generator> generator) {
  torch::NoGradGuard no_grad;
  for (auto p : parameters) {
    if (!p.grad().defined())
      p.mutable_grad() = torch::zeros_like(p);
    auto& g = p.mutable_grad();
    if (std > 0)
      g.add_(torch::randn(p.sizes(), generator, p.options()), std);
    g.div_(expected_batch);
  }
}

torch::Tensor clip_and_accumulate(tape& t, const torch::Tensor& sample_losses,
                                  double max_grad_norm, clip_mode mode) {
  auto& records = t.records();
  // Differentiating with respect to the entry layers' outputs runs every
  // recorded layer's backward (firing its hook) and no parameter's.
  std::vector<size_t> targets;
  for (size_t i = 0; i < records.size(); ++i)
    if (records[i].entry && records[i].output.requires_grad())
      targets.push_back(i);
  if (targets.empty()) // the input itself needs gradients: take them all
    for (size_t i = 0; i < records.size(); ++i)
      if (records[i].output.requires_grad())
        targets.push_back(i);
  std::vector<torch::Tensor> outputs;
  for (auto i : targets)
    outputs.push_back(records[i].output);
  t.mode = mode;
  t.squares = torch::zeros({sample_losses.size(0)}, sample_losses.options());
  auto grads = torch::autograd::grad({sample_losses.sum()}, outputs, {},
                                     /*retain_graph=*/false,
                                     /*create_graph=*/false,
                                     /*allow_unused=*/true);
  for (size_t k = 0; k < targets.size(); ++k)
    if (grads[k].defined())
      t.take_gradient(targets[k], grads[k]);
  grads.clear();
  torch::NoGradGuard no_grad;
  auto norms = t.squares.sqrt();
  t.squares.reset();
  auto c = (max_grad_norm / (norms + 1e-6)).clamp_max(1.0);
  for (auto& r : records)
    if (r.done)
      accumulate(r, c);
  t.clear();
  return norms;
}

} // namespace fedcaf::dp
