// `fedcaf dp-profile`'s measurement: a counting CPU allocator (LibTorch's
// max_memory_allocated exists for GPUs only) and a transformer built from
// DP-aware layers.

#include "fedcaf/dp_profile.hpp"

#include <chrono>
#include <cmath>
#include <mutex>
#include <optional>
#include <unordered_map>

#include <c10/core/CPUAllocator.h>
#include <torch/torch.h>

#include "dp_sgd.hpp"

namespace fedcaf {

namespace {

/// Wraps the default CPU allocator and counts the bytes alive and their
/// high-water mark since the last reset. Its data pointers are their own
/// contexts, as LibTorch's raw_allocate requires, so sizes are kept by
/// address. One per process (the deleter is a plain function).
class counting_allocator final : public c10::Allocator {
public:
  static counting_allocator& install() {
    c10::SetCPUAllocator(&instance(), /*priority=*/100);
    return instance();
  }

  c10::DataPtr allocate(size_t n) const override {
    auto inner = base_->allocate(n);
    void* data = inner.get();
    if (inner.get_context() != data)
      throw std::logic_error{"the CPU allocator's contexts are not its data"};
    inner.release_context(); // freed by release() from now on
    std::lock_guard lock{mutex_};
    sizes_[data] = n;
    alive_ += n;
    peak_ = std::max(peak_, alive_);
    return {data, data, &release, inner.device()};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &release; }

  /// The high-water mark starts again from what is alive now.
  void reset_peak() {
    std::lock_guard lock{mutex_};
    peak_ = alive_;
  }

  size_t peak() const {
    std::lock_guard lock{mutex_};
    return peak_;
  }

private:
  explicit counting_allocator(c10::Allocator* base)
      : base_(base), base_deleter_(base->raw_deleter()) {}

  static counting_allocator& instance() {
    static counting_allocator self{c10::GetDefaultCPUAllocator()};
    return self;
  }

  static void release(void* data) {
    auto& self = instance();
    {
      std::lock_guard lock{self.mutex_};
      auto it = self.sizes_.find(data);
      if (it != self.sizes_.end()) {
        self.alive_ -= it->second;
        self.sizes_.erase(it);
      }
    }
    self.base_deleter_(data);
  }

  c10::Allocator* base_;
  c10::DeleterFnPtr base_deleter_;
  mutable std::mutex mutex_;
  mutable std::unordered_map<void*, size_t> sizes_;
  mutable size_t alive_ = 0;
  mutable size_t peak_ = 0;
};

/// Multi-head self-attention from four DP-aware Linear layers.
struct attention_impl : torch::nn::Module {
  attention_impl(int64_t d, int64_t heads, dp::tape* t)
      : heads_(heads), q(d, d, t), k(d, d, t), v(d, d, t), out(d, d, t) {
    register_module("q", q);
    register_module("k", k);
    register_module("v", v);
    register_module("out", out);
  }

  torch::Tensor forward(const torch::Tensor& x) {
    auto b = x.size(0), len = x.size(1), d = x.size(2);
    auto split = [&](const torch::Tensor& y) {
      return y.view({b, len, heads_, d / heads_}).transpose(1, 2);
    };
    auto qh = split(q(x)), kh = split(k(x)), vh = split(v(x));
    auto scores = torch::matmul(qh, kh.transpose(-2, -1)) /
                  std::sqrt(static_cast<double>(d / heads_));
    auto mixed = torch::matmul(torch::softmax(scores, -1), vh);
    return out(mixed.transpose(1, 2).reshape({b, len, d}));
  }

  int64_t heads_;
  dp::linear q, k, v, out;
};
TORCH_MODULE_IMPL(attention, attention_impl);

/// A pre-LayerNorm transformer block.
struct block_impl : torch::nn::Module {
  block_impl(const dp_profile_config& c, dp::tape* t)
      : ln1(c.d_model, t), attn(c.d_model, c.num_heads, t), ln2(c.d_model, t),
        ff1(c.d_model, c.d_ff, t), ff2(c.d_ff, c.d_model, t) {
    register_module("ln1", ln1);
    register_module("attn", attn);
    register_module("ln2", ln2);
    register_module("ff1", ff1);
    register_module("ff2", ff2);
  }

  torch::Tensor forward(torch::Tensor h) {
    h = h + attn(ln1(h));
    return h + ff2(torch::gelu(ff1(ln2(h))));
  }

  dp::layer_norm ln1;
  attention attn;
  dp::layer_norm ln2;
  dp::linear ff1, ff2;
};
TORCH_MODULE_IMPL(block, block_impl);

/// Tokens [B, T] -> logits [B, num_labels].
struct classifier_impl : torch::nn::Module {
  classifier_impl(const dp_profile_config& c, int64_t max_len, dp::tape* t)
      : tokens(c.vocab_size, c.d_model, t), positions(max_len, c.d_model, t),
        final_norm(c.d_model, t), head(c.d_model, c.num_labels, t) {
    register_module("tokens", tokens);
    register_module("positions", positions);
    for (uint32_t i = 0; i < c.num_layers; ++i)
      blocks.push_back(
          register_module("block" + std::to_string(i), block(c, t)));
    register_module("final_norm", final_norm);
    register_module("head", head);
  }

  torch::Tensor forward(const torch::Tensor& idx) {
    auto len = idx.size(1);
    auto pos = torch::arange(len, idx.options()).expand_as(idx);
    auto h = tokens(idx) + positions(pos);
    for (auto& b : blocks)
      h = b(h);
    return head(final_norm(h).mean(1));
  }

  dp::embedding tokens, positions;
  std::vector<block> blocks;
  dp::layer_norm final_norm;
  dp::linear head;
};
TORCH_MODULE_IMPL(classifier, classifier_impl);

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now() - start)
      .count();
}

} // namespace

result<dp_profile_result> profile_dp_step(const dp_profile_config& cfg,
                                          const std::string& mode,
                                          uint32_t seq_length) {
  std::optional<dp::clip_mode> clip;
  if (mode == "per_sample")
    clip = dp::clip_mode::per_sample;
  else if (mode == "ghost")
    clip = dp::clip_mode::ghost;
  else if (mode == "fused")
    clip = dp::clip_mode::fused;
  else if (mode != "none")
    return error{errc::bad_config, "dp-profile: unknown mode '" + mode + "'"};
  auto& counter = counting_allocator::install();
  try {
    if (cfg.num_threads > 0)
      at::set_num_threads(static_cast<int>(cfg.num_threads));
    torch::manual_seed(cfg.seed);
    dp::tape tape;
    classifier net{cfg, static_cast<int64_t>(seq_length),
                   clip ? &tape : nullptr};
    if (clip)
      if (auto name = dp::uncovered_parameter(*net); !name.empty())
        return error{errc::internal,
                     "dp-profile: parameter '" + name + "' is not covered"};
    torch::optim::SGD sgd{net->parameters(),
                          torch::optim::SGDOptions(cfg.learning_rate)};
    auto b = static_cast<int64_t>(cfg.batch_size);
    auto x = torch::randint(cfg.vocab_size, {b, seq_length}, torch::kInt64);
    auto y = torch::randint(cfg.num_labels, {b}, torch::kInt64);
    namespace F = torch::nn::functional;
    const double std = cfg.noise_multiplier * cfg.max_grad_norm;
    dp_profile_result r;
    r.mode = mode;
    r.seq_length = seq_length;
    r.batch_size = cfg.batch_size;
    for (const auto& p : net->parameters())
      r.parameters += p.numel();
    double total_ms = 0;
    r.min_time_ms = 1e300;
    for (uint32_t it = 0; it < cfg.warmup_iter + cfg.num_iter; ++it) {
      if (it == cfg.warmup_iter)
        counter.reset_peak();
      auto start = std::chrono::steady_clock::now();
      sgd.zero_grad();
      auto logits = net(x);
      if (!clip) {
        auto loss = F::cross_entropy(logits, y);
        loss.backward();
        r.final_loss = loss.item<double>();
      } else {
        auto losses = F::cross_entropy(
            logits, y, F::CrossEntropyFuncOptions().reduction(torch::kNone));
        r.final_loss = losses.mean().item<double>();
        dp::clip_and_accumulate(tape, losses, cfg.max_grad_norm, *clip);
        dp::add_noise_and_average(net->parameters(), std,
                                  static_cast<double>(b), c10::nullopt);
      }
      sgd.step();
      auto ms = ms_since(start);
      if (it >= cfg.warmup_iter) {
        total_ms += ms;
        r.min_time_ms = std::min(r.min_time_ms, ms);
      }
    }
    r.avg_time_ms = total_ms / cfg.num_iter;
    r.peak_memory_mb = static_cast<double>(counter.peak()) / (1 << 20);
    return r;
  } catch (const std::exception& e) {
    return error{errc::internal, "dp-profile (" + mode + ", length " +
                                     std::to_string(seq_length) +
                                     "): " + e.what()};
  }
}

} // namespace fedcaf
