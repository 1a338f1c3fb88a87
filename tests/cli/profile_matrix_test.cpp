#include "cli/profile_matrix.hpp"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include <doctest/doctest.h>

#include "fedcaf/config/load.hpp"
#include "tests/unit/config/config_test_util.hpp"

using namespace fedcaf;
using namespace fedcaf::config_test;
using fedcaf::cli::load_profile_matrix;

TEST_CASE("list elements are range-checked one by one") {
  auto path = temp_file("matrix.yaml", "base: " FEDCAF_SOURCE_DIR
                                       "/configs/synthetic_dummy.yaml\n"
                                       "clients: [2, 0]\n");
  auto m = load_profile_matrix(path);
  REQUIRE_FALSE(m);
  CHECK(contains(m.err().message, "clients[1]: must be from 1 to 1048576"));
  std::filesystem::remove(path);
}

TEST_CASE("a profile matrix's relative base is looked for beside it, then in "
          "the working directory, --set overrides its keys") {
  namespace fs = std::filesystem;
  auto dir = fs::temp_directory_path() /
             ("fedcaf_matrix_test_" + std::to_string(::getpid()));
  fs::create_directories(dir / "matrices");
  std::ofstream{dir / "matrices" / "base.yaml"} << "server_configs: {}\n";
  std::ofstream{dir / "cwd_base.yaml"} << "server_configs: {}\n";
  auto matrix = (dir / "matrices" / "m.yaml").string();
  std::ofstream{matrix} << "base: base.yaml\nsizes_mib: [8]\n";
  auto beside = load_profile_matrix(matrix);
  REQUIRE(beside);
  CHECK(beside->base == (dir / "matrices" / "base.yaml").string());
  auto set = load_profile_matrix(matrix, {"sizes_mib=[1, 2]", "rounds=1"});
  REQUIRE(set);
  CHECK(set->sizes_mib == std::vector<uint64_t>{1, 2});
  CHECK(set->rounds == 1);
  auto bad = load_profile_matrix(matrix, {"rounds=0"});
  REQUIRE_FALSE(bad);
  CHECK(contains(bad.err().message, "--set rounds: must be"));
  // Not beside the matrix: the working directory's, as before.
  auto cwd = fs::current_path();
  fs::current_path(dir);
  std::ofstream{matrix} << "base: cwd_base.yaml\n";
  auto fallback = load_profile_matrix(matrix);
  std::ofstream{matrix} << "base: nowhere.yaml\n";
  auto missing = load_profile_matrix(matrix);
  fs::current_path(cwd);
  REQUIRE(fallback);
  CHECK(fallback->base == "cwd_base.yaml");
  REQUIRE_FALSE(missing);
  CHECK(contains(missing.err().message,
                 "base: 'nowhere.yaml' is not a file (a relative base is "
                 "looked for beside the matrix file, then in the working "
                 "directory)"));
  fs::remove_all(dir);
}
