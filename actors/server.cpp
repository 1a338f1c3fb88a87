#include "actors/server.hpp"

#include <map>
#include <optional>

#include <caf/all.hpp>

#include "actors/protocol.hpp"
#include "fedcaf/chunk_plan.hpp"
#include "fedcaf/log.hpp"
#include "fedcaf/memory_probe.hpp"
#include "fedcaf/stopwatch.hpp"

namespace fedcaf {

namespace {

using clock_type = steady_clock;

struct client_entry {
  caf::actor handle;
  uint32_t index = 0;
  bool connected = true;
};

// State machine: registering -> (start r: announce, serve, route) ->
// (publish r: evaluate, report) -> ... -> stopping (done sent; waiting for
// clients to leave) -> quit.
class server_state {
public:
  server_state(snapshot_ptr initial, server_peers peers, server_options options,
               run_report* report)
      : peers_(std::move(peers)), options_(std::move(options)), report_(report),
        started_(clock_type::now()), refusals_("server", options_.refusals) {
    install(std::move(initial));
  }

  void attach(caf::event_based_actor* self) {
    self_ = self;
    self_->set_down_handler([this](caf::down_msg& m) { on_down(m); });
  }

  frame hello(const frame& f) {
    auto h = msg::decode<msg::hello>(f);
    if (!h)
      return refuse(h.err());
    if (clients_.count(h->client_id))
      return refuse(
          {errc::unknown_client, h->client_id + " is already registered"});
    if (clients_.size() >= options_.num_clients || stopping_)
      return refuse(
          {errc::unknown_client, h->client_id + ": all " +
                                     std::to_string(options_.num_clients) +
                                     " client places are taken"});
    auto handle = caf::actor_cast<caf::actor>(self_->current_sender());
    auto index = static_cast<uint32_t>(clients_.size());
    clients_[h->client_id] = {handle, index, true};
    self_->monitor(handle);
    log_line("server", "registered " + h->client_id);
    self_->send(peers_.scheduler, join_atom::value, h->client_id);
    return msg::encode(msg::welcome{index, options_.num_clients,
                                    options_.client_configs_yaml});
  }

  void start_round(uint32_t round) {
    round_ = round;
    round_started_ = clock_type::now();
    bytes_up_ = bytes_down_ = 0;
    msg::round_start rs{round,
                        snapshot_->version,
                        snapshot_->layout,
                        options_.chunk_bytes,
                        options_.window,
                        last_metrics_};
    auto f = msg::encode(rs);
    for (auto& [id, c] : clients_)
      if (c.connected)
        self_->send(c.handle, round_atom::value, f);
  }

  frame serve(const frame& f) {
    auto req = msg::decode<msg::fetch>(f);
    if (!req)
      return refuse(req.err());
    if (req->model_version != snapshot_->version)
      return refuse({errc::wrong_round,
                     "model version " + std::to_string(req->model_version) +
                         " is not served; current is " +
                         std::to_string(snapshot_->version)});
    if (req->sequence >= plan_->chunk_count())
      return refuse({errc::out_of_range,
                     "chunk " + std::to_string(req->sequence) + " of " +
                         std::to_string(plan_->chunk_count())});
    const auto& e = plan_->extent(req->sequence);
    bytes_down_ += e.bytes;
    msg::chunk_header h{0, req->round, req->sequence, e.tensor_index,
                        e.tensor_offset};
    auto reply = msg::encode_chunk(h, e.bytes, [&](std::span<std::byte> dst) {
      plan_->copy_out(req->sequence, view_, dst);
    });
    snapshot_->bytes.release(e.model_offset, e.bytes); // file-backed only
    return reply;
  }

  void count_upload(const frame& f) { bytes_up_ += f.size(); }

  caf::response_promise publish(uint32_t round, snapshot_ptr next,
                                uint32_t clients, double train_loss) {
    install(std::move(next));
    auto rp = self_->make_response_promise();
    auto record = round_record{};
    record.round = round;
    record.bytes_up = bytes_up_;
    record.bytes_down = bytes_down_;
    record.train_loss = train_loss;
    record.clients = clients;
    self_->request(peers_.evaluator, caf::infinite, eval_atom::value, snapshot_)
        .then(
            [this, rp, record](bool evaluated, double loss, double accuracy,
                               const std::string& failure) mutable {
              if (evaluated) {
                record.test_accuracy = accuracy;
                record.test_loss = loss;
                last_metrics_ = {record.round, accuracy, loss, true};
              }
              finish_round(record);
              if (!failure.empty())
                stop(failure);
              rp.deliver(failure.empty());
            },
            [this, rp, record](caf::error&) mutable {
              finish_round(record);
              rp.deliver(true);
            });
    return rp;
  }

  void stop(const std::string& reason) {
    if (stopping_)
      return;
    stopping_ = true;
    report_->failure = reason;
    msg::done d{round_, last_metrics_, reason};
    auto f = msg::encode(d);
    for (auto& [id, c] : clients_)
      if (c.connected)
        self_->send(c.handle, done_atom::value, f);
    if (connected_count() == 0)
      return quit();
    self_->delayed_send(self_, options_.linger, tick_atom::value);
  }

  void quit() {
    report_->node = "server";
    report_->total_seconds = seconds_since(started_);
    report_->peak_rss_bytes = sample_memory().peak_rss_bytes;
    report_->refusals = refusals_.count();
    self_->quit();
  }

private:
  void install(snapshot_ptr s) {
    snapshot_ = std::move(s);
    view_ = snapshot_->view();
    auto p = chunk_plan::make(snapshot_->layout, options_.chunk_bytes);
    plan_.emplace(std::move(*p)); // the aggregator checked the same plan
  }

  void finish_round(round_record record) {
    record.wall_seconds = seconds_since(round_started_);
    record.ended_unix_s = unix_seconds();
    std::printf("%s\n", progress_line(record, options_.num_rounds).c_str());
    std::fflush(stdout);
    report_->rounds.push_back(record);
  }

  void on_down(const caf::down_msg& m) {
    for (auto& [id, c] : clients_) {
      if (c.handle.address() != m.source || !c.connected)
        continue;
      c.connected = false;
      if (stopping_) {
        if (connected_count() == 0)
          quit();
        return;
      }
      auto reason = self_->system().render(m.reason);
      log_line("server", id + " disconnected: " + reason);
      self_->send(peers_.scheduler, leave_atom::value, id, reason);
    }
  }

  size_t connected_count() const {
    size_t n = 0;
    for (const auto& kv : clients_)
      n += kv.second.connected ? 1 : 0;
    return n;
  }

  frame refuse(const error& e) const { return refusals_.refuse(e); }

  caf::event_based_actor* self_ = nullptr;
  server_peers peers_;
  server_options options_;
  run_report* report_;
  snapshot_ptr snapshot_;
  std::optional<chunk_plan> plan_;
  const_model_view view_; ///< of snapshot_, for serving chunks
  std::map<std::string, client_entry> clients_;
  uint32_t round_ = 0;
  clock_type::time_point started_;
  clock_type::time_point round_started_;
  uint64_t bytes_up_ = 0;
  uint64_t bytes_down_ = 0;
  refusal_log refusals_;
  msg::metrics last_metrics_;
  bool stopping_ = false;
};

caf::behavior server_actor(caf::event_based_actor* self,
                           std::shared_ptr<server_state> state,
                           server_peers peers) {
  state->attach(self);
  return {
      [state](hello_atom, const frame& f) { return state->hello(f); },
      [state](fetch_atom, const frame& f) { return state->serve(f); },
      [self, peers](offer_atom, const frame& f) {
        return self->delegate(peers.scheduler, offer_atom::value, f);
      },
      [self, state, peers](chunk_atom, frame& f) {
        state->count_upload(f);
        return self->delegate(peers.aggregator, chunk_atom::value,
                              std::move(f));
      },
      [self, peers](end_atom, const frame& f) {
        return self->delegate(peers.aggregator, end_atom::value, f);
      },
      [state](start_atom, uint32_t round) { state->start_round(round); },
      [state](publish_atom, uint32_t round, snapshot_ptr next, uint32_t clients,
              double loss) {
        return state->publish(round, std::move(next), clients, loss);
      },
      [state](stop_atom, const std::string& reason) { state->stop(reason); },
      [state](tick_atom) { state->quit(); },
  };
}

} // namespace

caf::actor spawn_server(caf::actor_system& sys, snapshot_ptr initial,
                        server_peers peers, server_options options,
                        run_report* report) {
  auto state = std::make_shared<server_state>(std::move(initial), peers,
                                              std::move(options), report);
  return sys.spawn(server_actor, std::move(state), peers);
}

} // namespace fedcaf
