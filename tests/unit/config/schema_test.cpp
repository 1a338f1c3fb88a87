#include "fedcaf/config/schema.hpp"

#include <cstdlib>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <yaml-cpp/yaml.h>

#include "fedcaf/config/load.hpp"
#include "fedcaf/config/section.hpp"

using namespace fedcaf;
using fedcaf::config_reader::section;

namespace {

/// The shipped configs, as fedcaf config-reference reads them.
config_schema shipped_schema() {
  return collect_config_schema(yaml_files_in(FEDCAF_SOURCE_DIR "/configs"));
}

/// REQUIRES a key recorded at `path`; returns it.
const schema_key& key_at(const config_schema& schema, const std::string& path) {
  const auto* k = schema.find(path);
  REQUIRE_MESSAGE(k, (path + " is not recorded"));
  return *k;
}

} // namespace

TEST_CASE("schema: a section records each key it is asked for, with its "
          "type and the value it held before the read") {
  config_schema schema;
  std::vector<std::string> errors;
  {
    section s{YAML::Load("{name: x, on: false, rounds: 7}"), "top", errors,
              nullptr, &schema};
    std::string name = "fallback";
    bool on = true;
    double rate = 0.25, deadline = 600;
    uint32_t rounds = 3, bounded = 5;
    std::string pick = "b";
    s.get("name", name);
    s.get("on", on);
    s.get("rate", rate);
    s.get("rounds", rounds, 1);
    s.get("bounded", bounded, 2, 9);
    s.one_of("pick", pick, {"a", "b"});
    s.seconds("deadline_s", deadline, true);
    std::optional<bool> unset;
    s.get("unset", unset);
    auto child = s.child("inner");
    std::vector<std::pair<std::string, std::string>> tokens;
    child.get_map("tokens", tokens);
    CHECK(name == "x"); // the read itself is unchanged
    CHECK(rounds == 7);
  }
  CHECK(errors.empty());
  auto expect = [&](const std::string& path, const std::string& type,
                    const std::string& default_yaml) {
    const auto& k = key_at(schema, path);
    CHECK(k.type == type);
    CHECK(k.default_yaml == default_yaml);
    CHECK(k.use == key_use::read);
  };
  expect("top.name", "string", "fallback");
  expect("top.on", "bool", "true");
  expect("top.rate", "number", "0.25");
  expect("top.rounds", "whole number >= 1", "3");
  expect("top.bounded", "whole number in [2, 9]", "5");
  expect("top.pick", "one of: a, b", "b"); // not the string it reads
  expect("top.deadline_s", "seconds, or 0", "600");
  expect("top.unset", "bool", ""); // decided by other keys: no default
  expect("top.inner", "section", "");
  expect("top.inner.tokens", "mapping of string to string", "");
  CHECK(schema.keys().front().path == "top.name"); // in the order asked
}

TEST_CASE("schema: ignored, accepted and refused keys are recorded as such, "
          "and a read of the same key elsewhere wins") {
  config_schema schema;
  std::vector<std::string> errors;
  {
    section s{YAML::Load("{model_path: m.py}"), "", errors, nullptr, &schema};
    s.ignore({"logging_output_dirname", "both"});
    s.accept("data_configs");
    s.refuse("model_path", "names a Python file");
  }
  CHECK(errors.size() == 1); // the refusal, as without a schema
  CHECK(key_at(schema, "logging_output_dirname").use == key_use::ignored);
  CHECK(key_at(schema, "data_configs").use == key_use::accepted);
  CHECK(key_at(schema, "model_path").use == key_use::refused);
  schema.record({"both", "bool", "false"});
  CHECK(key_at(schema, "both").use == key_use::read);
  CHECK(key_at(schema, "both").type == "bool");
  schema.record({"both", "", "", key_use::ignored}); // weaker: no change
  CHECK(key_at(schema, "both").use == key_use::read);
}

TEST_CASE("schema: keys the user names are recorded by their placeholder") {
  config_schema schema;
  std::vector<std::string> errors;
  {
    section s{YAML::Load("{rules: {'*.bias': keep, 'embed.*': average}}"), "",
              errors, nullptr, &schema};
    auto rules = s.child("rules");
    for (const auto& name : rules.keys("<pattern>")) {
      std::string rule = "average";
      rules.one_of(name.c_str(), rule, {"average", "keep"});
    }
  }
  CHECK(errors.empty());
  CHECK(key_at(schema, "rules.<pattern>").type == "one of: average, keep");
  CHECK(schema.find("rules.*.bias") == nullptr);
  CHECK(schema.keys().size() == 2); // rules, rules.<pattern>
}

TEST_CASE("schema: the readers over the shipped configs find the keys read "
          "only in some branches, with their defaults") {
  auto schema = shipped_schema();
  // Branches the empty document does not take.
  for (const char* path :
       {"client_configs.train_configs.dp_config.noise_multiplier",
        "client_configs.comm_configs.compressor_configs.lossy_compressor",
        "server_configs.aggregator_kwargs.dp_fedavg.clip_norm",
        "server_configs.aggregator_kwargs.tensor_rules.<pattern>",
        "server_configs.checkpoint.on_error",
        "server_configs.scheduler_kwargs.client_fraction",
        "client_configs.model_configs.name", "train_configs.logging_id",
        "shard.slices.<tensor>"})
    CHECK_MESSAGE(key_at(schema, path).use == key_use::read, path);
  // A key ignored in one branch and read in another is read.
  CHECK(key_at(schema, "client_configs.train_configs.dp_mechanism").type ==
        "string");
  // Each side's defaults.
  CHECK(key_at(schema, "server_configs.comm_configs.stream_configs."
                       "reconnect_grace_s")
            .default_yaml == "30");
  CHECK(key_at(schema, "comm_configs.stream_configs.reconnect_grace_s")
            .default_yaml == "600");
  CHECK(key_at(schema, "train_configs.device").use == key_use::read);
  CHECK(key_at(schema, "client_configs.train_configs.loss_fn_path").use ==
        key_use::refused);
  CHECK(key_at(schema, "client_id").default_yaml.empty()); // required
  // No machine's environment in a default.
  CHECK(key_at(schema, "train_configs.storage_dir").default_yaml == "/tmp");
}

TEST_CASE("schema: a run without a schema reads as before") {
  // The keys whose reading moved to nullable forms keep their checks.
  auto fraction = load_config("", "x.yaml", config_role::simulate,
                              {"server_configs.scheduler_kwargs."
                               "client_fraction=1.5"});
  REQUIRE_FALSE(fraction);
  CHECK(fraction.err().message.find("client_fraction: must be in (0, 1]") !=
        std::string::npos);
  auto half =
      load_config("", "x.yaml", config_role::simulate,
                  {"server_configs.num_clients=4",
                   "data_configs.dataset_kwargs.num_clients=4",
                   "server_configs.scheduler_kwargs.min_clients=1",
                   "server_configs.scheduler_kwargs.client_fraction=0.5",
                   "server_configs.federated_evaluation=false",
                   "server_configs.aggregator_kwargs.partial_updates=discard"});
  REQUIRE(half);
  CHECK(half->server.clients_per_round == 2);
  CHECK(half->server.federated_evaluation == false);
  CHECK(half->server.rule.partial_updates == partial_updates::discard);
  CHECK(half->server.rule.partial_updates_given);
  auto bad = load_config("", "x.yaml", config_role::simulate,
                         {"server_configs.federated_evaluation=maybe"});
  REQUIRE_FALSE(bad);
  CHECK(bad.err().message.find("federated_evaluation: expected true or "
                               "false") != std::string::npos);
}
