#pragma once
// What a relay's upstream trainer is beside a trainer (fedcaf/trainer.hpp),
// and what only the client's round asks of it (client_model, through
// dynamic_cast): its "update" is its group's partial sum, which goes up as
// it settles, read from memory the relay's children's side summed it in,
// over a download it paces and model bytes it fetches again from its
// parent. Every default is what a plain trainer does, so a trainer (or a
// test's) overrides only what it paces. See docs/design.md, "Trees of
// aggregators".
// Thread-safety: as the trainer's; `wake` and `ask` may be called from any
// thread.

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <span>

#include "fedcaf/error.hpp"
#include "fedcaf/manifest.hpp"
#include "messages/codec.hpp"
#include "protocol/relay_model.hpp"

namespace fedcaf {

class relay_hooks {
public:
  virtual ~relay_hooks() = default;

  /// True iff, after train(), the update is the sum of the children's
  /// weighted updates (Offer.partialSum), of weight sample_count().
  virtual bool partial_sum() const { return false; }
  /// True iff, after train(), the partial sum is int32 sums on the
  /// parent's exact grid (Offer.gridSums), not floats.
  virtual bool grid_sums() const { return false; }
  /// In a grid_sums() upload: true iff the chunk at model byte
  /// `model_offset` carries float32 sums instead (Chunk.floatSums: a
  /// streaming relay's position that could not settle on the grid).
  virtual bool float_sums(uint64_t model_offset) const {
    (void)model_offset;
    return false;
  }
  /// The parent's chunk size for the round about to begin
  /// (RoundStart.chunkBytes) and its terms as its latest Welcome gave them
  /// (a parent restarted since may be another build), told before the
  /// trainer's begin_round().
  virtual void parent_round(uint64_t chunk_bytes,
                            const msg::client_terms& terms) {
    (void)chunk_bytes;
    (void)terms;
  }

  /// A relay's: its children's evaluation of the model of the round just
  /// trained (they evaluated it before training), taken once; nullopt:
  /// none. It goes up as the relay's own evaluation.
  virtual std::optional<relay_evaluation> children_evaluation() {
    return std::nullopt;
  }

  /// The memory the upload reads after train(), read only, iff not the
  /// trainer's parameters() (a relay's sum, in its children's side's
  /// memory); nullopt: parameters().
  virtual std::optional<const_model_view> sums() const { return std::nullopt; }

  /// How many bytes of the update, from the start, are final and may go up
  /// now: a streaming relay's train() returns as its children's sum starts
  /// to settle, and its upload sends each chunk once this covers it.
  virtual uint64_t ready_bytes() const {
    return std::numeric_limits<uint64_t>::max();
  }

  /// Hands over `wake`, to call (from any thread) when ready_bytes() has
  /// grown, or may_fetch() may hold where it did not.
  virtual void on_ready(std::function<void()> wake) { (void)wake; }

  /// May the download fetch model bytes [model_offset, + bytes) now? A
  /// window-mode relay's download goes no further than its cache ahead of
  /// its slowest child.
  virtual bool may_fetch(uint64_t model_offset, uint64_t bytes) {
    (void)model_offset;
    (void)bytes;
    return true;
  }

  /// Hands over `ask`, to call (from any thread) for model bytes [offset,
  /// + bytes) of the server's model of the round again; they come back by
  /// refetched().
  virtual void on_refetch(std::function<void(uint64_t, uint64_t)> ask) {
    (void)ask;
  }

  /// Bytes [model_offset, + bytes.size()) of the round's model, fetched
  /// again (on_refetch); empty: they could not be.
  virtual void refetched(uint64_t model_offset,
                         std::span<const std::byte> bytes) {
    (void)model_offset;
    (void)bytes;
  }

  /// Model bytes [model_offset, + bytes) are about to be uploaded (again):
  /// bytes given back are brought in. Returns an error iff they cannot be.
  virtual result<void> stage(uint64_t model_offset, uint64_t bytes) {
    (void)model_offset;
    (void)bytes;
    return {};
  }
};

} // namespace fedcaf
