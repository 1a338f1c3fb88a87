#pragma once
// The global models an aggregator holds: the one published last (window
// mode settles positions into its bytes in place) and the one before it,
// which downloads of the last round may still read. Each publication (a
// round's result, or a relay's adoption of its parent's model) is a new
// version, counted up from the initial model's; the previous model's
// memory is handed back for reuse once nobody else holds it.
// Thread-safety: none; owned by the aggregator actor.

#include <cstdint>
#include <memory>
#include <string>

#include "fedcaf/byte_buffer.hpp"
#include "fedcaf/error.hpp"
#include "fedcaf/model_snapshot.hpp"

namespace fedcaf {

class model_versions {
public:
  /// Starts from `initial`, its version the first. REQUIRES: non-null.
  explicit model_versions(std::shared_ptr<model_snapshot> initial);

  const manifest& layout() const { return current_->layout; }
  uint64_t version() const { return version_; }

  /// The model published last.
  model_snapshot& current() { return *current_; }
  const model_snapshot& current() const { return *current_; }

  /// Publishes `next` as round `round`'s model, its layout the current
  /// one's and its version the next; the current model becomes the
  /// previous. Returns it.
  snapshot_ptr publish(uint32_t round, model_snapshot next);

  /// A relay: its parent's model `upstream` becomes the current model, a
  /// new version of the current round. It takes upstream's bytes where
  /// nobody else holds them and they are on the heap with `file_prefix`
  /// empty, or in a file (a relay's download: no copy, so the relay never
  /// holds its parent's model twice); else it copies them, to the heap with
  /// `file_prefix` empty, or a piece at a time, the pages released, into an
  /// unlinked file named after the prefix and the version. With `arriving`
  /// (the bytes are still being written: a download under way) they must be
  /// taken. The models before are forgotten (a relay's last model is its
  /// last round's sum, which nobody downloads). Returns it, or an error iff
  /// `upstream` has another size, or is arriving and cannot be taken, or
  /// the file cannot be made.
  result<snapshot_ptr> adopt(std::shared_ptr<model_snapshot> upstream,
                             const std::string& file_prefix,
                             bool arriving = false);

  /// The memory of the model published before the current one, once
  /// nobody else holds it: the previous model is forgotten then. An empty
  /// buffer otherwise.
  byte_buffer take_previous();

private:
  uint64_t version_;
  std::shared_ptr<model_snapshot> current_;
  std::shared_ptr<model_snapshot> previous_;
};

} // namespace fedcaf
