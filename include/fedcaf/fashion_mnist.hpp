#pragma once
// Fashion-MNIST from IDX files (gzip or plain), as Debian's
// dataset-fashion-mnist ships them, and the seeded split across clients.
// Value types only; an image_set is shared read-only between clients.

#include <cstdint>
#include <string>
#include <vector>

#include "fedcaf/error.hpp"

namespace fedcaf {

/// Images and labels of one IDX pair: count x rows x cols bytes of pixels.
struct image_set {
  std::vector<uint8_t> pixels;
  std::vector<uint8_t> labels;
  uint32_t count = 0;
  uint32_t rows = 0;
  uint32_t cols = 0;
};

/// Reads "<dir>/<prefix>-images-idx3-ubyte[.gz]" and the matching labels,
/// where prefix is "train" or "t10k". Returns an error naming the file iff it
/// is missing, truncated, not an IDX file of the expected kind, declares a
/// dimension of 0, an image side past 16384 or more than 16 GiB, or holds
/// more bytes than its header declares (a gzip file is inflated no further
/// than that, so a gzip bomb costs no memory), or its contents are not
/// Fashion-MNIST's: images other than 28 x 28, a label past 9, image and
/// label counts that differ; errc::out_of_memory iff the declared bytes
/// cannot be allocated.
result<image_set> read_fashion_mnist(const std::string& dir,
                                     const std::string& prefix);

/// Returns the sample indices of client `client_index` of `num_clients`:
/// "iid" deals a seeded shuffle of all samples in equal parts;
/// "class_noniid" gives each client `classes_per_client` classes (seeded,
/// covering all classes round-robin) and splits each class evenly among the
/// clients that hold it; "dirichlet_noniid" splits each class among all
/// clients in proportions drawn from Dirichlet(alpha) (Hsu et al. 2019;
/// smaller alpha: more skew), drawing again until no client is empty.
/// Every client gets the same split on every host with the same build.
std::vector<uint32_t> partition(const std::vector<uint8_t>& labels,
                                uint32_t num_clients, uint32_t client_index,
                                const std::string& strategy,
                                uint32_t classes_per_client, uint64_t seed,
                                double alpha = 0.5);

} // namespace fedcaf
