#include "torch_plugin.hpp"

extern "C" const fedcaf::torch_plugin* fedcaf_torch_plugin_v2() {
  static const fedcaf::torch_plugin entries{
      &fedcaf::make_trainer, &fedcaf::make_evaluator,
      &fedcaf::make_initial_model, &fedcaf::profile_dp_step};
  return &entries;
}
