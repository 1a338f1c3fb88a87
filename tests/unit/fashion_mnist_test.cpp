#include "fedcaf/fashion_mnist.hpp"

#include <algorithm>
#include <set>

#include <doctest/doctest.h>

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
