#pragma once
// A model's layout: the ordered list of its tensors. Value types only.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fedcaf/error.hpp"

namespace fedcaf {

/// Element types a tensor may have on the wire.
enum class dtype : uint8_t {
  float32,
  float16,
  bfloat16,
  float64,
  int64,
  int32,
  uint8,
  int16,
  int8,
  boolean,
};

/// Returns the size of one element in bytes.
size_t dtype_bytes(dtype t);

/// Returns the safetensors spelling, e.g. "F32", "BF16".
std::string_view dtype_name(dtype t);

/// Returns the dtype for a safetensors spelling, or an error iff the
/// spelling is unknown.
result<dtype> dtype_from_name(std::string_view name);

/// One tensor of a model: its name, element type, shape and size in bytes.
struct tensor_info {
  std::string name;
  dtype type = dtype::float32; ///< as it travels and is averaged
  std::vector<uint64_t> shape;
  uint64_t byte_size = 0;
  /// Set iff the model holds this tensor as an integer or bool dtype and it
  /// travels, and is averaged, in `type`, the model's floating dtype
  /// (fedcaf/carried.hpp): the dtype the model holds it in.
  std::optional<dtype> held;

  friend bool operator==(const tensor_info&, const tensor_info&) = default;
};

/// The ordered tensors of a model. Chunks are cut from their concatenation.
struct manifest {
  std::vector<tensor_info> tensors;

  /// Returns the sum of all tensors' byte sizes.
  uint64_t total_bytes() const;

  friend bool operator==(const manifest&, const manifest&) = default;
};

/// Returns a manifest whose byte sizes follow from shape and dtype.
tensor_info make_tensor_info(std::string name, dtype type,
                             std::vector<uint64_t> shape);

/// The most tensors a model may have (config, safetensors file, or a
/// manifest from a peer), checked before anything is allocated per tensor.
/// Llama 3.1 8B has 291.
inline constexpr uint64_t max_model_tensors = 1 << 16;

/// Returns ok iff it has at most max_model_tensors tensors, every tensor has
/// a name, a unique one, and a byte size equal to the product of its shape
/// times its element size.
result<void> validate(const manifest& m);

/// Returns a 64-bit digest of names, dtypes and shapes, in order. Two
/// manifests with equal digests describe the same layout (with overwhelming
/// probability).
uint64_t digest(const manifest& m);

/// Returns ok iff `ours` and `theirs` describe the same layout; otherwise
/// an error (manifest_mismatch) naming the first tensor that differs and
/// both its shapes and dtypes, or the tensor one side lacks. `theirs_name`
/// says whose `theirs` is ("the server's").
result<void> compare_layouts(const manifest& ours, const manifest& theirs,
                             std::string_view theirs_name);

/// Returns "[2, 3]" for shape {2, 3}.
std::string shape_string(const std::vector<uint64_t>& shape);

/// Mutable memory of a model, one span per tensor in manifest order.
struct model_view {
  std::vector<std::span<std::byte>> tensors;
};

/// Read-only memory of a model, one span per tensor in manifest order.
struct const_model_view {
  std::vector<std::span<const std::byte>> tensors;
};

/// Returns views of the tensors of `m` laid out back to back in `bytes`.
/// REQUIRES: bytes.size() == m.total_bytes().
model_view split_contiguous(const manifest& m, std::span<std::byte> bytes);
const_model_view split_contiguous(const manifest& m,
                                  std::span<const std::byte> bytes);

} // namespace fedcaf
