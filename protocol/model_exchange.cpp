#include "protocol/model_exchange.hpp"

#include <cstring>

#include <span>
#include <utility>

#include "protocol/chunk_encoding.hpp"

namespace fedcaf {

model_exchange::model_exchange(snapshot_ptr initial, exchange_terms terms)
    : terms_(std::move(terms)) {
  install(std::move(initial));
}

void model_exchange::install(snapshot_ptr model) {
  snapshot_ = std::move(model);
  view_ = snapshot_->view();
  auto p = chunk_plan::make(snapshot_->layout, terms_.chunk_bytes);
  plan_.emplace(std::move(*p)); // the aggregator checked the same plan
}

msg::round_start model_exchange::announce(uint32_t round,
                                          const msg::metrics& previous,
                                          bool resend) const {
  return msg::round_start{round,
                          snapshot_->version,
                          snapshot_->layout,
                          terms_.chunk_bytes,
                          terms_.window,
                          previous,
                          resend,
                          false,
                          terms_.secure_aggregation};
}

result<served_chunk> model_exchange::serve(const msg::fetch& req,
                                           const snapshot_ptr& pinned,
                                           const chunk_plan* shard) {
  const auto& model = pinned ? pinned : snapshot_;
  if (req.model_version != model->version)
    return error{errc::wrong_round, "model version " +
                                        std::to_string(req.model_version) +
                                        " is not served; current is " +
                                        std::to_string(model->version)};
  if (model->bytes.size() != model->layout.total_bytes())
    // Its memory went on (window and disk modes: a round's sum is written
    // into it, then published as the next model).
    return error{errc::wrong_round, "model version " +
                                        std::to_string(req.model_version) +
                                        " is no longer served"};
  const auto& plan = shard ? *shard : *plan_;
  if (req.sequence >= plan.chunk_count())
    return error{errc::out_of_range, "chunk " + std::to_string(req.sequence) +
                                         " of " +
                                         std::to_string(plan.chunk_count())};
  const auto& e = plan.extent(req.sequence);
  if (shard)
    return serve_shard(req, *model, *shard);
  msg::chunk_header h{0, req.round, req.sequence, e.tensor_index,
                      e.tensor_offset};
  served_chunk out;
  out.wire_bytes = out.model_bytes = e.bytes;
  out.last = req.sequence + 1 == plan.chunk_count();
  if (terms_.compression.down) { // the model's float32 values, encoded
    std::span<const float> values{
        reinterpret_cast<const float*>(model->bytes.data() + e.model_offset),
        e.bytes / 4};
    out.frame = encode_compressed_chunk(h, terms_.compression, values, encoded_,
                                        out.wire_bytes);
  } else {
    auto view = model == snapshot_ ? view_ : model->view();
    out.frame = msg::encode_chunk_gathered(
        h, e.bytes, [this, &req, &view](const msg::chunk_append& append) {
          plan_->for_each_source(req.sequence, view, append);
        });
  }
  model->bytes.release(e.model_offset, e.bytes); // file-backed only
  return out;
}

served_chunk model_exchange::serve_shard(const msg::fetch& req,
                                         const model_snapshot& model,
                                         const chunk_plan& shard) {
  const auto& e = shard.extent(req.sequence);
  msg::chunk_header h{0, req.round, req.sequence, e.tensor_index,
                      e.tensor_offset};
  served_chunk out;
  out.wire_bytes = out.model_bytes = e.bytes;
  out.last = req.sequence + 1 == shard.chunk_count();
  auto gather = [&](const msg::chunk_append& append) {
    shard.for_each_model_run(
        req.sequence, [&](uint64_t at_model, uint64_t n, uint64_t) {
          append({model.bytes.data() + at_model, n});
          model.bytes.release(at_model, n); // file-backed only
        });
  };
  out.frame = msg::encode_chunk_gathered(h, e.bytes, gather);
  return out;
}

std::optional<std::pair<uint64_t, uint64_t>>
model_exchange::chunk_range(uint64_t seq) const {
  if (seq >= plan_->chunk_count())
    return std::nullopt;
  const auto& e = plan_->extent(seq);
  return std::pair{e.model_offset, e.bytes};
}

std::optional<error>
model_exchange::overwritten_refusal(const std::string& id,
                                    const msg::fetch& req,
                                    const chunk_plan* shard) const {
  if (shard && req.sequence >= shard->chunk_count())
    return std::nullopt; // refused as out of range when served
  auto range =
      chunk_range(shard ? shard->position(req.sequence) : req.sequence);
  if (!range || req.model_version != overwritten_.first ||
      range->first >= overwritten_.second)
    return std::nullopt;
  return error{errc::not_in_round,
               "chunk " + std::to_string(req.sequence) + " of model version " +
                   std::to_string(req.model_version) +
                   " holds the round's sums already (every participant has "
                   "it): the round goes on without " +
                   id};
}

result<void> model_exchange::check_offer(const std::string& id,
                                         const msg::offer& o) const {
  if (o.client_id != id)
    return error{errc::not_authorized,
                 id + " offered an update as " + o.client_id};
  const auto& z = terms_.compression;
  // A relay's partial sum is sent whole: the children's uploads to it are
  // compressed, its sum of them is not (delta coding is of one update
  // against the model it started from).
  auto expected = z.up && !o.partial_sum ? z.method : compression_method::none;
  if (o.encoding == static_cast<uint8_t>(expected))
    return {};
  return error{errc::manifest_mismatch,
               id + " offered an update encoded as " +
                   (o.encoding <= static_cast<uint8_t>(compression_method::zfp)
                        ? to_string(static_cast<compression_method>(o.encoding))
                        : std::to_string(o.encoding)) +
                   "; this server takes " + to_string(expected) +
                   (o.partial_sum
                        ? " for a partial sum (a relay's, sent whole)"
                        : " (client_configs.comm_configs.compression)")};
}

} // namespace fedcaf
