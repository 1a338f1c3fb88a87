#pragma once
// Run checkpoints (server_configs.checkpoint): after a round, everything a
// server needs to go on as if it had never stopped, in a folder of its own
// under the checkpoint dir:
//
//   round-000007/model.safetensors      the global model as it travels
//                                       (carried tensors in the floating
//                                       dtype; "fedcaf.held" metadata)
//   round-000007/optimizer.safetensors  the server optimizer's moments
//                                       (FedAvgM, FedAdam, FedYogi,
//                                       FedAdagrad), flat float32
//   round-000007/state.json             written last: the round, versions,
//                                       the report's rounds, the config
//                                       and its digest, each file's size
//
// A checkpoint is written into ".round-000007.partial", each file fsynced,
// then renamed into place and the folder fsynced: a process killed while
// writing leaves a partial folder that is never loaded (the one before is),
// and the last `keep` complete ones stay. A disk-mode model is copied file
// to file (copy_file_range) without entering the process's memory.
// Thread-safety: free functions; one writer per checkpoint dir.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "fedcaf/byte_buffer.hpp"
#include "fedcaf/config/server_sections.hpp"
#include "fedcaf/error.hpp"
#include "fedcaf/manifest.hpp"

namespace fedcaf {

/// What a checkpoint holds besides the model and optimizer bytes.
struct checkpoint_state {
  uint32_t round = 0;         ///< rounds completed
  uint64_t model_version = 0; ///< the global model's version
  /// The server optimizer's steps so far (its moments' age).
  uint64_t optimizer_steps = 0;
  /// The config the run started with (YAML) and its digest.
  std::string config_yaml;
  std::string config_digest;
  /// The rounds it resumed from before, oldest first.
  std::vector<uint32_t> resumed_from;
  /// The report's rounds so far, as the report writes them (a JSON array).
  std::string report_rounds;
};

/// The model a checkpoint is written from: its layout and bytes, and where
/// they are a file's (disk mode) the file, copied file to file where it
/// can be opened (byte_buffer::mapped_file); else written from memory,
/// a mapped model's pages given back behind the write.
struct checkpoint_model {
  const manifest* layout = nullptr;
  const byte_buffer* bytes = nullptr;
  std::string file; ///< the bytes' file (from offset 0), or empty
};

/// Writes the checkpoint of `state.round` into `cfg.dir`, with the server
/// optimizer's state buffers `moments` (name, bytes; none for FedAvg), and
/// keeps the last cfg.keep. Returns an error (io_error) naming the file and
/// the system's reason iff anything could not be written; the complete
/// checkpoints already there stay as they were.
result<void> write_checkpoint(
    const checkpoint_config& cfg, const checkpoint_state& state,
    const checkpoint_model& model,
    std::span<const std::pair<std::string, const byte_buffer*>> moments);

/// A complete checkpoint found on disk.
struct stored_checkpoint {
  std::string folder; ///< its round-NNNNNN folder
  checkpoint_state state;
  manifest layout; ///< the model's, as it travels (held dtypes restored)
  std::string model_path;
  uint64_t model_data_offset = 0; ///< where the model's bytes start
  std::string optimizer_path;     ///< empty: no optimizer state
};

/// The newest complete checkpoint in `dir`. Partial folders (a write that
/// was cut short) and folders whose files do not match their state.json
/// are passed over, each with a warning saying which and why. Returns an
/// error iff `dir` holds no complete checkpoint.
result<stored_checkpoint> latest_checkpoint(const std::string& dir);

/// Reads the optimizer moments of `c` into `moments` (each must be as
/// large as stored). Returns an error iff a moment is missing or sized
/// otherwise, or the file cannot be read.
result<void>
read_moments(const stored_checkpoint& c,
             std::span<std::pair<std::string, byte_buffer*>> moments);

/// Copies the model bytes of `c` into `out` (of layout.total_bytes()); a
/// file-backed `out` gives each piece's pages back once written.
result<void> read_model(const stored_checkpoint& c, byte_buffer& out);

/// A digest of a config's YAML text, key order and comments aside.
std::string config_digest(const std::string& yaml);

/// The keys (dotted paths) whose values differ between two configs' YAML.
std::vector<std::string> differing_keys(const std::string& a,
                                        const std::string& b);

} // namespace fedcaf
