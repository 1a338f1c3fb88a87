#include "fedcaf/config/help.hpp"

#include <string>

#include <doctest/doctest.h>

#include "fedcaf/config/schema.hpp"

using namespace fedcaf;

TEST_CASE("help: an entry names a whole path, or its end after a dot") {
  CHECK(help_names("server_configs", "server_configs"));
  CHECK(help_names("comm_configs.stream_configs.window",
                   "server_configs.comm_configs.stream_configs.window"));
  CHECK_FALSE(help_names("window", "server_configs.comm_configs.stream_"
                                   "configs.xwindow"));
  CHECK_FALSE(help_names("server_configs.num_clients", "num_clients"));
}

TEST_CASE("help: every key the readers record has help, and every help "
          "entry names a key they record") {
  // The keys of `fedcaf config-reference`: a key added to a reader needs a
  // line in src/config/help.cpp, and one removed takes its line with it.
  auto schema =
      collect_config_schema(yaml_files_in(FEDCAF_SOURCE_DIR "/configs"));
  REQUIRE(schema.keys().size() > 100);
  for (const auto& k : schema.keys())
    CHECK_MESSAGE(!help_of(k.path).empty(),
                  (k.path + ": no help in src/config/help.cpp"));
  for (const auto& h : config_help()) {
    bool names_one = false;
    for (const auto& k : schema.keys())
      names_one = names_one || help_names(h.path, k.path);
    CHECK_MESSAGE(names_one, (std::string{h.path} +
                              ": help for a key no reader asks for"));
    CHECK_MESSAGE(!h.help.empty(), (std::string{h.path} + ": empty help"));
  }
}

TEST_CASE("help: a longer entry wins over a shorter one that also names the "
          "key") {
  auto server = help_of("server_configs.comm_configs.grpc_configs.server_uri");
  auto client = help_of("comm_configs.grpc_configs.server_uri");
  CHECK(server != client);
  CHECK(server.find("listens") != std::string_view::npos);
}
