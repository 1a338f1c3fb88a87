#include "fedcaf/config/reference.hpp"

#include <string>

#include <doctest/doctest.h>

using namespace fedcaf;

TEST_CASE("reference: a table per section, each after its parent's, in the "
          "order the readers asked") {
  config_schema schema;
  schema.record({"server_configs", "section", ""});
  schema.record({"client_id", "string", ""});
  schema.record({"server_configs.checkpoint", "section", ""});
  schema.record({"server_configs.num_clients", "whole number", "2"});
  schema.record({"server_configs.checkpoint.dir", "string", ""});
  schema.record(
      {"server_configs.logging_output_dirname", "", "", key_use::ignored});
  auto md = config_reference_markdown(schema);
  auto top = md.find("## Top level\n");
  auto server = md.find("## server_configs\n");
  auto checkpoint = md.find("## server_configs.checkpoint\n");
  REQUIRE(top != std::string::npos);
  REQUIRE(server != std::string::npos);
  REQUIRE(checkpoint != std::string::npos);
  CHECK(top < server);
  CHECK(server < checkpoint);
  CHECK(
      md.find("| key | type | default | what it does |\n|---|---|---|---|\n") !=
      std::string::npos);
  CHECK(md.find("| `server_configs.num_clients` | whole number | `2` | ") !=
        std::string::npos);
  CHECK(md.find("| `server_configs.logging_output_dirname` | ignored "
                "(APPFL's, unused) |  | ") != std::string::npos);
  CHECK(md.find("server_configs.checkpoint` | section") < checkpoint);
  CHECK(md.back() == '\n');
}

TEST_CASE("reference: a '|' in a cell is escaped") {
  config_schema schema;
  schema.record({"a", "one of: x|y", "x|y"});
  auto md = config_reference_markdown(schema);
  CHECK(md.find("one of: x\\|y | `x\\|y` |") != std::string::npos);
}
