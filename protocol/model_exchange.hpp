#pragma once
// The terms of a round's transfers, without CAF: which model the server
// serves, in which chunks and encoding (what a RoundStart announces), the
// chunks a Fetch asks for, and the encoding an Offer must name.
// Thread-safety: none; owned by the server actor.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "fedcaf/chunk_plan.hpp"
#include "fedcaf/compression.hpp"
#include "fedcaf/error.hpp"
#include "fedcaf/model_snapshot.hpp"
#include "messages/codec.hpp"

namespace fedcaf {

/// What every round of a run announces alongside its model.
struct exchange_terms {
  uint64_t chunk_bytes = 1 << 20; ///< the plan both ends derive
  uint32_t window = 4;
  /// Downloads are served encoded iff compression.down; offers must name
  /// compression.method iff compression.up (else none).
  compression_config compression;
  bool secure_aggregation = false;
};

/// One chunk answered: the frame and the bytes it stands for.
struct served_chunk {
  msg::frame frame;
  uint64_t wire_bytes = 0;  ///< payload bytes sent (encoded, if so)
  uint64_t model_bytes = 0; ///< model bytes those carry, decoded
  bool last = false;        ///< the plan's last chunk
};

class model_exchange {
public:
  /// Serves `initial`. REQUIRES: chunk_plan::make accepts its layout and
  /// terms.chunk_bytes (the caller checked the configuration).
  model_exchange(snapshot_ptr initial, exchange_terms terms);

  /// Serves `model` from now on (the chunk plan of its layout).
  /// REQUIRES: as for the constructor.
  void install(snapshot_ptr model);
  /// The model served now.
  const snapshot_ptr& model() const { return snapshot_; }
  /// The size of the model served now.
  uint64_t model_bytes() const { return snapshot_->layout.total_bytes(); }
  /// The chunks it is served in.
  uint64_t chunk_count() const { return plan_->chunk_count(); }

  /// The model bytes [offset, + bytes) chunk `seq` of the model served now
  /// carries; nullopt iff `seq` is past its plan.
  std::optional<std::pair<uint64_t, uint64_t>> chunk_range(uint64_t seq) const;

  /// Window and disk modes: the model of `version` holds the round's sums
  /// (a server's new mean, a relay's running sum) up to byte `bytes`.
  void overwritten(uint64_t version, uint64_t bytes) {
    overwritten_ = {version, bytes};
  }
  /// The refusal of client `id`'s fetch `req` iff the chunk it asks for is
  /// overwritten by the round's sums: a participant downloaded it before it
  /// delivered its own chunk there, and anybody else must not read a
  /// relay's group's sum (or a mix of two models); nullopt: it may be
  /// served.
  /// A rank's fetch (`shard`: its plan) names a chunk of its shard.
  std::optional<error>
  overwritten_refusal(const std::string& id, const msg::fetch& req,
                      const chunk_plan* shard = nullptr) const;

  /// Returns the announcement of round `round` of the model served now,
  /// carrying `previous` (the last evaluated figures); `resend` iff the
  /// round's updates are collected again.
  msg::round_start announce(uint32_t round, const msg::metrics& previous,
                            bool resend) const;

  /// Answers `req` from `pinned` (a model a client downloads while a newer
  /// one is served) or, iff null, from the model served now. Fails
  /// (wrong_round) iff req names another version or the model's memory went
  /// on to be the next one (its bytes moved out), (out_of_range) iff its
  /// sequence is past the plan. File-backed models give the chunk's pages
  /// back. A rank of a sharded client (`shard`: its plan) is served chunk
  /// `req.sequence` of its shard.
  result<served_chunk> serve(const msg::fetch& req, const snapshot_ptr& pinned,
                             const chunk_plan* shard = nullptr);

  /// Returns ok iff client `id` may route offer `o`: it offers as itself,
  /// in the encoding the terms ask for; else the refusal.
  result<void> check_offer(const std::string& id, const msg::offer& o) const;

private:
  /// Chunk req.sequence of a rank's shard (of `shard`) of `model`.
  served_chunk serve_shard(const msg::fetch& req, const model_snapshot& model,
                           const chunk_plan& shard);

  exchange_terms terms_;
  snapshot_ptr snapshot_;
  std::optional<chunk_plan> plan_;
  /// The model version the aggregator sums into in place, and how far.
  std::pair<uint64_t, uint64_t> overwritten_{0, 0};
  const_model_view view_;          ///< of snapshot_, for serving chunks
  std::vector<std::byte> encoded_; ///< compressed zfp downloads: a chunk's
};

} // namespace fedcaf
