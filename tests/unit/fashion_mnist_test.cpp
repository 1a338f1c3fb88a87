#include "fedcaf/fashion_mnist.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include <doctest/doctest.h>
#include <zlib.h>

using namespace fedcaf;

namespace {

const char* dataset_dir = "/usr/share/datasets/fashion-mnist";

} // namespace

TEST_CASE("the test set of Debian's package reads as 10000 labelled images") {
  auto t = read_fashion_mnist(dataset_dir, "t10k");
  REQUIRE(t);
  CHECK(t->count == 10000);
  CHECK(t->rows == 28);
  CHECK(t->cols == 28);
  CHECK(t->pixels.size() == 10000u * 28 * 28);
  CHECK(*std::max_element(t->labels.begin(), t->labels.end()) == 9);
}

TEST_CASE("a missing file is an error naming it") {
  auto t = read_fashion_mnist("/nonexistent", "t10k");
  REQUIRE_FALSE(t);
  CHECK(t.err().message.find("/nonexistent") != std::string::npos);
}

TEST_CASE("iid parts are disjoint, equal and seeded") {
  std::vector<uint8_t> labels(1000);
  for (size_t i = 0; i < labels.size(); ++i)
    labels[i] = static_cast<uint8_t>(i % 10);
  std::set<uint32_t> seen;
  for (uint32_t c = 0; c < 4; ++c) {
    auto p = partition(labels, 4, c, "iid", 2, 42);
    CHECK(p.size() == 250);
    for (auto i : p)
      CHECK(seen.insert(i).second);
    CHECK(p == partition(labels, 4, c, "iid", 2, 42));
  }
  CHECK(partition(labels, 4, 0, "iid", 2, 42) !=
        partition(labels, 4, 0, "iid", 2, 43));
}

TEST_CASE("class_noniid gives each client its classes only") {
  std::vector<uint8_t> labels(2000);
  for (size_t i = 0; i < labels.size(); ++i)
    labels[i] = static_cast<uint8_t>(i % 10);
  std::set<uint32_t> seen;
  for (uint32_t c = 0; c < 5; ++c) {
    auto p = partition(labels, 5, c, "class_noniid", 2, 7);
    std::set<uint8_t> classes;
    for (auto i : p) {
      classes.insert(labels[i]);
      CHECK(seen.insert(i).second);
    }
    CHECK(classes.size() == 2);
  }
  CHECK(seen.size() == labels.size());
}

TEST_CASE("dirichlet_noniid covers every sample once, skewed by alpha") {
  std::vector<uint8_t> labels(6000);
  for (size_t i = 0; i < labels.size(); ++i)
    labels[i] = static_cast<uint8_t>(i % 10);
  // Mean over clients of the share of a client's largest class.
  auto skew = [&](double alpha) {
    std::set<uint32_t> seen;
    double top = 0;
    for (uint32_t c = 0; c < 20; ++c) {
      auto p = partition(labels, 20, c, "dirichlet_noniid", 2, 3, alpha);
      REQUIRE_FALSE(p.empty());
      CHECK(p == partition(labels, 20, c, "dirichlet_noniid", 2, 3, alpha));
      std::vector<size_t> per_class(10);
      for (auto i : p) {
        CHECK(seen.insert(i).second);
        ++per_class[labels[i]];
      }
      top += static_cast<double>(
                 *std::max_element(per_class.begin(), per_class.end())) /
             static_cast<double>(p.size());
    }
    CHECK(seen.size() == labels.size());
    return top / 20;
  };
  auto skewed = skew(0.1);
  auto even = skew(100.0);
  CHECK(skewed > 0.5);
  CHECK(even < 0.2);
}

namespace {

/// A directory of IDX files made by a test; removed on destruction.
struct idx_dir {
  std::string path = (std::filesystem::temp_directory_path() /
                      ("fedcaf_idx_test_" + std::to_string(::getpid())))
                         .string();
  idx_dir() { std::filesystem::create_directories(path); }
  idx_dir(const idx_dir&) = delete;
  ~idx_dir() { std::filesystem::remove_all(path); }
};

std::vector<uint8_t> idx_header(uint8_t rank, std::vector<uint32_t> dims) {
  std::vector<uint8_t> h{0, 0, 8, rank};
  for (auto d : dims)
    for (int shift = 24; shift >= 0; shift -= 8)
      h.push_back(static_cast<uint8_t>(d >> shift));
  return h;
}

/// Writes `header` and then `zeros` zero bytes, gzip-compressed, to `path`.
void write_gz(const std::string& path, const std::vector<uint8_t>& header,
              uint64_t zeros) {
  gzFile out = gzopen(path.c_str(), "wb1");
  REQUIRE(out != nullptr);
  gzwrite(out, header.data(), static_cast<unsigned>(header.size()));
  std::vector<uint8_t> block(1 << 20);
  for (uint64_t left = zeros; left > 0;) {
    auto n = std::min<uint64_t>(left, block.size());
    gzwrite(out, block.data(), static_cast<unsigned>(n));
    left -= n;
  }
  gzclose(out);
}

long peak_rss_kib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

} // namespace

TEST_CASE("a gzip bomb is refused before it inflates past its header") {
  idx_dir dir;
  // 10 images declared, 256 MiB of zeros behind them: about 256 KiB on disk.
  write_gz(dir.path + "/bomb-images-idx3-ubyte.gz", idx_header(3, {10, 28, 28}),
           10 * 28 * 28 + (256ull << 20));
  write_gz(dir.path + "/bomb-labels-idx1-ubyte.gz", idx_header(1, {10}), 10);
  auto before_kib = peak_rss_kib();
  auto t = read_fashion_mnist(dir.path, "bomb");
  REQUIRE_FALSE(t);
  CHECK(t.err().code == errc::io_error);
  CHECK(t.err().message.find("bomb-images-idx3-ubyte.gz: holds more than the "
                             "7840 bytes its IDX header declares") !=
        std::string::npos);
  // Inflating it all would have raised the peak by 256 MiB or more.
  CHECK(peak_rss_kib() - before_kib < 64 * 1024);
  // The same files, as declared, read.
  write_gz(dir.path + "/ok-images-idx3-ubyte.gz", idx_header(3, {10, 28, 28}),
           10 * 28 * 28);
  write_gz(dir.path + "/ok-labels-idx1-ubyte.gz", idx_header(1, {10}), 10);
  auto ok = read_fashion_mnist(dir.path, "ok");
  REQUIRE(ok);
  CHECK(ok->pixels.size() == 7840);
  CHECK(ok->labels.size() == 10);
}

TEST_CASE("IDX dimensions out of range are refused from the header") {
  idx_dir dir;
  write_gz(dir.path + "/t10k-labels-idx1-ubyte.gz", idx_header(1, {10}), 10);
  auto images = dir.path + "/t10k-images-idx3-ubyte.gz";
  auto refused = [&](std::vector<uint32_t> dims, const std::string& part) {
    write_gz(images, idx_header(3, dims), 100);
    auto t = read_fashion_mnist(dir.path, "t10k");
    REQUIRE_FALSE(t);
    CHECK(t.err().message.find(images) != std::string::npos);
    CHECK(t.err().message.find(part) != std::string::npos);
  };
  // 2^32 - 1 images of 16384 x 16384: 2^60 bytes, more than the limit.
  refused({0xffffffffu, 16384, 16384}, "more than the limit");
  refused({10, 0xffffffffu, 28}, "IDX dimension 1 of 4294967295");
  refused({0, 28, 28}, "IDX dimension 0 of 0");
  refused({10, 28, 28}, "truncated (100 of 7840 bytes)");
}

TEST_CASE("IDX contents that are not Fashion-MNIST's are refused when read") {
  idx_dir dir;
  auto images = dir.path + "/t10k-images-idx3-ubyte.gz";
  auto labels = dir.path + "/t10k-labels-idx1-ubyte.gz";
  auto refused = [&](const std::string& part) {
    auto t = read_fashion_mnist(dir.path, "t10k");
    REQUIRE_FALSE(t);
    CHECK(t.err().code == errc::io_error);
    CHECK(t.err().message.find(part) != std::string::npos);
  };
  // A label past 9 (sample 3 of 10).
  write_gz(images, idx_header(3, {10, 28, 28}), 10 * 28 * 28);
  auto bad_label = idx_header(1, {10});
  bad_label.insert(bad_label.end(), {0, 1, 2, 12, 4, 5, 6, 7, 8, 9});
  write_gz(labels, bad_label, 0);
  refused(labels + ": label 12 of sample 3 is not a class from 0 to 9");
  // Images of another size than 28 x 28.
  write_gz(labels, idx_header(1, {10}), 10);
  write_gz(images, idx_header(3, {10, 32, 32}), 10 * 32 * 32);
  refused(images + ": images of 32 x 32 pixels; Fashion-MNIST's are 28 x 28");
  // Counts that disagree.
  write_gz(images, idx_header(3, {12, 28, 28}), 12 * 28 * 28);
  refused("hold different sample counts (12 images, 10 labels)");
  // A magic of another rank or type.
  write_gz(images, idx_header(1, {10}), 10);
  refused(images + ": not an IDX file of rank 3");
}
