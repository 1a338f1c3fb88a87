#include "dp_sgd.hpp"

#include <set>

namespace fedcaf::dp {

namespace F = torch::nn::functional;

torch::Tensor linear_impl::forward(const torch::Tensor& x) {
  auto y = torch::nn::LinearImpl::forward(x);
  if (tape_)
    tape_->record({layer_kind::linear, this, x.detach(), y});
  return y;
}

torch::Tensor conv2d_impl::forward(const torch::Tensor& x) {
  auto y = torch::nn::Conv2dImpl::forward(x);
  if (tape_)
    tape_->record({layer_kind::conv2d, this, x.detach(), y});
  return y;
}

torch::Tensor embedding_impl::forward(const torch::Tensor& idx) {
  auto y = torch::nn::EmbeddingImpl::forward(idx);
  if (tape_)
    tape_->record({layer_kind::embedding, this, idx, y});
  return y;
}

torch::Tensor layer_norm_impl::forward(const torch::Tensor& x) {
  auto y = torch::nn::LayerNormImpl::forward(x);
  if (tape_)
    tape_->record({layer_kind::layer_norm, this, x.detach(), y});
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

/// A layer's activations and output gradients as [B, T, d] and [B, T, p]
/// (linear and conv2d), with the shape the weight gradient takes.
struct as_matrices {
  torch::Tensor a, g;
};

as_matrices matrices_of(const layer_record& r, const torch::Tensor& grad) {
  auto b = grad.size(0);
  if (r.kind == layer_kind::linear) {
    auto d = r.input.size(-1), p = grad.size(-1);
    return {r.input.reshape({b, -1, d}), grad.reshape({b, -1, p})};
  }
  auto* conv = dynamic_cast<conv2d_impl*>(r.module);
  const auto& o = conv->options;
  auto unf = F::unfold(
      r.input, F::UnfoldFuncOptions(o.kernel_size())
                   .dilation(o.dilation())
                   .padding(c10::get<torch::ExpandingArray<2>>(o.padding()))
                   .stride(o.stride()));
  return {unf.transpose(1, 2), grad.flatten(2).transpose(1, 2)};
}

/// Per-sample squared norm of the weight gradient G_i^T A_i.
torch::Tensor weight_norms(const torch::Tensor& a, const torch::Tensor& g,
                           clip_mode mode) {
  auto t = a.size(1), d = a.size(2), p = g.size(2);
  bool gram = mode == clip_mode::ghost ||
              (mode == clip_mode::fused && t * (d + p) < d * p);
  if (gram)
    return (torch::bmm(a, a.transpose(1, 2)) * torch::bmm(g, g.transpose(1, 2)))
        .sum(torch::IntArrayRef{1, 2});
  return torch::einsum("btp,btd->bpd", {g, a})
      .pow(2)
      .sum(torch::IntArrayRef{1, 2});
}

/// LayerNorm's normalised input x-hat.
torch::Tensor normalised(const layer_record& r) {
  auto* ln = dynamic_cast<layer_norm_impl*>(r.module);
  auto x = r.input;
  auto mean = x.mean(-1, true);
  auto var = x.var({-1}, false, true);
  return (x - mean) / torch::sqrt(var + ln->options.eps());
}

/// Per-sample gradients of an embedding table [B, num, D]: only for the
/// per_sample mode and where it is cheaper than the Gram form.
torch::Tensor embedding_per_sample(const layer_record& r,
                                   const torch::Tensor& g) {
  auto* emb = dynamic_cast<embedding_impl*>(r.module);
  auto b = g.size(0), dim = g.size(-1);
  auto num = emb->weight.size(0);
  auto idx = r.input.reshape({b, -1});
  auto out = torch::zeros({b, num, dim}, g.options());
  return out.scatter_add_(1, idx.unsqueeze(2).expand({b, idx.size(1), dim}),
                          g.reshape({b, -1, dim}));
}

torch::Tensor squared_norms(const layer_record& r, const torch::Tensor& g,
                            clip_mode mode) {
  auto b = g.size(0);
  switch (r.kind) {
  case layer_kind::linear:
  case layer_kind::conv2d: {
    auto m = matrices_of(r, g);
    auto n = weight_norms(m.a, m.g, mode);
    if (param(r.module, "bias").defined())
      n = n + m.g.sum(1).pow(2).sum(1);
    return n;
  }
  case layer_kind::embedding: {
    auto num = dynamic_cast<embedding_impl*>(r.module)->weight.size(0);
    auto idx = r.input.reshape({b, -1});
    auto t = idx.size(1);
    bool gram =
        mode == clip_mode::ghost || (mode == clip_mode::fused && t * t < num);
    if (!gram)
      return embedding_per_sample(r, g).pow(2).sum(torch::IntArrayRef{1, 2});
    auto gg = g.reshape({b, t, -1});
    auto same = (idx.unsqueeze(2) == idx.unsqueeze(1)).to(g.dtype());
    return (same * torch::bmm(gg, gg.transpose(1, 2)))
        .sum(torch::IntArrayRef{1, 2});
  }
  case layer_kind::layer_norm: {
    auto dim = g.size(-1);
    auto gw = (g * normalised(r)).reshape({b, -1, dim}).sum(1);
    auto gb = g.reshape({b, -1, dim}).sum(1);
    return gw.pow(2).sum(1) + gb.pow(2).sum(1);
  }
  }
  return {};
}

void add_grad(torch::Tensor p, const torch::Tensor& g) {
  if (!p.grad().defined())
    p.mutable_grad() = g.detach().clone();
  else
    p.mutable_grad().add_(g.detach());
}

/// Adds sum_i c_i g_i of the layer's parameters to their grads.
void accumulate(const layer_record& r, const torch::Tensor& g,
                const torch::Tensor& c) {
  auto b = g.size(0);
  auto weight = param(r.module, "weight");
  auto bias = param(r.module, "bias");
  switch (r.kind) {
  case layer_kind::linear:
  case layer_kind::conv2d: {
    auto m = matrices_of(r, g);
    auto cg = m.g * c.view({b, 1, 1});
    add_grad(weight,
             torch::einsum("btp,btd->pd", {cg, m.a}).reshape(weight.sizes()));
    if (bias.defined())
      add_grad(bias, cg.sum(torch::IntArrayRef{0, 1}));
    return;
  }
  case layer_kind::embedding: {
    auto dim = g.size(-1);
    auto cg = (g.reshape({b, -1, dim}) * c.view({b, 1, 1})).reshape({-1, dim});
    add_grad(weight, torch::zeros_like(weight).index_add_(
                         0, r.input.reshape({-1}), cg));
    return;
  }
  case layer_kind::layer_norm: {
    auto dim = g.size(-1);
    auto scaled = g.reshape({b, -1, dim}) * c.view({b, 1, 1});
    auto xh = normalised(r).reshape({b, -1, dim});
    add_grad(weight, (scaled * xh).sum(torch::IntArrayRef{0, 1}));
    add_grad(bias, scaled.sum(torch::IntArrayRef{0, 1}));
    return;
  }
  }
}

} // namespace

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

torch::Tensor clip_and_accumulate(tape& t, const torch::Tensor& sample_losses,
                                  double max_grad_norm, clip_mode mode) {
  auto& records = t.records();
  std::vector<torch::Tensor> outputs;
  for (const auto& r : records)
    outputs.push_back(r.output);
  auto grads = torch::autograd::grad({sample_losses.sum()}, outputs, {},
                                     /*retain_graph=*/false,
                                     /*create_graph=*/false,
                                     /*allow_unused=*/true);
  torch::NoGradGuard no_grad;
  auto b = sample_losses.size(0);
  auto squares = torch::zeros({b}, sample_losses.options());
  for (size_t i = 0; i < records.size(); ++i)
    if (grads[i].defined())
      squares += squared_norms(records[i], grads[i], mode);
  auto norms = squares.sqrt();
  auto c = (max_grad_norm / (norms + 1e-6)).clamp_max(1.0);
  for (size_t i = 0; i < records.size(); ++i)
    if (grads[i].defined())
      accumulate(records[i], grads[i], c);
  t.clear();
  return norms;
}

} // namespace fedcaf::dp
