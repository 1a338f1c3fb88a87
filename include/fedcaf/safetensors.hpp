#pragma once
// safetensors (the Hugging Face format): an 8-byte little-endian header
// length, a JSON header naming each tensor's dtype, shape and data offsets,
// then the tensor bytes. Reading memory-maps the file and hands out views
// into the mapping (zero copy); writing streams tensor by tensor into a
// temporary file that replaces the target only when complete.
// Thread-safety: a safetensors_file is immutable; share it read-only.

#include <functional>
#include <map>
#include <string>

#include "fedcaf/error.hpp"
#include "fedcaf/manifest.hpp"

namespace fedcaf {

/// A read-only, memory-mapped safetensors file. Move-only; unmaps on
/// destruction, which invalidates every view it handed out.
class safetensors_file {
public:
  /// Maps `path` and validates its header: at most 100 MiB and within the
  /// file, JSON, known dtypes, shapes and offsets of non-negative whole
  /// numbers, shapes whose byte size fits 64 bits and matches their offsets,
  /// offsets within the file that tile the data region exactly. Returns an
  /// error naming the file and the problem otherwise (errc::out_of_memory iff
  /// the header could not be held in memory).
  static result<safetensors_file> open(const std::string& path);

  safetensors_file(safetensors_file&& other) noexcept;
  safetensors_file& operator=(safetensors_file&& other) noexcept;
  safetensors_file(const safetensors_file&) = delete;
  ~safetensors_file();

  /// The tensors in file order (ascending data offsets).
  const manifest& layout() const { return layout_; }

  /// Views of the tensors in layout order, pointing into the mapping.
  const_model_view view() const;

  /// The header's "__metadata__" entries.
  const std::map<std::string, std::string>& metadata() const {
    return metadata_;
  }

private:
  safetensors_file() = default;

  manifest layout_;
  std::map<std::string, std::string> metadata_;
  const std::byte* map_ = nullptr;
  size_t map_bytes_ = 0;
  size_t data_offset_ = 0;
};

/// Called after each piece of model bytes [offset, offset + size) (offsets
/// in the concatenation of the tensors) has been written out.
using written_fn = std::function<void(uint64_t offset, uint64_t size)>;

/// Writes the tensors of `model` (laid out as `layout`) to `path` with the
/// given metadata, in layout order and in pieces of at most 64 MiB, calling
/// `written` after each (e.g. to release the pages of a mapped model). The
/// file appears complete or not at all (written to "<path>.tmp", then
/// renamed). Carried tensors (tensor_info::held) are written as the model
/// holds them, rounded back (fedcaf/carried.hpp). Returns an error iff a
/// write fails.
result<void>
write_safetensors(const std::string& path, const manifest& layout,
                  const const_model_view& model,
                  const std::map<std::string, std::string>& metadata = {},
                  const written_fn& written = {});

} // namespace fedcaf
