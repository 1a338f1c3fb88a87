#pragma once
// Internal to src/config/: the reader of each part's sections, for the
// parts that read a section holding them (the server's sections read their
// comm_configs; load.cpp reads whole files). Each reads what is valid into
// its struct and records every problem in the section (section.hpp).

#include <string>

#include "fedcaf/aggregation_rule.hpp"
#include "fedcaf/config/aggregator_section.hpp"
#include "fedcaf/config/client_sections.hpp"
#include "fedcaf/config/comm_sections.hpp"
#include "fedcaf/config/section.hpp"
#include "fedcaf/config/server_sections.hpp"

namespace fedcaf::config_reader {

// -- client_sections.cpp ------------------------------------------------------

/// Reads client_configs: the server's (`on_server`: from its own file), or
/// as a client received them. A Python client never opens
/// model_configs.path (its model's layout comes with the model), so the
/// server's file need not exist where it runs.
void read(section s, client_configs& c, bool on_server);

/// Reads data_configs; `needs_partition`: fedcaf client, which trains on its
/// partition (dataset_kwargs.num_clients and client_id) of the data set.
void read(section s, data_config& d, bool needs_partition);

/// Reads a device key: cpu, or cuda iff this build's LibTorch has CUDA.
void read_device(section& s, std::string& device);

// -- comm_sections.cpp --------------------------------------------------------

/// Reads comm_configs; `server_side`: the server's (its certificate, the
/// clients' tokens), else a client's (its certificate, its token).
void read(section s, comm_config& c, bool server_side);

// -- aggregator_section.cpp ---------------------------------------------------

/// Reads aggregator_kwargs for the aggregator `rule`, whose defaults and
/// limits depend on it.
void read(section s, rule_config& r, server_rule rule);

// -- server_sections.cpp ------------------------------------------------------

/// Reads server_configs, with its comm_configs and aggregator_kwargs.
void read(section s, server_config& sc);

} // namespace fedcaf::config_reader
