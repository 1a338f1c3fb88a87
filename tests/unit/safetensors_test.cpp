#include "fedcaf/safetensors.hpp"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <doctest/doctest.h>

#include "fedcaf/dummy_trainer.hpp"
#include "fedcaf/llama.hpp"

using namespace fedcaf;

namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("fedcaf_test_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

/// Writes a raw file: 8-byte header length, header, then `data_bytes` zeros.
void write_raw(const std::string& path, const std::string& header,
               size_t data_bytes, uint64_t declared_length = 0) {
  std::ofstream out{path, std::ios::binary};
  uint64_t n = declared_length ? declared_length : header.size();
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << header;
  out << std::string(data_bytes, '\0');
}

std::string open_error(const std::string& path) {
  auto f = safetensors_file::open(path);
  REQUIRE_FALSE(f);
  return f.err().message;
}

} // namespace

TEST_CASE("a written file maps back to the same tensors, bytes and metadata") {
  auto layout = synthetic_layout(5, 10000, dtype::bfloat16);
  auto model = synthetic_model(layout, 3);
  auto path = temp_path("roundtrip.safetensors");
  REQUIRE(write_safetensors(path, layout, model.view(), {{"format", "pt"}}));
  CHECK_FALSE(std::filesystem::exists(path + ".tmp"));
  auto f = safetensors_file::open(path);
  REQUIRE(f);
  CHECK(f->layout() == layout);
  CHECK(f->metadata().at("format") == "pt");
  auto view = f->view();
  auto want = model.view();
  for (size_t i = 0; i < layout.tensors.size(); ++i) {
    REQUIRE(view.tensors[i].size() == want.tensors[i].size());
    CHECK(std::memcmp(view.tensors[i].data(), want.tensors[i].data(),
                      want.tensors[i].size()) == 0);
  }
  // The data region starts 8-aligned, as Hugging Face's writer keeps it.
  CHECK(reinterpret_cast<uintptr_t>(view.tensors[0].data()) % 8 == 0);
  std::filesystem::remove(path);
}

TEST_CASE("malformed files are refused with the file and the problem") {
  auto path = temp_path("bad.safetensors");
  write_raw(path, "{not json", 0);
  CHECK(open_error(path).find("not JSON") != std::string::npos);
  write_raw(path, R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
            12);
  CHECK(open_error(path).find("cover 8 of 12") != std::string::npos);
  write_raw(path, R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})",
            8);
  CHECK(open_error(path).find("'a'") != std::string::npos);
  write_raw(path, R"({"a":{"dtype":"Q4","shape":[2],"data_offsets":[0,8]}})",
            8);
  CHECK(open_error(path).find("unknown dtype") != std::string::npos);
  write_raw(path,
            R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]},)"
            R"("b":{"dtype":"F32","shape":[1],"data_offsets":[12,16]}})",
            16);
  CHECK(open_error(path).find("does not follow") != std::string::npos);
  write_raw(path, "{}", 0, 1u << 30);
  CHECK(open_error(path).find("does not fit") != std::string::npos);
  CHECK(open_error(path + ".missing").find(".missing") != std::string::npos);
  std::filesystem::remove(path);
}

TEST_CASE("shapes that overflow, negative numbers and far offsets are "
          "refused") {
  auto path = temp_path("overflow.safetensors");
  // 2^32 x 2^32 floats: 2^66 bytes, which wraps to 0 in 64 bits and would
  // match data_offsets [0, 0].
  write_raw(path,
            R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],)"
            R"("data_offsets":[0,0]}})",
            0);
  CHECK(open_error(path).find("'a': its shape overflows 64 bits") !=
        std::string::npos);
  write_raw(path, R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})",
            4);
  CHECK(open_error(path).find("'a': shape is not a list of whole numbers") !=
        std::string::npos);
  write_raw(path, R"({"a":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})",
            4);
  CHECK(open_error(path).find("shape is not a list") != std::string::npos);
  write_raw(path, R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}})",
            4);
  CHECK(open_error(path).find("bad data_offsets") != std::string::npos);
  write_raw(path,
            R"({"a":{"dtype":"F32","shape":[1],)"
            R"("data_offsets":[18446744073709551612,18446744073709551615]}})",
            4);
  CHECK(open_error(path).find("past the 4 data bytes") != std::string::npos);
  // An empty dimension makes an empty tensor, however large the others.
  write_raw(path,
            R"({"a":{"dtype":"F32","shape":[0,18446744073709551615],)"
            R"("data_offsets":[4,4]},)"
            R"("b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
            4);
  CHECK(safetensors_file::open(path));
  std::filesystem::remove(path);
}

TEST_CASE("llama presets have Hugging Face's names, shapes and sizes") {
  auto count = [](const manifest& m) {
    uint64_t n = 0;
    for (const auto& t : m.tensors)
      n += t.byte_size / dtype_bytes(t.type);
    return n;
  };
  auto small = llama_layout("llama-3.2-1b", dtype::bfloat16);
  REQUIRE(small);
  CHECK(count(*small) == 1235814400ull);
  CHECK(small->total_bytes() == 2 * 1235814400ull);
  auto big = llama_layout("llama-3.1-8b", dtype::bfloat16);
  REQUIRE(big);
  CHECK(count(*big) == 8030261248ull);
  bool found = false;
  for (const auto& t : big->tensors)
    if (t.name == "model.layers.31.self_attn.k_proj.weight") {
      found = true;
      CHECK(t.shape == std::vector<uint64_t>{1024, 4096});
    }
  CHECK(found);
  CHECK(big->tensors.front().name == "lm_head.weight");
  CHECK_FALSE(llama_layout("llama-70b", dtype::bfloat16));
}
