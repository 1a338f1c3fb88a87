#pragma once
// What the config tests share (tests/unit/config/, tests/cli/): files to
// read, a YAML bomb, and the message of a refused config.

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <doctest/doctest.h>

#include "fedcaf/error.hpp"

namespace fedcaf::config_test {

/// Writes `text` to a fresh file under the temporary directory.
inline std::string temp_file(const std::string& name, const std::string& text) {
  auto path =
      (std::filesystem::temp_directory_path() /
       ("fedcaf_config_test_" + std::to_string(::getpid()) + "_" + name))
          .string();
  std::ofstream{path} << text;
  return path;
}

/// A "billion laughs": nine levels of mappings of ten aliases each, 10^9
/// leaves when walked, in under a kilobyte, placed at `key`.
inline std::string billion_laughs(const std::string& key) {
  std::string doc = "l0: &l0 {a: lol}\n";
  for (int level = 1; level <= 9; ++level) {
    auto prev = "*l" + std::to_string(level - 1);
    doc += "l" + std::to_string(level) + ": &l" + std::to_string(level) + " {";
    for (int i = 0; i < 10; ++i)
      doc += (i ? ", k" : "k") + std::to_string(i) + ": " + prev;
    doc += "}\n";
  }
  return doc + key + ": *l9\n";
}

/// REQUIRES a refused config; returns its message.
template <class T> std::string message_of(const result<T>& c) {
  REQUIRE_FALSE(c);
  return c.err().message;
}

inline bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

/// APPFL's shipped example configs, Python-file keys removed.
inline const std::string appfl_dir = FEDCAF_SOURCE_DIR "/tests/fixtures/appfl/";

} // namespace fedcaf::config_test
