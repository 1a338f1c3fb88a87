#include "fedcaf/tensor_data.hpp"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include <doctest/doctest.h>

#include "fedcaf/safetensors.hpp"

using namespace fedcaf;

namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("fedcaf_tensor_data_test_" + std::to_string(::getpid()) + "_" +
           name))
      .string();
}

/// Writes a NumPy 1.0 file of `descr` and `shape` holding `bytes`.
std::string write_npy(const std::string& name, const std::string& descr,
                      const std::string& shape, const std::string& bytes) {
  std::string header = "{'descr': '" + descr +
                       "', 'fortran_order': False, 'shape': " + shape + ", }";
  header.append(63 - (10 + header.size()) % 64, ' ');
  header += '\n';
  auto path = temp_path(name);
  std::ofstream out{path, std::ios::binary};
  out.write("\x93NUMPY\x01\x00", 8);
  out.put(static_cast<char>(header.size() & 0xff));
  out.put(static_cast<char>(header.size() >> 8));
  out << header << bytes;
  return path;
}

template <class T> std::string bytes_of(std::vector<T> v) {
  return {reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T)};
}

std::string message_of(const result<tensor_set>& r) {
  REQUIRE_FALSE(r);
  return r.err().message;
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

} // namespace

TEST_CASE("the tensors dataset reads .npy and safetensors files") {
  // Six samples of 2 x 2 uint8 features; int64 classes 0, 1, 2, 0, 1, 2.
  std::string pixels(24, '\0');
  for (size_t i = 0; i < pixels.size(); ++i)
    pixels[i] = static_cast<char>(i * 10);
  std::vector<int64_t> classes{0, 1, 2, 0, 1, 2};
  data_config d;
  d.dataset_name = "tensors";
  d.num_clients = 3;
  d.train_features = write_npy("x.npy", "|u1", "(6, 2, 2)", pixels);
  d.train_labels = write_npy("y.npy", "<i8", "(6,)", bytes_of(classes));
  auto set = read_tensor_set(d, "train");
  REQUIRE(set);
  CHECK(set->count() == 6);
  CHECK(set->features.type == dtype::uint8);
  CHECK(set->features.shape == std::vector<uint64_t>{6, 2, 2});
  CHECK(set->features.bytes[5] == 50);
  CHECK(set->labels.type == dtype::int64);
  // The partitioners split it: class_noniid needs class ids.
  d.partition_strategy = "class_noniid";
  d.classes_per_client = 1;
  auto part = partition_set(*set, d, 1);
  REQUIRE(part);
  CHECK(part->size() == 2);

  // The same labels as a tensor of a safetensors file, named or the only one.
  auto st = temp_path("y.safetensors");
  manifest layout;
  layout.tensors.push_back(make_tensor_info("labels", dtype::int64, {6}));
  const_model_view view;
  view.tensors.emplace_back(reinterpret_cast<const std::byte*>(classes.data()),
                            48);
  REQUIRE(write_safetensors(st, layout, view));
  d.train_labels = st + ":labels";
  CHECK(read_tensor_set(d, "train"));
  d.train_labels = st;
  CHECK(read_tensor_set(d, "train"));
  d.train_labels = st + ":other";
  CHECK(contains(message_of(read_tensor_set(d, "train")),
                 "holds no tensor named 'other'"));

  // Refusals name the key and the file.
  auto five = write_npy("y5.npy", "<i8", "(5,)", bytes_of(classes).substr(8));
  d.train_labels = five;
  auto counts = message_of(read_tensor_set(d, "train"));
  CHECK(contains(counts, "train_features holds 6 samples"));
  CHECK(contains(counts, "train_labels 5"));
  d.train_labels = write_npy("f8.npy", "<f8", "(6,)", std::string(48, '\0'));
  auto f8 = message_of(read_tensor_set(d, "train"));
  CHECK(contains(f8, "data_configs.dataset_kwargs.train_labels"));
  CHECK(contains(f8, "unsupported dtype"));
  d.train_labels = temp_path("missing.npy");
  CHECK(contains(message_of(read_tensor_set(d, "train")), "missing.npy"));
  d.train_labels = write_npy("short.npy", "<i8", "(6,)", std::string(40, '\0'));
  CHECK(contains(message_of(read_tensor_set(d, "train")),
                 "its header declares 48"));
  // Float labels (mse, bce_with_logits) split only iid.
  d.train_labels = write_npy("yf.npy", "<f4", "(6,)", std::string(24, '\0'));
  auto floats = read_tensor_set(d, "train");
  REQUIRE(floats);
  CHECK_FALSE(partition_set(*floats, d, 0));
  d.partition_strategy = "iid";
  CHECK(partition_set(*floats, d, 0));
  for (const auto& f :
       {d.train_features, st, five, d.train_labels, temp_path("f8.npy"),
        temp_path("short.npy"), temp_path("y.npy")})
    std::filesystem::remove(f);
}
