#include "fedcaf/tensor_data.hpp"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <optional>
#include <sstream>

#include "fedcaf/safetensors.hpp"

namespace fedcaf {

namespace {

constexpr size_t max_npy_header_bytes = 1 << 20;
constexpr char safetensors_suffix[] = ".safetensors";

/// "key: 'file': what".
error data_error(const std::string& key, const std::string& file,
                 const std::string& what, errc code = errc::bad_config) {
  return error{code, key + ": '" + file + "': " + what};
}

/// The text after `field` in a .npy header dict, e.g. after "'descr':".
std::string_view after(std::string_view header, std::string_view field) {
  auto at = header.find(field);
  if (at == std::string_view::npos)
    return {};
  header.remove_prefix(at + field.size());
  while (!header.empty() && header.front() == ' ')
    header.remove_prefix(1);
  return header;
}

/// The dtype a .npy descr names: |u1, <f4 or <i8 (others: nullopt).
std::optional<dtype> npy_dtype(std::string_view descr) {
  if (descr == "|u1" || descr == "<u1")
    return dtype::uint8;
  if (descr == "<f4")
    return dtype::float32;
  if (descr == "<i8")
    return dtype::int64;
  return std::nullopt;
}

/// Parses "(60000, 1, 28, 28)" into `shape`; false iff malformed.
bool npy_shape(std::string_view text, std::vector<uint64_t>& shape) {
  if (text.empty() || text.front() != '(')
    return false;
  auto end = text.find(')');
  if (end == std::string_view::npos)
    return false;
  std::string inner{text.substr(1, end - 1)};
  std::replace(inner.begin(), inner.end(), ',', ' ');
  std::istringstream in{inner};
  uint64_t dim = 0;
  while (in >> dim)
    shape.push_back(dim);
  return in.eof();
}

/// Reads the header of an open .npy file into `out` (type and shape).
result<void> read_npy_header(std::ifstream& in, const std::string& key,
                             const std::string& file, tensor_array& out) {
  char magic[8] = {};
  in.read(magic, 8);
  if (!in || std::memcmp(magic, "\x93NUMPY", 6) != 0 || magic[6] < 1 ||
      magic[6] > 3)
    return data_error(key, file, "not a NumPy .npy file (version 1 to 3)");
  uint32_t header_bytes = 0;
  unsigned char len[4] = {};
  in.read(reinterpret_cast<char*>(len), magic[6] == 1 ? 2 : 4);
  header_bytes = len[0] | len[1] << 8 | len[2] << 16 | uint32_t{len[3]} << 24;
  if (!in || header_bytes > max_npy_header_bytes)
    return data_error(key, file, "truncated or oversized .npy header");
  std::string header(header_bytes, '\0');
  in.read(header.data(), header_bytes);
  auto descr = after(header, "'descr':");
  auto quote = descr.size() > 1 ? descr.find('\'', 1) : std::string_view::npos;
  auto type = quote == std::string_view::npos
                  ? std::nullopt
                  : npy_dtype(descr.substr(1, quote - 1));
  if (!in || !type)
    return data_error(key, file,
                      "unsupported dtype (uint8, float32 or int64 only): " +
                          std::string{descr.substr(0, 8)},
                      errc::unsupported_dtype);
  if (!after(header, "'fortran_order':").starts_with("False"))
    return data_error(key, file, "Fortran order is not supported");
  out.type = *type;
  if (!npy_shape(after(header, "'shape':"), out.shape))
    return data_error(key, file, "malformed shape in the .npy header");
  return {};
}

uint64_t element_count(const std::vector<uint64_t>& shape) {
  return std::accumulate(shape.begin(), shape.end(), uint64_t{1},
                         std::multiplies<>{});
}

result<tensor_array> read_npy(const std::string& key, const std::string& file) {
  std::ifstream in{file, std::ios::binary};
  if (!in)
    return data_error(key, file, "cannot open the file", errc::io_error);
  tensor_array out;
  if (auto ok = read_npy_header(in, key, file, out); !ok)
    return ok.err();
  auto bytes = element_count(out.shape) * dtype_bytes(out.type);
  auto start = in.tellg();
  in.seekg(0, std::ios::end);
  auto left = static_cast<uint64_t>(in.tellg() - start);
  if (left != bytes)
    return data_error(key, file,
                      "holds " + std::to_string(left) +
                          " data bytes, its header declares " +
                          std::to_string(bytes));
  in.seekg(start);
  out.bytes.resize(bytes);
  in.read(reinterpret_cast<char*>(out.bytes.data()),
          static_cast<std::streamsize>(bytes));
  if (!in)
    return data_error(key, file, "read failed", errc::io_error);
  return out;
}

/// Copies tensor `name` (or the only one, if `name` is empty) out of `file`.
result<tensor_array> read_safetensor(const std::string& key,
                                     const std::string& file,
                                     const std::string& name) {
  auto st = safetensors_file::open(file);
  if (!st)
    return data_error(key, file, st.err().message, st.err().code);
  const auto& tensors = st->layout().tensors;
  if (name.empty() && tensors.size() != 1)
    return data_error(key, file,
                      "holds " + std::to_string(tensors.size()) +
                          " tensors: name one as FILE.safetensors:NAME");
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (!name.empty() && tensors[i].name != name)
      continue;
    auto view = st->view().tensors[i];
    const auto* data = reinterpret_cast<const uint8_t*>(view.data());
    return tensor_array{tensors[i].type, tensors[i].shape,
                        std::vector<uint8_t>(data, data + view.size())};
  }
  return data_error(key, file, "holds no tensor named '" + name + "'");
}

bool one_of(dtype t, std::initializer_list<dtype> allowed) {
  return std::find(allowed.begin(), allowed.end(), t) != allowed.end();
}

} // namespace

result<tensor_array> read_tensor_array(const std::string& key,
                                       const std::string& file) {
  auto at = file.rfind(safetensors_suffix);
  result<tensor_array> read = error{};
  if (file.ends_with(".npy")) {
    read = read_npy(key, file);
  } else if (at != std::string::npos) {
    auto end = at + sizeof safetensors_suffix - 1;
    if (end < file.size() && file[end] != ':')
      return data_error(key, file, "expected FILE.safetensors:NAME");
    auto name = end < file.size() ? file.substr(end + 1) : std::string{};
    read = read_safetensor(key, file.substr(0, end), name);
  } else {
    return data_error(key, file, "expected a .npy or .safetensors file");
  }
  if (read && !one_of(read->type, {dtype::uint8, dtype::float32, dtype::int64}))
    return data_error(key, file,
                      "unsupported dtype " +
                          std::string{dtype_name(read->type)} +
                          " (uint8, float32 or int64 only)",
                      errc::unsupported_dtype);
  if (read && read->shape.empty())
    return data_error(key, file, "a scalar has no sample dimension");
  return read;
}

namespace {

/// Checks the dtypes of a set read from `fk` and `lk` and its sample counts.
result<void> check_set(const tensor_set& s, const std::string& fk,
                       const std::string& lk) {
  if (!one_of(s.features.type, {dtype::float32, dtype::uint8}))
    return error{errc::unsupported_dtype,
                 fk + ": features must be float32 or uint8, not " +
                     std::string{dtype_name(s.features.type)}};
  if (s.labels.shape[0] != s.features.shape[0])
    return error{errc::bad_config, fk + " holds " +
                                       std::to_string(s.features.shape[0]) +
                                       " samples, " + lk + " " +
                                       std::to_string(s.labels.shape[0])};
  if (s.count() == 0)
    return error{errc::bad_config, fk + ": holds no samples"};
  return {};
}

} // namespace

result<tensor_set> read_tensor_set(const data_config& d,
                                   const std::string& split) {
  bool train = split == "train";
  auto fk = "data_configs.dataset_kwargs." + split + "_features";
  auto lk = "data_configs.dataset_kwargs." + split + "_labels";
  auto features =
      read_tensor_array(fk, train ? d.train_features : d.test_features);
  if (!features)
    return features.err();
  auto labels = read_tensor_array(lk, train ? d.train_labels : d.test_labels);
  if (!labels)
    return labels.err();
  tensor_set s{std::move(*features), std::move(*labels)};
  if (auto ok = check_set(s, fk, lk); !ok)
    return ok.err();
  return s;
}

result<tensor_set> read_fashion_mnist_set(const std::string& dir,
                                          const std::string& prefix) {
  auto images = read_fashion_mnist(dir, prefix);
  if (!images)
    return images.err();
  tensor_set s;
  s.features = {dtype::uint8,
                {images->count, 1, images->rows, images->cols},
                std::move(images->pixels)};
  s.labels = {dtype::uint8, {images->count}, std::move(images->labels)};
  s.mean = fashion_mnist_mean;
  s.stddev = fashion_mnist_stddev;
  return s;
}

result<tensor_set> read_data_set(const data_config& d, bool train) {
  if (d.dataset_name == "tensors")
    return read_tensor_set(d, train ? "train" : "test");
  return read_fashion_mnist_set(d.dataset_path, train ? "train" : "t10k");
}

namespace {

/// The class of every sample, for the partitioners; an error iff the
/// labels are not class ids of at most 255.
result<std::vector<uint8_t>> classes_of(const tensor_array& labels) {
  auto n = labels.shape[0];
  if (labels.type == dtype::uint8 && labels.shape.size() == 1)
    return labels.bytes;
  if (labels.type != dtype::int64 || labels.shape.size() != 1)
    return error{errc::bad_config,
                 "class-based partitions need labels of one class id per "
                 "sample (int64 or uint8)"};
  std::vector<uint8_t> out(n);
  for (uint64_t i = 0; i < n; ++i) {
    int64_t c = 0;
    std::memcpy(&c, labels.bytes.data() + i * 8, 8);
    if (c < 0 || c > 255)
      return error{errc::bad_config,
                   "class-based partitions need class ids from 0 to 255, "
                   "got " +
                       std::to_string(c)};
    out[i] = static_cast<uint8_t>(c);
  }
  return out;
}

} // namespace

result<std::vector<uint32_t>> partition_set(const tensor_set& set,
                                            const data_config& d,
                                            uint32_t client_index) {
  std::vector<uint8_t> classes;
  if (d.partition_strategy == "iid") { // only the count matters
    classes.resize(set.count());
  } else {
    auto found = classes_of(set.labels);
    if (!found)
      return error{found.err().code,
                   "data_configs.dataset_kwargs.partition_strategy " +
                       d.partition_strategy + ": " + found.err().message};
    classes = std::move(*found);
  }
  return partition(classes, d.num_clients, client_index, d.partition_strategy,
                   d.classes_per_client, d.seed, d.dirichlet_alpha);
}

} // namespace fedcaf
