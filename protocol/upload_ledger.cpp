#include "protocol/upload_ledger.hpp"

#include <algorithm>

namespace fedcaf {

uint64_t upload_ledger::open(std::string client_id, uint32_t round,
                             double weight, double declared_norm, double scale,
                             time_point now) {
  auto stream_id = next_stream_id_++;
  auto& s = streams_[stream_id];
  s.client_id = std::move(client_id);
  s.round = round;
  s.weight = weight;
  s.declared_norm = declared_norm;
  s.scale = scale;
  s.last_progress = now;
  s.rate = send_rate{rate_window_};
  sync_rate(s, now);
  return stream_id;
}

std::optional<uint64_t> upload_ledger::find(const std::string& client_id,
                                            uint32_t round) const {
  for (const auto& [sid, s] : streams_)
    if (s.client_id == client_id && s.round == round)
      return sid;
  return std::nullopt;
}

upload_record* upload_ledger::find(uint64_t stream_id) {
  auto it = streams_.find(stream_id);
  return it == streams_.end() ? nullptr : &it->second;
}

result<upload_record*> upload_ledger::owned(const std::string& sender,
                                            uint64_t stream_id) {
  auto* s = find(stream_id);
  if (!s)
    return error{errc::unknown_stream,
                 "stream " + std::to_string(stream_id) + " of " + sender};
  if (s->client_id != sender)
    return error{errc::not_authorized,
                 sender + " wrote to stream " + std::to_string(stream_id) +
                     ", which " + s->client_id + " opened"};
  return s;
}

result<void> upload_ledger::check_next(const upload_record& s,
                                       const msg::chunk_header& h) {
  if (s.closed) // its round was given up, or its end came already
    return error{errc::unknown_stream,
                 "stream " + std::to_string(h.stream_id) + " of " +
                     s.client_id +
                     " is closed: its round ended, or its "
                     "update is complete"};
  FEDCAF_REQUIRE(h.round == s.round, errc::wrong_round, h.round, s.round);
  FEDCAF_REQUIRE(h.sequence == s.next_sequence, errc::bad_sequence, h.sequence,
                 s.next_sequence);
  return {};
}

void upload_ledger::folded(upload_record& s, uint64_t bytes,
                           double distance_squared, time_point now) {
  ++s.next_sequence;
  s.bytes += bytes;
  s.distance_squared += distance_squared;
  s.last_progress = now;
  s.rate.moved(bytes, now);
  sync_rate(s, now);
}

result<void> upload_ledger::owes_credit(const upload_record& s,
                                        uint64_t stream_id, uint64_t sequence) {
  if (s.closed || sequence >= s.next_sequence)
    return error{errc::unknown_stream,
                 "no credit owed for chunk " + std::to_string(sequence) +
                     " of stream " + std::to_string(stream_id)};
  return {};
}

void upload_ledger::release(uint64_t stream_id, time_point now) {
  if (auto* s = find(stream_id)) {
    --s->held;
    s->last_progress = now;
    sync_rate(*s, now);
  }
}

bool upload_ledger::could_send(const upload_record& s) const {
  if (s.closed)
    return false;
  return s.next_sequence < chunk_count_ ? s.held < window_ : s.held == 0;
}

std::vector<uint64_t> upload_ledger::silent(time_point now,
                                            duration idle) const {
  std::vector<uint64_t> out;
  for (const auto& [sid, s] : streams_)
    if (could_send(s) && now - s.last_progress > idle)
      out.push_back(sid);
  return out;
}

std::vector<std::pair<uint64_t, double>>
upload_ledger::slow(time_point now, double min_bytes_per_s) const {
  std::vector<std::pair<uint64_t, double>> out;
  for (const auto& [sid, s] : streams_) {
    if (s.closed)
      continue;
    if (auto r = s.rate.rate(now); r && *r < min_bytes_per_s)
      out.emplace_back(sid, *r);
  }
  return out;
}

std::vector<std::pair<uint64_t, error>>
upload_ledger::stalled(time_point now, duration idle,
                       double min_bytes_per_s) const {
  using std::chrono::duration_cast;
  using std::chrono::milliseconds;
  std::vector<std::pair<uint64_t, error>> out;
  if (idle > duration{})
    for (auto sid : silent(now, idle))
      out.emplace_back(
          sid,
          error{errc::timeout,
                "no chunk for " +
                    std::to_string(duration_cast<milliseconds>(idle).count()) +
                    " ms (idle_timeout_s + reconnect_grace_s) while it "
                    "could send"});
  for (auto [sid, rate] : slow(now, min_bytes_per_s))
    if (std::none_of(out.begin(), out.end(),
                     [sid = sid](const auto& x) { return x.first == sid; }))
      out.emplace_back(
          sid,
          error{errc::timeout,
                "too slow: " + std::to_string(static_cast<uint64_t>(rate)) +
                    " bytes/s over the last " +
                    std::to_string(
                        duration_cast<milliseconds>(rate_window_).count()) +
                    " ms it could send, below stream_configs."
                    "min_rate_bytes_per_s (" +
                    std::to_string(static_cast<uint64_t>(min_bytes_per_s)) +
                    ")"});
  return out;
}

upload_ledger::overdue
upload_ledger::past_deadline(uint32_t round,
                             const std::vector<std::string>& ids,
                             uint64_t settled) const {
  overdue o;
  for (const auto& id : ids) {
    auto sid = find(id, round);
    if (!sid)
      o.without_stream.push_back(id);
    else if (const auto& s = streams_.at(*sid);
             !s.closed && s.next_sequence <= settled)
      o.cut.push_back(*sid);
  }
  return o;
}

result<upload_ledger::ending> upload_ledger::end(upload_record& s,
                                                 uint64_t stream_id,
                                                 uint64_t declared_chunks) {
  if (s.rejected)
    return error{errc::poisoned_update, "stream " + std::to_string(stream_id) +
                                            " of " + s.client_id +
                                            " was rejected"};
  if (s.closed) // the answer was lost with a connection
    return ending::repeated;
  if (s.next_sequence != chunk_count_ || declared_chunks != chunk_count_)
    return error{errc::bad_sequence,
                 "stream " + std::to_string(stream_id) + " ended after " +
                     std::to_string(s.next_sequence) + " of " +
                     std::to_string(chunk_count_) + " chunks"};
  s.closed = true;
  return ending::closed;
}

std::optional<uint64_t> upload_ledger::abandon(const std::string& client_id,
                                               uint32_t round) {
  for (auto& [sid, s] : streams_) {
    if (s.client_id != client_id || s.round != round || s.closed)
      continue;
    s.closed = true;
    return s.next_sequence;
  }
  return std::nullopt;
}

std::vector<std::string> upload_ledger::in_sum() const {
  std::vector<std::string> ids;
  for (const auto& [sid, s] : streams_)
    if (s.closed && !s.rejected)
      ids.push_back(s.client_id);
  return ids;
}

uint64_t upload_ledger::open_count() const {
  return std::count_if(streams_.begin(), streams_.end(),
                       [](const auto& kv) { return !kv.second.closed; });
}

uint64_t upload_ledger::updates() const {
  return std::count_if(streams_.begin(), streams_.end(), [](const auto& kv) {
    return !kv.second.rejected || kv.second.next_sequence > 0;
  });
}

std::vector<std::pair<std::string, uint64_t>>
upload_ledger::by_client(const std::map<uint64_t, uint64_t>& by_stream) const {
  std::map<std::string, uint64_t> per_client;
  for (auto [sid, values] : by_stream)
    if (auto it = streams_.find(sid); it != streams_.end())
      per_client[it->second.client_id] += values;
  return {per_client.begin(), per_client.end()};
}

} // namespace fedcaf
