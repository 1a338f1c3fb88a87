#include "fedcaf/llama.hpp"

#include <algorithm>

namespace fedcaf {

namespace {

/// The numbers of a Hugging Face LlamaConfig that decide tensor shapes.
struct llama_shape {
  const char* name;
  uint64_t hidden;
  uint64_t intermediate;
  uint32_t layers;
  uint64_t heads;
  uint64_t kv_heads;
  uint64_t vocab;
  bool tied_embeddings;
};

// From the checkpoints' config.json files.
constexpr llama_shape shapes[] = {
    {"llama-3.2-1b", 2048, 8192, 16, 32, 8, 128256, true},
    {"llama-3.1-8b", 4096, 14336, 32, 32, 8, 128256, false},
    {"llama-tiny", 64, 128, 2, 4, 2, 256, false},
};

} // namespace

const std::vector<std::string>& llama_presets() {
  static const std::vector<std::string> names{shapes[0].name, shapes[1].name,
                                              shapes[2].name};
  return names;
}

result<manifest> llama_layout(const std::string& preset, dtype type) {
  const auto* s = std::find_if(std::begin(shapes), std::end(shapes),
                               [&](const auto& x) { return preset == x.name; });
  if (s == std::end(shapes))
    return error{errc::bad_config, "unknown llama preset '" + preset + "'"};
  auto h = s->hidden, kv = s->hidden / s->heads * s->kv_heads;
  manifest m;
  auto add = [&](std::string name, std::vector<uint64_t> shape) {
    m.tensors.push_back(make_tensor_info(std::move(name), type, shape));
  };
  add("model.embed_tokens.weight", {s->vocab, h});
  for (uint32_t i = 0; i < s->layers; ++i) {
    auto p = "model.layers." + std::to_string(i) + ".";
    add(p + "input_layernorm.weight", {h});
    add(p + "mlp.down_proj.weight", {h, s->intermediate});
    add(p + "mlp.gate_proj.weight", {s->intermediate, h});
    add(p + "mlp.up_proj.weight", {s->intermediate, h});
    add(p + "post_attention_layernorm.weight", {h});
    add(p + "self_attn.k_proj.weight", {kv, h});
    add(p + "self_attn.o_proj.weight", {h, h});
    add(p + "self_attn.q_proj.weight", {h, h});
    add(p + "self_attn.v_proj.weight", {kv, h});
  }
  add("model.norm.weight", {h});
  if (!s->tied_embeddings)
    add("lm_head.weight", {s->vocab, h});
  std::sort(m.tensors.begin(), m.tensors.end(),
            [](const tensor_info& a, const tensor_info& b) {
              return a.name < b.name;
            });
  return m;
}

} // namespace fedcaf
