#include "fedcaf/models.hpp"

#include <cstring>
#include <optional>

#include "fedcaf/carried.hpp"
#include "fedcaf/dummy_trainer.hpp"
#include "fedcaf/llama.hpp"
#include "fedcaf/safetensors.hpp"
#include "fedcaf/trainer.hpp"

namespace fedcaf {

namespace {

/// True iff LibTorch builds the model (the plugin): the CNN, or a
/// TorchScript file (whose `path` is the model, not a safetensors file).
bool built_by_torch(const model_config& cfg) {
  return cfg.model_name == model_kind::cnn ||
         cfg.model_name == model_kind::torchscript;
}

/// True iff model_configs.path is a safetensors file of initial weights.
bool has_weights_file(const model_config& cfg) {
  return !cfg.path.empty() && cfg.model_name != model_kind::torchscript;
}

/// The layout the model's name and sizes describe (ignoring a weights
/// file in `path`).
result<manifest> named_layout(const model_config& cfg) {
  auto type = parse_dtype(cfg.dtype);
  if (cfg.model_name == model_kind::synthetic)
    return synthetic_layout(cfg.num_tensors, cfg.total_bytes, type);
  if (cfg.model_name == model_kind::llama)
    return llama_layout(cfg.preset, type);
  auto cnn = make_initial_model(cfg);
  if (!cnn)
    return cnn.err();
  return cnn->layout;
}

/// The layout `file`'s tensors travel as (fedcaf/carried.hpp), with an
/// error naming the file iff they cannot.
result<manifest> carried_layout_of(const safetensors_file& file,
                                   const std::string& path) {
  auto carried = carry_layout(file.layout());
  if (!carried)
    return error{carried.err().code, path + ": " + carried.err().message};
  return carried;
}

/// Opens model_configs.path and checks it against a CNN's layout.
result<safetensors_file> open_model_file(const model_config& cfg) {
  auto file = safetensors_file::open(cfg.path);
  if (!file)
    return file.err();
  if (cfg.model_name == model_kind::cnn) {
    auto cnn = named_layout(cfg);
    if (!cnn)
      return cnn.err();
    if (!(*cnn == file->layout()))
      return error{errc::manifest_mismatch,
                   cfg.path + ": its tensors are not those of the CNN"};
  }
  return file;
}

} // namespace

dtype parse_dtype(const std::string& name) {
  if (name == "bfloat16")
    return dtype::bfloat16;
  if (name == "float16")
    return dtype::float16;
  return dtype::float32;
}

result<manifest> model_layout(const model_config& cfg) {
  if (!has_weights_file(cfg))
    return named_layout(cfg);
  auto file = open_model_file(cfg);
  if (!file)
    return file.err();
  return carried_layout_of(*file, cfg.path);
}

namespace {

/// Copies `from` into `to` (laid out as `layout`), giving `to`'s pages back
/// as it goes; `held`: `from` is laid out as the model holds its tensors,
/// and carried ones are widened.
result<void> copy_released(const const_model_view& from, const manifest& layout,
                           bool held, byte_buffer& to) {
  size_t at = 0;
  for (size_t i = 0; i < from.tensors.size(); ++i) {
    auto t = from.tensors[i];
    const auto& info = layout.tensors[i];
    if (info.held && held) {
      auto ok = widen(info, t, to.bytes().subspan(at, info.byte_size));
      if (!ok)
        return ok;
    } else {
      std::memcpy(to.data() + at, t.data(), t.size());
    }
    to.release(at, info.byte_size);
    at += info.byte_size;
  }
  return {};
}

} // namespace

result<model_snapshot> initial_model(const model_config& cfg,
                                     const std::string& storage_file) {
  // The source is opened or built once: a file, the CNN, or the seed.
  std::optional<safetensors_file> file;
  std::optional<model_snapshot> cnn;
  model_snapshot s;
  if (has_weights_file(cfg)) {
    auto opened = open_model_file(cfg);
    if (!opened)
      return opened.err();
    file.emplace(std::move(*opened));
    auto carried = carried_layout_of(*file, cfg.path);
    if (!carried)
      return carried.err();
    s.layout = std::move(*carried);
  } else if (built_by_torch(cfg)) {
    auto built = make_initial_model(cfg);
    if (!built)
      return built.err();
    if (storage_file.empty())
      return built; // already on the heap: no copy
    cnn.emplace(std::move(*built));
    s.layout = cnn->layout;
  } else {
    auto layout = named_layout(cfg);
    if (!layout)
      return layout.err();
    s.layout = std::move(*layout);
  }
  auto size = s.layout.total_bytes();
  if (storage_file.empty()) {
    s.bytes = byte_buffer::uninitialized(size);
  } else {
    auto mapped = anonymous_file_buffer(storage_file, size);
    if (!mapped)
      return mapped.err();
    s.bytes = std::move(*mapped);
  }
  if (file) {
    if (auto ok = copy_released(file->view(), s.layout, true, s.bytes); !ok)
      return error{ok.err().code, cfg.path + ": " + ok.err().message};
  } else if (cnn) {
    if (auto ok = copy_released(cnn->view(), s.layout, false, s.bytes); !ok)
      return ok.err();
  } else
    fill_synthetic(s.layout, cfg.seed, s.bytes);
  return s;
}

bool has_evaluation(const model_config& cfg) {
  return cfg.model_name == model_kind::cnn;
}

} // namespace fedcaf
