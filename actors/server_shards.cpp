#include "actors/server_shards.hpp"

#include "actors/messages.hpp"

namespace fedcaf {

server_shards::server_shards(server_core& core)
    : core_(core),
      hub_(core.exchange_.model()->layout, core.options_.chunk_bytes,
           core.options_.max_shard_ranks) {}

std::optional<error> server_shards::refusal(const msg::hello& h) const {
  const auto& o = core_.options_;
  auto unfit = [&h](const std::string& what) {
    return error{errc::not_authorized,
                 h.client_id + " registers as rank " +
                     std::to_string(h.shard.rank) + " of " +
                     std::to_string(h.shard.ranks) +
                     ", but sharded clients do not run " + what};
  };
  if (o.secure_aggregation.enabled)
    return unfit("with secure aggregation (each rank would mask its own "
                 "positions with the client's key material: not built)");
  if (o.compression.up || o.compression.down)
    return unfit("with compressed transfers (client_configs.comm_configs."
                 "compression)");
  if (o.async)
    return unfit("under the AsyncScheduler");
  if (o.relay && o.relay_window)
    return unfit("under a window-mode relay (its download paces on each "
                 "child's fetches of the whole model; run the relay in "
                 "memory_mode ram or disk)");
  if (o.federated_evaluation)
    return unfit("with federated evaluation (no rank holds the model to "
                 "evaluate)");
  auto ok = hub_.check_hello(h, core_.registry_.present_ranks(h.client_id));
  if (!ok)
    return ok.err();
  return std::nullopt;
}

std::optional<std::pair<std::string, uint32_t>>
server_shards::rank_of(const std::string& key) const {
  const auto* c = core_.registry_.find(key);
  if (!c || c->logical == key)
    return std::nullopt;
  return std::pair{c->logical, c->rank};
}

caf::result<frame> server_shards::offer(
    const std::string& id, uint32_t rank, const frame& f,
    const std::function<std::optional<frame>(const msg::offer&)>& refusal) {
  auto o = msg::decode<msg::offer>(f);
  if (!o)
    return core_.refuse(o.err());
  if (auto no = refusal(*o))
    return std::move(*no);
  auto step = hub_.offer(id, rank, *o);
  if (step.answer)
    return std::move(*step.answer);
  auto rp = core_.self_->make_response_promise<frame>();
  offers_[{id, rank}] = rp;
  if (!step.forward)
    return rp;
  const auto& up = *step.forward;
  if (up.round == core_.rounds_.round())
    core_.reporter_.note_offer(id, core_.tally_.offered(id, up.sample_count),
                               up.metrics);
  core_.self_
      ->request(core_.peers_.scheduler, caf::infinite, offer_atom::value,
                msg::encode(up))
      .then([this, id, g = hub_.generation(id)](
                frame answer) { answer_offers(id, g, answer); },
            [this, id, g = hub_.generation(id)](caf::error& e) {
              answer_offers(
                  id, g,
                  msg::encode(error{errc::internal,
                                    "the offer went unanswered: " +
                                        core_.self_->system().render(e)}));
            });
  return rp;
}

caf::result<frame> server_shards::chunk(const std::string& id, uint32_t rank,
                                        const frame& f) {
  auto step = hub_.chunk(id, rank, f);
  if (step.refusal)
    return std::move(*step.refusal);
  auto rp = core_.self_->make_response_promise<frame>();
  pieces_[{id, rank, step.sequence}] = rp;
  send_up(id, std::move(step.up));
  return rp;
}

void server_shards::send_up(const std::string& id,
                            std::vector<shard_hub::up_chunk> up) {
  auto g = hub_.generation(id); // the upload that made them
  for (auto& [seq, f] : up) {
    core_.self_
        ->request(core_.peers_.aggregator, caf::infinite, chunk_atom::value, id,
                  std::move(f))
        .then(
            [this, id, g, seq](frame answer) {
              auto step = hub_.credited(id, g, seq, answer);
              answer_pieces(id, std::move(step.answers));
              send_up(id, std::move(step.up));
            },
            [this, id, g, seq](caf::error& e) {
              auto step = hub_.credited(
                  id, g, seq,
                  msg::encode(error{errc::internal,
                                    "a chunk went unanswered: " +
                                        core_.self_->system().render(e)}));
              answer_pieces(id, std::move(step.answers));
            });
  }
}

void server_shards::answer_offers(const std::string& id, uint64_t g,
                                  const frame& answer) {
  for (auto& [r, a] : hub_.accepted(id, g, answer))
    if (auto it = offers_.find({id, r}); it != offers_.end()) {
      it->second.deliver(std::move(a));
      offers_.erase(it);
    }
}

void server_shards::answer_pieces(
    const std::string& id, std::vector<std::pair<rank_piece, frame>> answers) {
  for (auto& [piece, answer] : answers) {
    auto it = pieces_.find({id, piece.rank, piece.sequence});
    if (it == pieces_.end())
      continue;
    it->second.deliver(std::move(answer));
    pieces_.erase(it);
  }
}

caf::result<frame> server_shards::credit(const std::string& id, uint32_t rank,
                                         const frame& f) {
  if (auto now = hub_.owed_credit(id, rank, f))
    return std::move(*now);
  auto c = msg::decode<msg::credit>(f);
  auto rp = core_.self_->make_response_promise<frame>();
  pieces_[{id, rank, c->sequence}] = rp; // the latest request is answered
  return rp;
}

caf::result<frame> server_shards::end(const std::string& id, uint32_t rank,
                                      const frame& f) {
  auto step = hub_.end(id, rank, f);
  if (step.answer)
    return std::move(*step.answer);
  auto rp = core_.self_->make_response_promise<frame>();
  ends_[{id, rank}] = rp;
  if (!step.up)
    return rp;
  auto deliver = [this, id, g = hub_.generation(id)](const frame& answer) {
    for (auto& [r, a] : hub_.closed(id, g, answer))
      if (auto it = ends_.find({id, r}); it != ends_.end()) {
        it->second.deliver(std::move(a));
        ends_.erase(it);
      }
  };
  core_.self_
      ->request(core_.peers_.aggregator, caf::infinite, end_atom::value, id,
                std::move(*step.up))
      .then([deliver](frame answer) { deliver(answer); },
            [this, deliver](caf::error& e) {
              deliver(msg::encode(
                  error{errc::internal, "the end went unanswered: " +
                                            core_.self_->system().render(e)}));
            });
  return rp;
}

void server_shards::round_over(uint32_t round) {
  for (auto& [id, r, answer] : hub_.round_over(round))
    if (auto it = offers_.find({id, r}); it != offers_.end()) {
      it->second.deliver(std::move(answer));
      offers_.erase(it);
    }
  // What still waits belongs to an update cut off, dropped or refused: its
  // ranks hear that its stream is gone (a fedcaf client waits for the next
  // round), and their connections hold no request open.
  flush({}, error{errc::unknown_stream, "round " + std::to_string(round) +
                                            " is over: the stream is gone"});
}

bool server_shards::dropped(const std::string& id, uint32_t rank) {
  if (!hub_.dropped(id, rank))
    return false;
  error why{errc::not_in_round, id + " left the run with its rank " +
                                    std::to_string(rank) +
                                    ", dropped: its update of this round is "
                                    "gone"};
  // Its other ranks sit the round out, as a rejected client does (their
  // requests that wait: the stream is gone).
  flush(id, error{errc::unknown_stream, why.message});
  core_.tell(id, reject_atom::value, msg::encode(why));
  return true;
}

void server_shards::collect_again(const std::vector<std::string>& ids) {
  for (const auto& id : ids) {
    hub_.forget(id);
    flush(id,
          error{errc::stream_reset, "the round's updates are collected again"});
  }
}

void server_shards::flush(const std::string& id, const error& why) {
  auto answer = msg::encode(why);
  for (auto it = pieces_.begin(); it != pieces_.end();)
    if (id.empty() || std::get<0>(it->first) == id) {
      it->second.deliver(answer);
      it = pieces_.erase(it);
    } else {
      ++it;
    }
  for (auto it = ends_.begin(); it != ends_.end();)
    if (id.empty() || it->first.first == id) {
      it->second.deliver(answer);
      it = ends_.erase(it);
    } else {
      ++it;
    }
}

} // namespace fedcaf
