#pragma once
// The models that model_configs can name, and the trainers train_configs can
// name, built without the caller knowing which needs LibTorch.

#include <memory>
#include <string>

#include "fedcaf/config/client_sections.hpp"
#include "fedcaf/error.hpp"
#include "fedcaf/manifest.hpp"
#include "fedcaf/model_snapshot.hpp"

namespace fedcaf {

/// Returns the layout `cfg` describes (CNN: its LibTorch parameters;
/// synthetic: computed without allocating the model).
result<manifest> model_layout(const model_config& cfg);

/// Returns the initial global model drawn from model_configs.seed (or read
/// from model_configs.path). With a `storage_file`, its bytes live in that
/// file, mapped (see anonymous_file_buffer), and are written with their
/// pages given back as it goes, so the model never becomes resident.
result<model_snapshot> initial_model(const model_config& cfg,
                                     const std::string& storage_file = "");

/// Returns true iff the server can evaluate this model on a test set.
bool has_evaluation(const model_config& cfg);

/// Returns the dtype named by model_configs.dtype ("float32", ...).
dtype parse_dtype(const std::string& name);

} // namespace fedcaf
