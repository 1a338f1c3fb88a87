#include "fedcaf/models.hpp"

#include "fedcaf/dummy_trainer.hpp"
#include "fedcaf/trainer.hpp"

namespace fedcaf {

dtype parse_dtype(const std::string& name) {
  if (name == "bfloat16")
    return dtype::bfloat16;
  if (name == "float16")
    return dtype::float16;
  return dtype::float32;
}

result<manifest> model_layout(const model_config& cfg) {
  if (cfg.model_name == "synthetic")
    return synthetic_layout(cfg.num_tensors, cfg.total_bytes,
                            parse_dtype(cfg.dtype));
  auto cnn = make_initial_model(cfg);
  if (!cnn)
    return cnn.err();
  return cnn->layout;
}

result<model_snapshot> initial_model(const model_config& cfg) {
  if (cfg.model_name == "synthetic")
    return synthetic_model(synthetic_layout(cfg.num_tensors, cfg.total_bytes,
                                            parse_dtype(cfg.dtype)),
                           cfg.seed);
  return make_initial_model(cfg);
}

bool has_evaluation(const model_config& cfg) {
  return cfg.model_name == "CNN";
}

} // namespace fedcaf
