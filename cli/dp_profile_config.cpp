// Reads a dp-profile file with the config readers' section reader. The
// model's dimensions are bounded here, before any tensor is allocated.

#include "dp_profile_config.hpp"

#include "fedcaf/config/section.hpp"
#include "fedcaf/config/words.hpp"

namespace fedcaf::cli {

namespace {

using config_reader::max_threads;
using config_reader::section;

/// dp_profile's model: each dimension at most 2^16, at most 256 layers (a
/// 2^16 x 2^16 float32 tensor is 16 GiB).
constexpr uint64_t max_dp_profile_dim = 1 << 16;
constexpr uint64_t max_dp_profile_layers = 256;

/// Reads the model's dimensions, bounded so that its tensors (vocab_size x
/// d_model, d_model x d_ff, per layer) are checked here, before any is
/// allocated.
void read_model(section m, dp_profile_config& d) {
  m.get("vocab_size", d.vocab_size, 2, max_dp_profile_dim);
  m.get("d_model", d.d_model, 1, max_dp_profile_dim);
  m.get("num_heads", d.num_heads, 1, max_dp_profile_dim);
  m.get("num_layers", d.num_layers, 1, max_dp_profile_layers);
  m.get("d_ff", d.d_ff, 1, max_dp_profile_dim);
  m.get("num_labels", d.num_labels, 2, max_dp_profile_dim);
  if (d.d_model % d.num_heads != 0)
    m.fail("num_heads",
           "must divide d_model (" + std::to_string(d.d_model) + ")");
}

void read(section& s, dp_profile_config& d) {
  read_model(s.child("model"), d);
  s.get("batch_size", d.batch_size, 1);
  s.get_whole_list("seq_lengths", d.seq_lengths, 1);
  s.get_list("modes", d.modes);
  for (const auto& mode : d.modes)
    if (!parse_word<dp_sgd_mode>(mode))
      s.fail("modes", "'" + mode + "' is not none, per_sample, ghost or fused");
  s.get("warmup_iter", d.warmup_iter);
  s.get("num_iter", d.num_iter, 1);
  s.get("repeats", d.repeats, 1);
  s.get("noise_multiplier", d.noise_multiplier);
  if (!(d.noise_multiplier >= 0))
    s.fail("noise_multiplier", "must be 0 (no noise) or positive");
  s.positive("max_grad_norm", d.max_grad_norm);
  s.positive("learning_rate", d.learning_rate);
  s.get("num_threads", d.num_threads, 0, max_threads);
  s.get("seed", d.seed);
  s.get("timeout_s", d.timeout_s, 1);
}

} // namespace

result<dp_profile_config>
load_dp_profile_config(const std::string& path,
                       const std::vector<std::string>& overrides) {
  return config_reader::load_section_file<dp_profile_config>(
      path, overrides, [](section& s, dp_profile_config& d) { read(s, d); });
}

} // namespace fedcaf::cli
