#pragma once
// The whole configuration, for the code that needs more than one part of
// it: typed configuration in APPFL's layout (server_configs, client_configs
// with train_configs and model_configs, data_configs, comm_configs), read
// from YAML and validated before anything starts. Value types only. Each
// part has a header of its own; include that one where it is enough, so
// that an edit of another part does not recompile the unit:
//   fedcaf/config/words.hpp               the word choices, as enums
//   fedcaf/config/client_sections.hpp     client_configs, data_configs
//   fedcaf/config/comm_sections.hpp       comm_configs
//   fedcaf/config/aggregator_section.hpp  server_configs.aggregator_kwargs
//   fedcaf/config/server_sections.hpp     server_configs
//   fedcaf/config/load.hpp                a whole file: load_config, --set
//   fedcaf/config/yaml_safety.hpp         reading YAML safely (not included
//                                         here: it brings in yaml-cpp)

#include "fedcaf/config/aggregator_section.hpp"
#include "fedcaf/config/client_sections.hpp"
#include "fedcaf/config/comm_sections.hpp"
#include "fedcaf/config/load.hpp"
#include "fedcaf/config/server_sections.hpp"
#include "fedcaf/config/words.hpp"
