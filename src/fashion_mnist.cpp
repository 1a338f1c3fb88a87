#include "fedcaf/fashion_mnist.hpp"

#include <algorithm>
#include <filesystem>
#include <numeric>
#include <random>

#include <zlib.h>

namespace fedcaf {

namespace {

/// Reads a whole file, inflating it if it is gzip (zlib reads both).
result<std::vector<uint8_t>> read_maybe_gzip(const std::string& path) {
  gzFile in = gzopen(path.c_str(), "rb");
  if (in == nullptr)
    return error{errc::io_error, path + ": cannot open"};
  std::vector<uint8_t> out;
  std::vector<uint8_t> block(1 << 20);
  int n;
  while ((n = gzread(in, block.data(), static_cast<unsigned>(block.size()))) >
         0)
    out.insert(out.end(), block.begin(), block.begin() + n);
  bool failed = n < 0;
  gzclose(in);
  if (failed)
    return error{errc::io_error, path + ": corrupt gzip data"};
  return out;
}

uint32_t big_endian(const std::vector<uint8_t>& b, size_t at) {
  return (uint32_t{b[at]} << 24) | (uint32_t{b[at + 1]} << 16) |
         (uint32_t{b[at + 2]} << 8) | uint32_t{b[at + 3]};
}

std::string find_file(const std::string& dir, const std::string& name) {
  auto plain = std::filesystem::path{dir} / name;
  auto gz = plain;
  gz += ".gz";
  return std::filesystem::exists(gz) ? gz.string() : plain.string();
}

/// Checks an IDX header: magic 0x0000 08 <dims>, then the dimensions.
result<std::vector<uint32_t>> idx_dims(const std::vector<uint8_t>& b,
                                       const std::string& path, uint8_t rank) {
  if (b.size() < 4u + 4u * rank || big_endian(b, 0) != (0x0800u | rank))
    return error{errc::io_error,
                 path + ": not an IDX file of rank " + std::to_string(rank)};
  std::vector<uint32_t> dims;
  uint64_t elements = 1;
  for (uint8_t i = 0; i < rank; ++i) {
    dims.push_back(big_endian(b, 4 + 4 * i));
    elements *= dims.back();
  }
  if (b.size() != 4u + 4u * rank + elements)
    return error{errc::io_error,
                 path + ": truncated (" + std::to_string(b.size()) + " bytes)"};
  return dims;
}

} // namespace

result<image_set> read_fashion_mnist(const std::string& dir,
                                     const std::string& prefix) {
  auto images_path = find_file(dir, prefix + "-images-idx3-ubyte");
  auto labels_path = find_file(dir, prefix + "-labels-idx1-ubyte");
  auto images = read_maybe_gzip(images_path);
  if (!images)
    return images.err();
  auto labels = read_maybe_gzip(labels_path);
  if (!labels)
    return labels.err();
  auto image_dims = idx_dims(*images, images_path, 3);
  if (!image_dims)
    return image_dims.err();
  auto label_dims = idx_dims(*labels, labels_path, 1);
  if (!label_dims)
    return label_dims.err();
  if ((*image_dims)[0] != (*label_dims)[0])
    return error{errc::io_error, images_path + " and " + labels_path +
                                     " hold different sample counts"};
  image_set set;
  set.count = (*image_dims)[0];
  set.rows = (*image_dims)[1];
  set.cols = (*image_dims)[2];
  images->erase(images->begin(), images->begin() + 16); // IDX headers
  labels->erase(labels->begin(), labels->begin() + 8);
  set.pixels = std::move(*images);
  set.labels = std::move(*labels);
  return set;
}

namespace {

/// Fisher-Yates with mt19937_64, so every host draws the same permutation.
void seeded_shuffle(std::vector<uint32_t>& v, std::mt19937_64& rng) {
  for (size_t i = v.size(); i > 1; --i) {
    auto j = static_cast<size_t>(rng() % i);
    std::swap(v[i - 1], v[j]);
  }
}

std::vector<uint32_t> iid_part(uint32_t count, uint32_t num_clients,
                               uint32_t client_index, std::mt19937_64& rng) {
  std::vector<uint32_t> all(count);
  std::iota(all.begin(), all.end(), 0u);
  seeded_shuffle(all, rng);
  auto per = count / num_clients;
  auto begin = all.begin() + static_cast<long>(per) * client_index;
  return {begin, begin + per};
}

std::vector<uint32_t> class_part(const std::vector<uint8_t>& labels,
                                 uint32_t num_clients, uint32_t client_index,
                                 uint32_t classes_per_client,
                                 std::mt19937_64& rng) {
  uint32_t num_classes = *std::max_element(labels.begin(), labels.end()) + 1;
  std::vector<uint32_t> class_order(num_classes);
  std::iota(class_order.begin(), class_order.end(), 0u);
  seeded_shuffle(class_order, rng);
  // Client c holds classes order[(c * k + j) % C] for j < k.
  std::vector<std::vector<uint32_t>> holders(num_classes);
  for (uint32_t c = 0; c < num_clients; ++c)
    for (uint32_t j = 0; j < classes_per_client; ++j) {
      auto cls = class_order[(c * classes_per_client + j) % num_classes];
      if (std::find(holders[cls].begin(), holders[cls].end(), c) ==
          holders[cls].end())
        holders[cls].push_back(c);
    }
  std::vector<uint32_t> mine;
  for (uint32_t cls = 0; cls < num_classes; ++cls) {
    std::vector<uint32_t> members;
    for (uint32_t i = 0; i < labels.size(); ++i)
      if (labels[i] == cls)
        members.push_back(i);
    seeded_shuffle(members, rng);
    auto& h = holders[cls];
    auto it = std::find(h.begin(), h.end(), client_index);
    if (it == h.end())
      continue;
    auto share = members.size() / h.size();
    auto at = static_cast<size_t>(it - h.begin()) * share;
    mine.insert(mine.end(), members.begin() + static_cast<long>(at),
                members.begin() + static_cast<long>(at + share));
  }
  std::sort(mine.begin(), mine.end());
  return mine;
}

/// Splits every class among all clients in Dirichlet(alpha) proportions.
/// Returns the parts of every client, none empty (draws again, at most 100
/// times; after that some may be empty).
std::vector<std::vector<uint32_t>>
dirichlet_parts(const std::vector<uint8_t>& labels, uint32_t num_clients,
                double alpha, std::mt19937_64& rng) {
  uint32_t num_classes = *std::max_element(labels.begin(), labels.end()) + 1;
  std::vector<std::vector<uint32_t>> members(num_classes);
  for (uint32_t i = 0; i < labels.size(); ++i)
    members[labels[i]].push_back(i);
  for (auto& m : members)
    seeded_shuffle(m, rng);
  std::vector<std::vector<uint32_t>> parts;
  for (int attempt = 0; attempt < 100; ++attempt) {
    parts.assign(num_clients, {});
    std::gamma_distribution<double> gamma{alpha, 1.0};
    std::vector<double> share(num_clients);
    for (const auto& m : members) {
      double total = 0;
      for (auto& x : share)
        total += (x = gamma(rng));
      // Client c takes [floor(n * S_c / total), floor(n * S_{c+1} / total)).
      double cumulative = 0;
      size_t begin = 0;
      for (uint32_t c = 0; c < num_clients; ++c) {
        cumulative += share[c];
        auto end = c + 1 == num_clients
                       ? m.size()
                       : static_cast<size_t>(static_cast<double>(m.size()) *
                                             cumulative / total);
        end = std::max(end, begin);
        parts[c].insert(parts[c].end(), m.begin() + static_cast<long>(begin),
                        m.begin() + static_cast<long>(end));
        begin = end;
      }
    }
    if (std::none_of(parts.begin(), parts.end(),
                     [](const auto& p) { return p.empty(); }))
      break;
  }
  for (auto& p : parts)
    std::sort(p.begin(), p.end());
  return parts;
}

} // namespace

std::vector<uint32_t> partition(const std::vector<uint8_t>& labels,
                                uint32_t num_clients, uint32_t client_index,
                                const std::string& strategy,
                                uint32_t classes_per_client, uint64_t seed,
                                double alpha) {
  std::mt19937_64 rng{seed};
  if (strategy == "dirichlet_noniid")
    return std::move(
        dirichlet_parts(labels, num_clients, alpha, rng)[client_index]);
  if (strategy == "class_noniid")
    return class_part(labels, num_clients, client_index, classes_per_client,
                      rng);
  return iid_part(static_cast<uint32_t>(labels.size()), num_clients,
                  client_index, rng);
}

} // namespace fedcaf
