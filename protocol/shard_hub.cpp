#include "protocol/shard_hub.hpp"

#include <cmath>
#include <cstring>

namespace fedcaf {

namespace {

msg::frame refusal(errc code, const std::string& why) {
  return msg::encode(error{code, why});
}

/// What a rank's chunk or credit request is answered once its client's
/// update was refused (`why`): its stream is gone (a fedcaf client then
/// waits for the server's word: the refusal it is told, or the next round).
msg::frame stream_gone(const msg::frame& why) {
  auto e = msg::decode<msg::credit>(why);
  return refusal(errc::unknown_stream,
                 "the client's update was refused: " +
                     (e ? std::string{"?"} : e.err().message));
}

std::string rank_name(const std::string& id, uint32_t rank) {
  return "rank " + std::to_string(rank) + " of " + id;
}

/// The update id of the logical client: one number for the ranks' numbers
/// (0 iff one of them is 0: not told).
uint64_t joined_update_id(const std::vector<uint64_t>& ids) {
  uint64_t h = 0x9e3779b97f4a7c15ull;
  for (auto id : ids) {
    if (id == 0)
      return 0;
    h = (h ^ id) * 0x100000001b3ull;
    h ^= h >> 29;
  }
  return h == 0 ? 1 : h;
}

} // namespace

shard_hub::shard_hub(manifest layout, uint64_t chunk_bytes, uint32_t max_ranks)
    : layout_(std::move(layout)), names_(index_tensors(layout_)),
      whole_(*chunk_plan::make(layout_, chunk_bytes)), max_ranks_(max_ranks) {}

// -- registration --------------------------------------------------------------

result<void> shard_hub::check_hello(const msg::hello& h,
                                    const std::set<uint32_t>& present) const {
  const auto& spec = h.shard;
  if (spec.ranks > max_ranks_)
    return error{errc::not_authorized,
                 h.client_id + " registers " + std::to_string(spec.ranks) +
                     " ranks; this server takes at most " +
                     std::to_string(max_ranks_) +
                     " (server_configs.max_shard_ranks)"};
  auto slices = slices_of(layout_, names_, spec);
  if (!slices)
    return error{slices.err().code, rank_name(h.client_id, spec.rank) + ": " +
                                        slices.err().message};
  auto it = clients_.find(h.client_id);
  if (it == clients_.end() || present.empty())
    return {}; // its first rank: the client starts (over)
  const auto& c = it->second;
  if (c.ranks != spec.ranks)
    return error{errc::not_authorized, h.client_id + " is registered with " +
                                           std::to_string(c.ranks) +
                                           " ranks; this Hello says " +
                                           std::to_string(spec.ranks)};
  if (present.count(spec.rank)) { // it resumes: it holds what it held
    if (c.slices[spec.rank] != *slices)
      return error{errc::not_authorized,
                   rank_name(h.client_id, spec.rank) +
                       " came back with other slices than it registered "
                       "with"};
    return {};
  }
  if (present.size() + 1 < spec.ranks) {
    // A new rank beside those present: together no more than the model.
    uint64_t held = shard_bytes(*slices);
    for (auto r : present)
      held += c.held[r];
    if (held > layout_.total_bytes())
      return error{errc::manifest_mismatch,
                   h.client_id +
                       ": shard slices overlap: its ranks would "
                       "hold " +
                       std::to_string(held) + " bytes of a model of " +
                       std::to_string(layout_.total_bytes())};
    return {};
  }
  std::vector<shard_slices> all(spec.ranks);
  for (auto r : present)
    all[r] = c.slices[r];
  all[spec.rank] = *slices;
  if (auto covered = check_cover(layout_, all); !covered)
    return error{covered.err().code,
                 h.client_id + ": " + covered.err().message};
  return {};
}

bool shard_hub::registered(const msg::hello& h) {
  const auto& spec = h.shard;
  auto& c = clients_[h.client_id];
  if (c.ranks != spec.ranks || c.present.empty()) { // it starts (over)
    c = client{};
    c.ranks = spec.ranks;
    c.slices.resize(spec.ranks);
    c.plans.resize(spec.ranks);
    c.held.resize(spec.ranks);
  }
  if (!c.present.count(spec.rank)) { // not a resume: its plan anew
    auto slices = slices_of(layout_, names_, spec); // check_hello passed
    c.held[spec.rank] = shard_bytes(*slices);
    c.plans[spec.rank] = std::make_shared<const chunk_plan>(
        *chunk_plan::make_shard(layout_, whole_.chunk_bytes(), *slices));
    c.slices[spec.rank] = std::move(*slices);
    c.present.insert(spec.rank);
  }
  if (c.joined || c.present.size() < c.ranks)
    return false;
  c.joined = true;
  return true;
}

uint32_t shard_hub::rank_window(const std::string& id, uint32_t window) const {
  auto it = clients_.find(id);
  uint32_t ranks = it == clients_.end() ? 1 : std::max(1u, it->second.ranks);
  return std::max(1u, window / ranks);
}

bool shard_hub::dropped(const std::string& id, uint32_t rank) {
  auto it = clients_.find(id);
  if (it == clients_.end())
    return false;
  auto& c = it->second;
  c.present.erase(rank);
  if (!c.joined)
    return false;
  c.joined = false;
  c.upload.reset();
  return true;
}

std::shared_ptr<const chunk_plan> shard_hub::plan_of(const std::string& id,
                                                     uint32_t rank) const {
  auto it = clients_.find(id);
  if (it == clients_.end() || rank >= it->second.plans.size())
    return nullptr;
  return it->second.plans[rank];
}

// -- uploads -------------------------------------------------------------------

shard_hub::offer_step shard_hub::offer(const std::string& id, uint32_t rank,
                                       const msg::offer& o) {
  offer_step step;
  auto& c = clients_.at(id);
  const auto& plan = *c.plans.at(rank);
  auto who = rank_name(id, rank);
  if (o.partial_sum) {
    step.answer = refusal(errc::not_authorized,
                          who + ": a rank cannot offer a partial sum");
    return step;
  }
  if (o.manifest_digest != digest(layout_) ||
      o.total_bytes != plan.total_bytes() ||
      o.chunk_count != plan.chunk_count()) {
    step.answer = refusal(errc::manifest_mismatch,
                          "offer of " + who +
                              " does not match its shard of the global "
                              "model's layout (" +
                              std::to_string(plan.chunk_count()) + " chunks, " +
                              std::to_string(plan.total_bytes()) + " bytes)");
    return step;
  }
  if ((c.upload && o.round < c.upload->round) || o.round <= over_) {
    step.answer = refusal(errc::not_in_round, who + " offered to round " +
                                                  std::to_string(o.round) +
                                                  ", which is over");
    return step;
  }
  if (!c.upload || o.round > c.upload->round) {
    c.upload.emplace();
    c.upload->generation = ++c.generations;
    c.upload->round = o.round;
    c.upload->ranks.resize(c.ranks);
  }
  auto& u = *c.upload;
  auto& rs = u.ranks[rank];
  if (u.failed) {
    step.answer = *u.failed;
    return step;
  }
  // Another update of a rank (it restarted) after the client's offer went
  // up; before, it only replaces the rank's offer.
  bool another = u.forwarded && rs.offer &&
                 rs.offer->update_id != o.update_id && o.update_id != 0 &&
                 rs.offer->update_id != 0;
  for (uint32_t r = 0; r < c.ranks; ++r)
    if (r != rank && u.ranks[r].offer &&
        u.ranks[r].offer->sample_count != o.sample_count) {
      step.answer = refusal(errc::manifest_mismatch,
                            who + " offered " + std::to_string(o.sample_count) +
                                " samples, rank " + std::to_string(r) + " " +
                                std::to_string(u.ranks[r].offer->sample_count) +
                                ": the ranks of a client train one update");
      return step;
    }
  if (u.forwarded && !another) { // a repeated offer (a reconnected rank)
    if (u.stream_id == 0)
      rs.waiting_offer = true; // answered with the others
    else
      step.answer = msg::encode(
          msg::accept{u.stream_id, u.rank_window, rs.next, rs.first_owed});
    return step;
  }
  rs.offer = o;
  rs.waiting_offer = true;
  if (!another)
    for (const auto& r : u.ranks)
      if (!r.offer)
        return step; // the other ranks' offers are awaited
  // Every rank offered (or one came back with another update: the
  // client's update is another one, which the aggregator refuses as it
  // refuses a restarted client's).
  msg::offer up = o;
  up.client_id = id;
  up.total_bytes = whole_.total_bytes();
  up.chunk_count = whole_.chunk_count();
  double loss = 0, norm = 0;
  std::vector<uint64_t> ids;
  uint32_t offered = 0;
  for (const auto& r : u.ranks) {
    if (!r.offer)
      continue;
    ++offered;
    loss += r.offer->train_loss;
    norm = std::hypot(norm, r.offer->update_norm);
    up.train_seconds = std::max(up.train_seconds, r.offer->train_seconds);
    up.dp_epsilon = std::max(up.dp_epsilon, r.offer->dp_epsilon);
    ids.push_back(r.offer->update_id);
  }
  up.train_loss = loss / offered;
  up.update_norm = norm; // the root of the ranks' squares summed
  up.update_id = joined_update_id(ids);
  if (u.ranks[0].offer)
    up.metrics = u.ranks[0].offer->metrics;
  u.forwarded = true;
  step.forward = std::move(up);
  return step;
}

shard_hub::joined_upload* shard_hub::upload_of(const std::string& id,
                                               uint64_t g) {
  auto it = clients_.find(id);
  return it == clients_.end() ? nullptr : it->second.current(g);
}

uint64_t shard_hub::generation(const std::string& id) const {
  auto it = clients_.find(id);
  return it != clients_.end() && it->second.upload
             ? it->second.upload->generation
             : 0;
}

std::vector<std::pair<uint32_t, msg::frame>>
shard_hub::accepted(const std::string& id, uint64_t generation,
                    const msg::frame& answer) {
  std::vector<std::pair<uint32_t, msg::frame>> out;
  auto* up = upload_of(id, generation);
  if (!up)
    return out;
  auto& u = *up;
  auto a = msg::decode<msg::accept>(answer);
  if (a && u.stream_id == 0) {
    u.stream_id = a->stream_id;
    u.window = std::max<uint32_t>(1, a->window);
    u.rank_window = rank_window(id, u.window);
  } else if (!a) {
    u.failed = answer;
  }
  for (uint32_t r = 0; r < u.ranks.size(); ++r) {
    auto& rs = u.ranks[r];
    if (!rs.waiting_offer)
      continue;
    rs.waiting_offer = false;
    out.emplace_back(r, a ? msg::encode(msg::accept{u.stream_id, u.rank_window,
                                                    rs.next, rs.first_owed})
                          : answer);
  }
  return out;
}

result<void> shard_hub::put(client& c, joined_upload& u, uint32_t rank,
                            const msg::chunk_view& v) {
  const auto& h = v.header;
  auto& rs = u.ranks[rank];
  const auto& plan = *c.plans[rank];
  FEDCAF_REQUIRE(h.stream_id == u.stream_id, errc::unknown_stream, h.stream_id,
                 u.stream_id);
  FEDCAF_REQUIRE(h.round == u.round, errc::wrong_round, h.round, u.round);
  FEDCAF_REQUIRE(h.sequence == rs.next, errc::bad_sequence, h.sequence,
                 rs.next);
  if (auto placed =
          plan.check(h.sequence, h.tensor_index, h.byte_offset, v.bytes.size());
      !placed)
    return placed;
  // Credits: a rank may have its share of the window unanswered.
  FEDCAF_REQUIRE(rs.owed.size() < u.rank_window, errc::too_many_requests,
                 rs.owed.size(), u.rank_window);
  auto k = plan.position(h.sequence);
  const auto& e = whole_.extent(k);
  auto& p = u.open[k];
  if (p.bytes.empty()) {
    p.bytes.resize(e.bytes);
    p.missing = e.bytes;
  }
  plan.for_each_model_run(
      h.sequence, [&](uint64_t at_model, uint64_t n, uint64_t at) {
        std::memcpy(p.bytes.data() + (at_model - e.model_offset),
                    v.bytes.data() + at, n);
      });
  p.missing -= v.bytes.size();
  p.pieces.push_back({rank, h.sequence});
  rs.owed.insert(h.sequence);
  ++rs.next;
  u.bytes += v.bytes.size();
  return {};
}

std::vector<shard_hub::up_chunk> shard_hub::release(joined_upload& u) {
  std::vector<up_chunk> out;
  while (u.unanswered < u.window) {
    auto it = u.open.find(u.next_up);
    if (it == u.open.end() || it->second.missing > 0)
      break;
    auto& p = it->second;
    const auto& e = whole_.extent(u.next_up);
    msg::chunk_header h{u.stream_id, u.round, u.next_up, e.tensor_index,
                        e.tensor_offset};
    out.push_back(
        {u.next_up,
         msg::encode_chunk(h, p.bytes.size(), [&p](std::span<std::byte> dst) {
           std::memcpy(dst.data(), p.bytes.data(), dst.size());
         })});
    p.bytes = {}; // the chunk went up: its pieces wait for its answer
    p.sent = true;
    ++u.unanswered;
    ++u.next_up;
  }
  return out;
}

shard_hub::chunk_step shard_hub::chunk(const std::string& id, uint32_t rank,
                                       const msg::frame& f) {
  chunk_step step;
  auto& c = clients_.at(id);
  auto v = msg::decode_chunk(f, whole_.chunk_bytes());
  if (!v) {
    step.refusal = msg::encode(v.err());
    return step;
  }
  if (!c.upload || c.upload->stream_id == 0) {
    step.refusal =
        refusal(errc::unknown_stream, rank_name(id, rank) + ": stream " +
                                          std::to_string(v->header.stream_id) +
                                          " is not open");
    return step;
  }
  auto& u = *c.upload;
  if (u.failed) {
    step.refusal = stream_gone(*u.failed);
    return step;
  }
  if (auto ok = put(c, u, rank, *v); !ok) {
    step.refusal = msg::encode(
        error{ok.err().code, rank_name(id, rank) + ": " + ok.err().message});
    return step;
  }
  step.sequence = v->header.sequence;
  step.up = release(u);
  return step;
}

shard_hub::credit_step shard_hub::credited(const std::string& id,
                                           uint64_t generation, uint64_t seq,
                                           const msg::frame& answer) {
  credit_step step;
  auto* up = upload_of(id, generation);
  if (!up)
    return step;
  auto& u = *up;
  auto p = u.open.find(seq);
  if (p == u.open.end() || !p->second.sent)
    return step;
  auto credit = msg::decode<msg::credit>(answer);
  if (!credit) { // refused: every rank's chunk that waits hears it
    fail(u, answer, step.answers);
    return step;
  }
  for (const auto& piece : p->second.pieces) {
    auto& rs = u.ranks[piece.rank];
    rs.owed.erase(piece.sequence);
    rs.first_owed = rs.owed.empty() ? rs.next : *rs.owed.begin();
    step.answers.emplace_back(
        piece, msg::encode(msg::credit{u.stream_id, piece.sequence}));
  }
  u.open.erase(p);
  --u.unanswered;
  step.up = release(u);
  return step;
}

void shard_hub::fail(joined_upload& u, const msg::frame& why,
                     std::vector<std::pair<rank_piece, msg::frame>>& answers) {
  if (!u.failed)
    u.failed = why;
  auto gone = stream_gone(why);
  for (auto& [seq, p] : u.open)
    for (const auto& piece : p.pieces) {
      u.ranks[piece.rank].owed.erase(piece.sequence);
      answers.emplace_back(piece, gone);
    }
  u.open.clear();
  u.unanswered = 0;
}

std::optional<msg::frame> shard_hub::owed_credit(const std::string& id,
                                                 uint32_t rank,
                                                 const msg::frame& f) {
  auto c = msg::decode<msg::credit>(f);
  if (!c)
    return msg::encode(c.err());
  auto it = clients_.find(id);
  auto unknown = refusal(errc::unknown_stream,
                         rank_name(id, rank) + ": no credit owed for chunk " +
                             std::to_string(c->sequence) + " of stream " +
                             std::to_string(c->stream_id));
  if (it == clients_.end() || !it->second.upload)
    return unknown;
  auto& u = *it->second.upload;
  if (u.failed)
    return stream_gone(*u.failed);
  const auto& rs = u.ranks[rank];
  if (c->stream_id != u.stream_id || u.stream_id == 0 ||
      c->sequence >= rs.next || rs.ended)
    return unknown;
  if (!rs.owed.count(c->sequence)) // credited already
    return msg::encode(msg::credit{u.stream_id, c->sequence});
  return std::nullopt;
}

shard_hub::end_step shard_hub::end(const std::string& id, uint32_t rank,
                                   const msg::frame& f) {
  end_step step;
  auto e = msg::decode<msg::end_of_stream>(f);
  if (!e) {
    step.answer = msg::encode(e.err());
    return step;
  }
  auto it = clients_.find(id);
  if (it == clients_.end() || !it->second.upload ||
      it->second.upload->stream_id != e->stream_id || e->stream_id == 0) {
    step.answer = refusal(errc::unknown_stream,
                          rank_name(id, rank) + ": stream " +
                              std::to_string(e->stream_id) + " is not open");
    return step;
  }
  auto& c = it->second;
  auto& u = *c.upload;
  if (u.failed) {
    step.answer = *u.failed;
    return step;
  }
  auto& rs = u.ranks[rank];
  auto count = c.plans[rank]->chunk_count();
  if (e->chunk_count != count || rs.next != count || !rs.owed.empty()) {
    step.answer = refusal(errc::bad_sequence,
                          rank_name(id, rank) + " ended its stream after " +
                              std::to_string(rs.next) + " of its " +
                              std::to_string(count) + " chunks");
    return step;
  }
  rs.ended = true;
  if (u.closed_answer) { // a repeated end: its answer was lost
    step.answer = *u.closed_answer;
    return step;
  }
  u.ends_waiting.insert(rank);
  for (const auto& r : u.ranks)
    if (!r.ended)
      return step;
  if (!u.end_sent) {
    u.end_sent = true;
    step.up =
        msg::encode(msg::end_of_stream{u.stream_id, whole_.chunk_count()});
  }
  return step;
}

std::vector<std::pair<uint32_t, msg::frame>>
shard_hub::closed(const std::string& id, uint64_t generation,
                  const msg::frame& answer) {
  std::vector<std::pair<uint32_t, msg::frame>> out;
  auto* up = upload_of(id, generation);
  if (!up)
    return out;
  auto& u = *up;
  u.closed_answer = answer;
  for (auto r : u.ends_waiting)
    out.emplace_back(r, answer);
  u.ends_waiting.clear();
  return out;
}

std::vector<std::tuple<std::string, uint32_t, msg::frame>>
shard_hub::round_over(uint32_t round) {
  std::vector<std::tuple<std::string, uint32_t, msg::frame>> out;
  over_ = std::max(over_, round);
  for (auto& [id, c] : clients_) {
    if (!c.upload || c.upload->round > round)
      continue;
    for (uint32_t r = 0; r < c.upload->ranks.size(); ++r)
      if (c.upload->ranks[r].waiting_offer)
        out.emplace_back(id, r,
                         refusal(errc::not_in_round,
                                 rank_name(id, r) + ": round " +
                                     std::to_string(round) +
                                     " is over before every rank offered"));
    c.upload.reset();
  }
  return out;
}

} // namespace fedcaf
