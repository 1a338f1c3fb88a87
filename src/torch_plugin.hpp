#pragma once
// The LibTorch trainer as a plugin: libfedcaf_torch.so holds every file that
// includes torch and exports one C function, fedcaf_torch_plugin_v2, that
// returns these entry points. The fedcaf command does not link LibTorch: it
// loads the plugin the first time it needs a trainer, an evaluator or the
// CNN (src/torch_loader.cpp), so a server whose model it does not run (a
// synthetic one, safetensors files, the dummy trainer) never maps LibTorch's
// code and data (about 160 MB of resident memory at start-up). The tests
// that exercise the trainer link the library directly.

#include <memory>
#include <string>
#include <vector>

#include "fedcaf/dp_profile.hpp"
#include "fedcaf/trainer.hpp"

namespace fedcaf {

struct torch_plugin {
  result<std::unique_ptr<trainer>> (*make_trainer)(const client_configs&,
                                                   client_data, uint64_t,
                                                   uint32_t);
  result<std::unique_ptr<evaluator>> (*make_evaluator)(
      const client_configs&, std::shared_ptr<const image_set>, uint32_t);
  result<model_snapshot> (*make_initial_model)(const model_config&);
  result<dp_profile_result> (*profile_dp_step)(const dp_profile_config&,
                                               const std::string&, uint32_t);
};

} // namespace fedcaf

/// The plugin's one export (C linkage: found by dlsym under this name).
extern "C" const fedcaf::torch_plugin* fedcaf_torch_plugin_v2();
