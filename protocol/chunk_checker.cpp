#include "protocol/chunk_checker.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "fedcaf/delta_codec.hpp"
#include "fedcaf/log.hpp"
#include "fedcaf/secagg_masking.hpp"
#include "fedcaf/update_check.hpp"

namespace fedcaf {

chunk_checker::chunk_checker(const manifest& layout, const chunk_plan& plan,
                             const aggregation_plan& p, const rule_config& rule,
                             const compression_config& z)
    : layout_(layout), plan_(plan), type_(*common_floating_dtype(layout)),
      max_contributors_(p.max_contributors), secure_(p.secure),
      in_place_(p.in_place), max_update_norm_(rule.max_update_norm),
      max_update_ratio_(rule.max_update_ratio),
      update_norm_floor_(rule.update_norm_floor),
      max_norm_growth_(rule.max_norm_growth), bound_(max_update_norm_),
      norm_bound_(rule.norm_bound), compression_(z),
      max_payload_(plan.chunk_bytes()) {
  if (z.up)
    max_payload_ =
        std::max(max_payload_, encoded_bound(z, plan.chunk_bytes() / 4 + 1));
  // Checked before (spawn_aggregator): a pattern matching nothing fails.
  auto kept = kept_tensors(layout, rule.tensor_rules);
  kept_ = kept ? std::move(*kept) : std::vector<bool>(layout.tensors.size());
  any_kept_ = std::find(kept_.begin(), kept_.end(), true) != kept_.end();
}

double chunk_checker::max_abs(double weight) const {
  auto terms = static_cast<double>(max_contributors_) + 1;
  return static_cast<double>(std::numeric_limits<float>::max()) /
         (terms * std::max(weight, 1.0));
}

void chunk_checker::measure_global(const byte_buffer& global) {
  measure_begin();
  for (uint64_t seq = 0; seq < plan_.chunk_count(); ++seq) {
    const auto& e = plan_.extent(seq);
    measure_position(seq, global.bytes());
    global.release(e.model_offset, e.bytes);
  }
  measure_end();
}

void chunk_checker::measure_position(uint64_t seq,
                                     std::span<const std::byte> global) {
  squares_ += position_squares(seq, global);
}

double
chunk_checker::position_squares(uint64_t seq,
                                std::span<const std::byte> global) const {
  if (max_update_ratio_ > 0 && !secure_)
    return squared_norm(layout_, plan_, seq, global);
  return 0;
}

void chunk_checker::measure_end() {
  bound_ = max_update_norm_;
  if (max_update_ratio_ <= 0 || secure_)
    return;
  global_norm_ = std::sqrt(squares_);
  if (anchor_norm_ < 0 || max_norm_growth_ <= 0)
    anchor_norm_ = global_norm_;
  else
    anchor_norm_ =
        std::min(global_norm_,
                 max_norm_growth_ * std::max(anchor_norm_, update_norm_floor_));
  auto ratio_bound =
      max_update_ratio_ * std::max(anchor_norm_, update_norm_floor_);
  bound_ = bound_ > 0 ? std::min(bound_, ratio_bound) : ratio_bound;
}

std::string chunk_checker::distance_line(const upload_record& s) const {
  char line[192];
  auto d = std::sqrt(s.distance_squared);
  std::snprintf(line, sizeof line,
                "update of round %u at distance %.6g from the global model "
                "(%.4g x its norm %.6g, anchored at %.6g; bound %.6g)",
                s.round, d, d / std::max(anchor_norm_, update_norm_floor_),
                global_norm_, anchor_norm_, bound_);
  return s.client_id + ": " + line;
}

double chunk_checker::scale_for(const std::string& client_id,
                                double declared_norm) const {
  if (norm_bound_ <= 0 || declared_norm <= norm_bound_)
    return 1;
  log_line(log_level::debug, "aggregator",
           client_id + " declared an update of norm " +
               std::to_string(declared_norm) + ", scaled to norm_bound " +
               std::to_string(norm_bound_));
  return norm_bound_ / declared_norm;
}

result<msg::chunk_view>
chunk_checker::expand(const upload_record& s, const msg::chunk_view& c,
                      std::span<const std::byte> global) {
  if (!compression_.up || s.summed) // a relay's sum comes whole
    return c;
  auto seq = c.header.sequence;
  FEDCAF_REQUIRE(!s.closed, errc::unknown_stream, c.header.stream_id, "closed");
  FEDCAF_REQUIRE(seq == s.next_sequence && seq < plan_.chunk_count(),
                 errc::bad_sequence, seq, s.next_sequence);
  const auto& e = plan_.extent(seq);
  decoded_.resize(e.bytes / 4);
  if (auto ok = decode_delta(compression_, c.bytes,
                             global.subspan(e.model_offset, e.bytes), decoded_);
      !ok)
    return error{ok.err().code, "chunk " + std::to_string(seq) + " of " +
                                    s.client_id + ": " + ok.err().message};
  auto out = c;
  out.bytes = std::as_bytes(std::span{decoded_});
  return out;
}

result<void> chunk_checker::placed(const msg::chunk_view& c) const {
  const auto& h = c.header;
  return plan_.check(h.sequence, h.tensor_index, h.byte_offset, c.bytes.size());
}

result<checked_chunk> chunk_checker::inspect(const upload_record& s,
                                             const msg::chunk_view& c,
                                             std::span<const std::byte> global,
                                             uint64_t overwritten_below,
                                             bool measured,
                                             work_split split) const {
  if (secure_) { // masked: uniform in Z_2^32, or no masked update
    if (!secagg::looks_masked(c.bytes))
      return error{errc::poisoned_update,
                   "chunk " + std::to_string(c.header.sequence) +
                       " is no masked update: its words are not spread over "
                       "Z_2^32 (zeros, or values left unmasked)"};
    return checked_chunk{};
  }
  auto seq = c.header.sequence;
  // A relay's partial sum is folded as it is (scale 1); it is measured
  // against W g, within W times the bound: sum_i w_i (x_i - g) is at most
  // sum_i w_i |x_i - g| from 0, each update of its group checked at the
  // relay (equal weights: w_i = 1, W the clients summed).
  auto k = s.summed ? s.weight : 1.0;
  auto most = bound_of(s);
  auto declared = norm_bound_ > 0;
  bool measure = !(bound_ * k <= 0 && !declared) && measured;
  if (measure && seq >= overwritten_below) { // both in one pass
    auto d =
        checked_distance(layout_, plan_, seq, c.bytes, global, most, k, split);
    if (!d)
      return d.err();
    return judge(s, c, *d);
  }
  if (auto ok = check_finite(layout_, plan_, seq, c.bytes, most); !ok)
    return ok.err();
  if (!measure)
    return checked_chunk{};
  auto checked = distance(s.client_id, c, global, overwritten_below, k, split);
  if (!checked)
    return checked;
  return judge(s, c, checked->distance_squared);
}

error chunk_checker::fold_refusal(const upload_record& s,
                                  const msg::chunk_view& c,
                                  error refused) const {
  auto bounds =
      check_finite(layout_, plan_, c.header.sequence, c.bytes, bound_of(s));
  return bounds ? refused : bounds.err();
}

bool chunk_checker::measured_in_fold(const upload_record& s,
                                     const msg::chunk_view& c) const {
  return !secure_ && norm_bound_ <= 0 && s.scale >= 1 &&
         !(any_kept_ && touches_kept(layout_, plan_, c.header.sequence, kept_));
}

result<checked_chunk> chunk_checker::judge(const upload_record& s,
                                           const msg::chunk_view& c,
                                           double distance_squared,
                                           bool grid) const {
  auto seq = c.header.sequence;
  auto bound = bound_ * (s.summed ? s.weight : 1.0);
  auto declared = norm_bound_ > 0;
  checked_chunk checked{distance_squared, c.checksum, grid};
  auto so_far = s.distance_squared + checked.distance_squared;
  if (bound > 0 && so_far > bound * bound)
    return error{errc::poisoned_update, bound_exceeded(so_far, seq)};
  // norm_bound scales by what the client declared: more than that is a
  // lie (both sides sum the same float32 differences in double).
  auto most = s.declared_norm * (1 + 1e-6) + 1e-12;
  if (declared && so_far > most * most)
    return error{errc::poisoned_update,
                 "its distance from the global model passed the update "
                 "norm it declared (" +
                     std::to_string(s.declared_norm) + ") at chunk " +
                     std::to_string(seq)};
  return checked;
}

result<checked_chunk> chunk_checker::distance(const std::string& id,
                                              const msg::chunk_view& c,
                                              std::span<const std::byte> global,
                                              uint64_t overwritten_below,
                                              double k,
                                              work_split split) const {
  auto seq = c.header.sequence;
  checked_chunk out{0, c.checksum};
  if (seq >= overwritten_below) {
    out.distance_squared =
        squared_distance(layout_, plan_, seq, c.bytes, global, k, split);
    return out;
  }
  auto first = recorded(id, c, false); // g there is gone
  if (!first)
    return first.err();
  out.distance_squared = *first;
  return out;
}

result<double> chunk_checker::recorded(const std::string& id,
                                       const msg::chunk_view& c,
                                       bool grid) const {
  auto seq = c.header.sequence;
  auto it = first_pass_.find(id);
  if (it == first_pass_.end() || seq >= it->second.size())
    return error{errc::internal, "no record of chunk " + std::to_string(seq) +
                                     " of " + id +
                                     ", whose position was averaged"};
  const auto& first = it->second[seq];
  if (first.checksum != c.checksum || first.grid != grid)
    return error{errc::poisoned_update,
                 "chunk " + std::to_string(seq) +
                     " differs from the one it sent before the round's "
                     "updates were collected again" +
                     (first.grid != grid ? " (read as other sums)" : "")};
  return first.distance_squared;
}

result<std::optional<double>>
chunk_checker::first_pass(const std::string& id, const msg::chunk_view& c,
                          uint64_t overwritten_below, bool grid) const {
  if (c.header.sequence >= overwritten_below || !in_place_ || bound_ <= 0)
    return std::optional<double>{};
  auto first = recorded(id, c, grid);
  if (!first)
    return first.err();
  return std::optional<double>{*first};
}

msg::chunk_view chunk_checker::bounded(const upload_record& s,
                                       const msg::chunk_view& c,
                                       std::span<const std::byte> global) {
  auto seq = c.header.sequence;
  bool keep = any_kept_ && touches_kept(layout_, plan_, seq, kept_);
  if (s.scale >= 1 && !keep)
    return c;
  const auto& e = plan_.extent(seq);
  if (s.scale >= 1) {
    scaled_.assign(c.bytes.begin(), c.bytes.end());
  } else {
    auto n = e.bytes / dtype_bytes(type_);
    scaled_.resize(e.bytes);
    const auto* g = global.data() + e.model_offset;
    for (size_t i = 0; i < n; ++i) {
      auto old = load_element(type_, g, i);
      auto x = load_element(type_, c.bytes.data(), i);
      store_element(type_, scaled_.data(), i,
                    static_cast<float>(old + s.scale * (x - old)));
    }
  }
  if (keep)
    keep_kept(layout_, plan_, seq, kept_, scaled_, global);
  auto out = c;
  out.bytes = scaled_;
  return out;
}

std::string chunk_checker::bound_exceeded(double so_far, uint64_t seq) const {
  char what[160];
  std::snprintf(what, sizeof what,
                "its distance from the global model (%.4g so far) passed the "
                "update bound %.4g at chunk %llu",
                std::sqrt(so_far), bound_,
                static_cast<unsigned long long>(seq));
  return std::string{what} +
         (bound_ == max_update_norm_ ? " (aggregator_kwargs.max_update_norm)"
          : anchor_norm_ < global_norm_
              ? " (aggregator_kwargs.max_update_ratio x the global "
                "model's norm as it may have grown, by "
                "max_norm_growth a round)"
              : " (aggregator_kwargs.max_update_ratio x the global "
                "model's norm)");
}

void chunk_checker::record(const std::string& client_id, uint64_t seq,
                           const checked_chunk& c) {
  if (!in_place_ || bound_ <= 0)
    return;
  auto& record = first_pass_[client_id];
  if (record.size() <= seq)
    record.resize(seq + 1);
  record[seq] = c;
}

} // namespace fedcaf
