#pragma once
// Llama-shaped models without downloads: the tensor names and shapes of
// Hugging Face Llama checkpoints, to be filled from a seed.

#include <string>
#include <vector>

#include "fedcaf/error.hpp"
#include "fedcaf/manifest.hpp"

namespace fedcaf {

/// The preset names: "llama-3.2-1b", "llama-3.1-8b", "llama-tiny".
const std::vector<std::string>& llama_presets();

/// Returns the tensors of `preset` in dtype `type`, in the order safetensors
/// files store them (names sorted), with Hugging Face's names and shapes:
/// model.embed_tokens.weight, model.layers.<i>.{input_layernorm,
/// post_attention_layernorm}.weight, model.layers.<i>.self_attn.{q,k,v,o}_proj
/// .weight, model.layers.<i>.mlp.{gate,up,down}_proj.weight, model.norm
/// .weight, and lm_head.weight unless the embeddings are tied. Returns an
/// error iff the preset is unknown.
result<manifest> llama_layout(const std::string& preset, dtype type);

} // namespace fedcaf
