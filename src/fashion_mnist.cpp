#include "fedcaf/fashion_mnist.hpp"

#include <algorithm>
#include <filesystem>
#include <numeric>
#include <random>

#include <zlib.h>

namespace fedcaf {

namespace {

/// IDX files larger than this are refused from their header (Fashion-MNIST's
/// training images take 47 MB).
constexpr uint64_t max_idx_bytes = 1ull << 34;
/// Rows and columns of an image at most.
constexpr uint32_t max_image_side = 1 << 14;
/// Fashion-MNIST: 28 x 28 images of 10 classes (the CNN is built for them).
constexpr uint32_t image_side = 28;
constexpr uint32_t num_classes = 10;

/// An open IDX file, plain or gzip (zlib reads both); closes on destruction.
struct gz_file {
  gzFile in;
  explicit gz_file(gzFile f) : in(f) {}
  gz_file(const gz_file&) = delete;
  gz_file& operator=(const gz_file&) = delete;
  ~gz_file() {
    if (in != nullptr)
      gzclose(in);
  }
};

/// Reads up to `n` bytes into `out`. Returns the bytes read, fewer only at
/// the end of the data; an error naming `path` iff the gzip data is corrupt.
result<uint64_t> read_some(gzFile in, uint8_t* out, uint64_t n,
                           const std::string& path) {
  uint64_t done = 0;
  while (done < n) {
    auto want = static_cast<unsigned>(std::min<uint64_t>(n - done, 1u << 30));
    int got = gzread(in, out + done, want);
    if (got < 0)
      return error{errc::io_error, path + ": corrupt gzip data"};
    if (got == 0)
      break;
    done += static_cast<uint64_t>(got);
  }
  return done;
}

uint32_t big_endian(const uint8_t* b) {
  return (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) |
         (uint32_t{b[2]} << 8) | uint32_t{b[3]};
}

std::string find_file(const std::string& dir, const std::string& name) {
  auto plain = std::filesystem::path{dir} / name;
  auto gz = plain;
  gz += ".gz";
  return std::filesystem::exists(gz) ? gz.string() : plain.string();
}

/// The dimensions and the bytes of an IDX file of unsigned bytes.
struct idx_data {
  std::vector<uint32_t> dims;
  std::vector<uint8_t> body;
};

/// Checks the dimensions of an IDX header: each at least 1, images at most
/// max_image_side on a side, and max_idx_bytes in all. Returns the body's
/// size in bytes.
result<uint64_t> idx_body_bytes(const std::vector<uint32_t>& dims,
                                const std::string& path) {
  uint64_t bytes = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == 0 || (i > 0 && dims[i] > max_image_side))
      return error{errc::io_error,
                   path + ": IDX dimension " + std::to_string(i) + " of " +
                       std::to_string(dims[i]) + " is out of range"};
    bytes *= dims[i]; // < 2^32 * 2^14 * 2^14: no overflow
  }
  if (bytes > max_idx_bytes)
    return error{errc::io_error, path + ": its IDX header declares " +
                                     std::to_string(bytes) +
                                     " bytes, more than the limit of " +
                                     std::to_string(max_idx_bytes)};
  return bytes;
}

/// Reads the body of an IDX file that declares `bytes` into `out`, growing
/// it as data arrives (never by what the header declares alone), and at most
/// to `bytes` + 1: one more byte tells whether the data ends there. Returns
/// the bytes read.
result<uint64_t> read_body(gzFile in, uint64_t bytes, std::vector<uint8_t>& out,
                           const std::string& path) {
  constexpr uint64_t step = 4 << 20;
  uint64_t have = 0;
  try {
    out.reserve(std::min<uint64_t>(bytes + 1, 64 << 20));
    while (have <= bytes) {
      auto n = std::min<uint64_t>(step, bytes + 1 - have);
      out.resize(have + n);
      auto got = read_some(in, out.data() + have, n, path);
      if (!got)
        return got.err();
      have += *got;
      if (*got < n)
        break;
    }
  } catch (const std::bad_alloc&) {
    return error{errc::out_of_memory,
                 path + " (" + std::to_string(have) + " bytes)"};
  }
  out.resize(have);
  return have;
}

/// Reads an IDX file of rank `rank` (magic 0x0000 08 <rank>, the dimensions,
/// then the bytes). Inflates no more than the header declares plus one byte:
/// a file that holds more is refused, so a gzip bomb is never inflated.
result<idx_data> read_idx(const std::string& path, uint8_t rank) {
  gz_file file{gzopen(path.c_str(), "rb")};
  if (file.in == nullptr)
    return error{errc::io_error, path + ": cannot open"};
  std::vector<uint8_t> header(4u + 4u * rank);
  auto got = read_some(file.in, header.data(), header.size(), path);
  if (!got)
    return got.err();
  if (*got != header.size() || big_endian(header.data()) != (0x0800u | rank))
    return error{errc::io_error,
                 path + ": not an IDX file of rank " + std::to_string(rank)};
  idx_data out;
  for (uint8_t i = 0; i < rank; ++i)
    out.dims.push_back(big_endian(header.data() + 4 + 4 * i));
  auto bytes = idx_body_bytes(out.dims, path);
  if (!bytes)
    return bytes.err();
  got = read_body(file.in, *bytes, out.body, path);
  if (!got)
    return got.err();
  if (*got > *bytes)
    return error{errc::io_error, path + ": holds more than the " +
                                     std::to_string(*bytes) +
                                     " bytes its IDX header declares"};
  if (*got < *bytes)
    return error{errc::io_error, path + ": truncated (" + std::to_string(*got) +
                                     " of " + std::to_string(*bytes) +
                                     " bytes)"};
  return out;
}

} // namespace

result<image_set> read_fashion_mnist(const std::string& dir,
                                     const std::string& prefix) {
  auto images_path = find_file(dir, prefix + "-images-idx3-ubyte");
  auto labels_path = find_file(dir, prefix + "-labels-idx1-ubyte");
  auto images = read_idx(images_path, 3);
  if (!images)
    return images.err();
  auto labels = read_idx(labels_path, 1);
  if (!labels)
    return labels.err();
  if (images->dims[0] != labels->dims[0])
    return error{errc::io_error,
                 images_path + " and " + labels_path +
                     " hold different sample counts (" +
                     std::to_string(images->dims[0]) + " images, " +
                     std::to_string(labels->dims[0]) + " labels)"};
  if (images->dims[1] != image_side || images->dims[2] != image_side)
    return error{
        errc::io_error,
        images_path + ": images of " + std::to_string(images->dims[1]) + " x " +
            std::to_string(images->dims[2]) + " pixels; Fashion-MNIST's are " +
            std::to_string(image_side) + " x " + std::to_string(image_side)};
  auto bad = std::find_if(labels->body.begin(), labels->body.end(),
                          [](uint8_t l) { return l >= num_classes; });
  if (bad != labels->body.end())
    return error{
        errc::io_error,
        labels_path + ": label " + std::to_string(*bad) + " of sample " +
            std::to_string(bad - labels->body.begin()) +
            " is not a class from 0 to " + std::to_string(num_classes - 1)};
  image_set set;
  set.count = images->dims[0];
  set.rows = images->dims[1];
  set.cols = images->dims[2];
  set.pixels = std::move(images->body);
  set.labels = std::move(labels->body);
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
