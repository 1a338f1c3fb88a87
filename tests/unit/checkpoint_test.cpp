// Run checkpoints on disk: written atomically and read back exactly, the
// last `keep` kept, a partial or damaged one passed over for the one
// before, and config changes named by key.

#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "fedcaf/checkpoint.hpp"

using namespace fedcaf;
namespace fs = std::filesystem;

namespace {

struct temp_dir {
  fs::path path =
      fs::temp_directory_path() / ("fedcaf-ckpt-" + std::to_string(::getpid()));
  temp_dir() { fs::remove_all(path); }
  ~temp_dir() { fs::remove_all(path); }
};

manifest layout_with_counter() {
  manifest m;
  m.tensors.push_back(make_tensor_info("w", dtype::float32, {6}));
  auto c = make_tensor_info("bn.num_batches_tracked", dtype::float32, {1});
  c.held = dtype::int64;
  m.tensors.push_back(c);
  return m;
}

byte_buffer floats(std::vector<float> v) {
  auto b = byte_buffer::uninitialized(v.size() * sizeof(float));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

checkpoint_state state_of(uint32_t round) {
  checkpoint_state s;
  s.round = round;
  s.model_version = round;
  s.optimizer_steps = round;
  s.config_yaml = "server_configs: {num_global_epochs: 10}\n";
  s.config_digest = config_digest(s.config_yaml);
  s.resumed_from = {2};
  s.report_rounds = "[]";
  return s;
}

} // namespace

TEST_CASE("a checkpoint reads back exactly, the newest complete one is "
          "loaded, partial and damaged ones are passed over") {
  temp_dir d;
  checkpoint_config cfg{d.path.string(), 1, 2, checkpoint_failure::stop};
  auto layout = layout_with_counter();
  for (uint32_t r = 1; r <= 3; ++r) {
    // The counter travels as a float holding a non-integer mean: kept so.
    auto model = floats({1.f * r, 2, 3, 4, 5, 6, 2.5f * r});
    auto m = floats(std::vector<float>(7, 0.5f * r));
    std::pair<std::string, const byte_buffer*> moments[] = {{"m", &m}};
    REQUIRE(write_checkpoint(cfg, state_of(r), {&layout, &model, ""}, moments));
  }
  CHECK(!fs::exists(d.path / "round-000001")); // keep: 2
  auto c = latest_checkpoint(d.path.string());
  REQUIRE(c);
  CHECK(c->state.round == 3);
  CHECK(c->state.resumed_from == std::vector<uint32_t>{2});
  CHECK(c->layout == layout); // the carried tensor's dtype restored
  auto model = byte_buffer::zeroed(layout.total_bytes());
  REQUIRE(read_model(*c, model));
  const auto* v = reinterpret_cast<const float*>(model.data());
  CHECK(v[0] == 3.f);
  CHECK(v[6] == 7.5f);
  auto m = byte_buffer::zeroed(7 * sizeof(float));
  std::pair<std::string, byte_buffer*> moments[] = {{"m", &m}};
  REQUIRE(read_moments(*c, moments));
  CHECK(reinterpret_cast<const float*>(m.data())[6] == 1.5f);

  // A write cut short (a partial folder) and a damaged newest checkpoint:
  // round 2 is loaded.
  fs::create_directory(d.path / ".round-000004.partial");
  std::ofstream{d.path / ".round-000004.partial" / "model.safetensors"}
      << "torn";
  fs::resize_file(d.path / "round-000003" / "model.safetensors", 100);
  c = latest_checkpoint(d.path.string());
  REQUIRE(c);
  CHECK(c->state.round == 2);
  fs::remove_all(d.path / "round-000002");
  fs::remove_all(d.path / "round-000003");
  CHECK(!latest_checkpoint(d.path.string()));
}

/// Overwrites `n` bytes at `offset` of `path` in place with `byte`.
void overwrite(const fs::path& path, uint64_t offset, uint64_t n, char byte) {
  std::fstream f{path, std::ios::in | std::ios::out | std::ios::binary};
  f.seekp(static_cast<std::streamoff>(offset));
  std::string bytes(n, byte);
  f.write(bytes.data(), static_cast<std::streamsize>(n));
}

TEST_CASE("a checkpoint file overwritten in place (same size), zeroed or "
          "replaced by another round's is refused by its digest, named, and "
          "the checkpoint before it is loaded") {
  temp_dir d;
  checkpoint_config cfg{d.path.string(), 1, 3, checkpoint_failure::stop};
  auto layout = layout_with_counter();
  for (uint32_t r = 1; r <= 3; ++r) {
    auto model = floats({1.f * r, 2, 3, 4, 5, 6, 7});
    auto m = floats(std::vector<float>(7, 0.5f * r));
    std::pair<std::string, const byte_buffer*> moments[] = {{"m", &m}};
    REQUIRE(write_checkpoint(cfg, state_of(r), {&layout, &model, ""}, moments));
  }
  auto model3 = d.path / "round-000003" / "model.safetensors";
  auto size = fs::file_size(model3);
  SUBCASE("a model value changed in place") {
    overwrite(model3, size - 4, 4, '\x7f');
  }
  SUBCASE("a model's bytes zeroed") {
    overwrite(model3, size - 28, 28, 0);
  }
  SUBCASE("another round's model planted (same size)") {
    fs::copy_file(d.path / "round-000002" / "model.safetensors", model3,
                  fs::copy_options::overwrite_existing);
  }
  SUBCASE("the optimizer's moments changed") {
    auto opt = d.path / "round-000003" / "optimizer.safetensors";
    overwrite(opt, fs::file_size(opt) - 4, 4, 1);
  }
  REQUIRE(fs::file_size(model3) == size);
  auto c = latest_checkpoint(d.path.string());
  REQUIRE(c);
  CHECK(c->state.round == 2);
  auto model = byte_buffer::zeroed(layout.total_bytes());
  REQUIRE(read_model(*c, model));
  CHECK(reinterpret_cast<const float*>(model.data())[0] == 2.f);
}

TEST_CASE("a checkpoint's state.json records each file's digest") {
  temp_dir d;
  checkpoint_config cfg{d.path.string(), 1, 2, checkpoint_failure::stop};
  auto layout = layout_with_counter();
  auto model = floats({1, 2, 3, 4, 5, 6, 7});
  REQUIRE(write_checkpoint(cfg, state_of(1), {&layout, &model, ""}, {}));
  // Written file to file (a disk-mode model): the same digest.
  auto source = (d.path / "model.bin").string();
  {
    std::ofstream out{source, std::ios::binary};
    out.write(reinterpret_cast<const char*>(model.data()),
              static_cast<std::streamsize>(model.size()));
  }
  REQUIRE(write_checkpoint(cfg, state_of(2), {&layout, &model, source}, {}));
  std::string digests[2];
  for (int r = 1; r <= 2; ++r) {
    std::ifstream in{d.path / ("round-00000" + std::to_string(r)) /
                     "state.json"};
    std::string text{std::istreambuf_iterator<char>{in}, {}};
    auto at = text.find("\"model.safetensors\": \"sha256:");
    REQUIRE(at != std::string::npos);
    digests[r - 1] = text.substr(at, 90);
  }
  CHECK(digests[0] == digests[1]);
  CHECK(latest_checkpoint(d.path.string()));
}

TEST_CASE("a checkpoint that cannot be written leaves the earlier ones") {
  temp_dir d;
  checkpoint_config cfg{d.path.string(), 1, 2, checkpoint_failure::stop};
  auto layout = layout_with_counter();
  auto model = floats({1, 2, 3, 4, 5, 6, 7});
  REQUIRE(write_checkpoint(cfg, state_of(1), {&layout, &model, ""}, {}));
  // A model file to copy from that is shorter than the model.
  auto short_file = (d.path / "short.bin").string();
  std::ofstream{short_file} << "abc";
  auto failed =
      write_checkpoint(cfg, state_of(2), {&layout, &model, short_file}, {});
  REQUIRE(!failed);
  CHECK(failed.err().code == errc::io_error);
  CHECK(failed.err().message.find("short.bin") != std::string::npos);
  auto c = latest_checkpoint(d.path.string());
  REQUIRE(c);
  CHECK(c->state.round == 1);
}

TEST_CASE("config digests ignore key order and comments, changed keys are "
          "named") {
  auto a = "server_configs:\n  num_global_epochs: 10  # ten\n  seed: 1\n";
  auto b = "server_configs: {seed: 1, num_global_epochs: 10}\n";
  auto c = "server_configs: {seed: 2, num_global_epochs: 10, extra: x}\n";
  CHECK(config_digest(a) == config_digest(b));
  CHECK(config_digest(a) != config_digest(c));
  CHECK(
      differing_keys(a, c) ==
      std::vector<std::string>{"server_configs.extra", "server_configs.seed"});
}
