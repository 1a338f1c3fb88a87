#pragma once
// Labelled samples as tensors in memory: what the LibTorch trainer learns
// from. Read from .npy or safetensors files (data_configs.dataset_name:
// tensors) or made from Fashion-MNIST's IDX files. Value types only; a
// tensor_set is shared read-only between the clients of a process.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fedcaf/config/client_sections.hpp"
#include "fedcaf/error.hpp"
#include "fedcaf/fashion_mnist.hpp"
#include "fedcaf/manifest.hpp"

namespace fedcaf {

/// Fashion-MNIST's pixel mean and standard deviation, scaled to [0, 1].
constexpr double fashion_mnist_mean = 0.2860;
constexpr double fashion_mnist_stddev = 0.3530;

/// One array of a data set: shape[0] samples, row-major, little-endian.
struct tensor_array {
  dtype type = dtype::float32;
  std::vector<uint64_t> shape;
  std::vector<uint8_t> bytes;
};

/// Features and labels of the same samples. uint8 features are scaled to
/// [0, 1] (divided by 255), then every feature becomes (x - mean) / stddev.
struct tensor_set {
  tensor_array features; ///< float32 or uint8
  tensor_array labels;   ///< int64 or uint8 (classes), or float32 (values)
  double mean = 0;
  double stddev = 1;

  /// The number of samples (features.shape[0]).
  uint64_t count() const {
    return features.shape.empty() ? 0 : features.shape[0];
  }
};

/// A client's data: its part of the training set and, for federated
/// evaluation, its part of the test set (null test: none).
struct client_data {
  std::shared_ptr<const tensor_set> train;
  std::vector<uint32_t> train_indices;
  std::shared_ptr<const tensor_set> test{};
  std::vector<uint32_t> test_indices{};
};

/// Reads one array from `file`, named by the config key `key` (for errors):
/// "x.npy" (NumPy format 1.0 to 3.0, C order, dtype |u1, <f4, <i8), or
/// "x.safetensors" or "x.safetensors:name" (the tensor `name`; without it,
/// the file's only tensor). Returns an error naming key and file iff the
/// file is missing or malformed, the tensor is not there, its dtype is none
/// of uint8, float32, int64, or it has no sample dimension.
result<tensor_array> read_tensor_array(const std::string& key,
                                       const std::string& file);

/// Reads data_configs' `split` ("train" or "test") files of the tensors
/// dataset (dataset_kwargs.<split>_features and <split>_labels). Returns an
/// error naming the keys and files iff one cannot be read, the feature
/// dtype is not float32 or uint8, the label dtype is not int64, uint8 or
/// float32, or the two hold different numbers of samples.
result<tensor_set> read_tensor_set(const data_config& d,
                                   const std::string& split);

/// Reads Fashion-MNIST's "train" or "t10k" IDX files as a tensor_set:
/// uint8 features [n, 1, rows, cols] normalised with Fashion-MNIST's mean
/// and standard deviation, uint8 labels.
result<tensor_set> read_fashion_mnist_set(const std::string& dir,
                                          const std::string& prefix);

/// Reads the data set `d` names: its training split iff `train`, else its
/// test split (Fashion-MNIST: t10k).
result<tensor_set> read_data_set(const data_config& d, bool train);

/// Returns client `client_index`'s samples of `set`, split as `d` says
/// (see partition()). Returns an error iff a class-based strategy is asked
/// of labels that are not classes (float32, or class ids past 255).
result<std::vector<uint32_t>> partition_set(const tensor_set& set,
                                            const data_config& d,
                                            uint32_t client_index);

} // namespace fedcaf
