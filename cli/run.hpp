#pragma once
// The fedcaf subcommands. Each builds its actor system, spawns and wires the
// actors, waits for the run to end, and returns the process exit code.

#include "options.hpp"

namespace fedcaf::cli {

int run_simulate(const options& opts);
int run_server(const options& opts);
int run_client(const options& opts);
int run_relay(const options& opts);
int run_profile(const options& opts);
int run_dp_epsilon(const options& opts);
int run_dp_sigma(const options& opts);
int run_dp_profile(const options& opts);
int run_config_reference(const options& opts);

} // namespace fedcaf::cli
