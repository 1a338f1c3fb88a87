// Real actors exchanging real frames in one actor system: the server side as
// `fedcaf simulate` wires it, clients with a synthetic trainer whose update
// is known, and a rogue client that sends bad frames by hand.

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <exception>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <new>
#include <optional>
#include <set>
#include <thread>

#include <caf/all.hpp>
#include <caf/scheduler/test_coordinator.hpp>
#include <doctest/doctest.h>

#include "actors/client.hpp"
#include "actors/errors.hpp"
#include "actors/messages.hpp"
#include "actors/server_side.hpp"
#include "fedcaf/chunk_plan.hpp"
#include "fedcaf/dummy_trainer.hpp"
#include "fedcaf/element.hpp"
#include "fedcaf/fedavg_accumulator.hpp"
#include "fedcaf/rdp_accountant.hpp"
#include "fedcaf/safetensors.hpp"
#include "protocol/population.hpp"
#include "protocol/relay_hooks.hpp"

using namespace fedcaf;
using namespace std::chrono_literals;

namespace {

/// Odd tensor sizes, so that chunks split tensors and pack several.
manifest test_layout() {
  manifest m;
  uint64_t sizes[] = {1000, 3, 17, 40000, 7, 129};
  for (size_t i = 0; i < std::size(sizes); ++i)
    m.tensors.push_back(
        make_tensor_info("t" + std::to_string(i), dtype::float32, {sizes[i]}));
  return m;
}

using model_floats = std::vector<std::vector<float>>;

/// Client k's local training: a fixed function of the model it received.
float local_update(uint32_t k, size_t tensor, size_t j, float p) {
  return p * 0.5f + static_cast<float>(k + 1) * 0.01f *
                        static_cast<float>((j % 7) + tensor);
}

model_floats initial_floats(const manifest& m) {
  model_floats out;
  for (size_t t = 0; t < m.tensors.size(); ++t) {
    out.emplace_back(m.tensors[t].byte_size / sizeof(float));
    for (size_t j = 0; j < out.back().size(); ++j)
      out.back()[j] = std::sin(static_cast<float>(j + 31 * t));
  }
  return out;
}

/// What a server publishes for one update `x` of weight 1 against the
/// global model `g`, in every memory mode (its sum is exact integers on
/// each run's grid: x to within half a grid step, not x itself). Checks
/// that it lies within 2^-24 of x's largest magnitude.
std::vector<float> one_update_mean(const manifest& m, uint64_t chunk_bytes,
                                   const model_floats& g,
                                   const std::vector<float>& x) {
  std::vector<float> global;
  for (const auto& t : g)
    global.insert(global.end(), t.begin(), t.end());
  auto acc = fedavg_accumulator::make(m, *chunk_plan::make(m, chunk_bytes));
  REQUIRE(acc);
  auto gb = std::as_bytes(std::span{global});
  auto xb = std::as_bytes(std::span{x});
  for (uint64_t s = 0; s < acc->plan().chunk_count(); ++s) {
    const auto& e = acc->plan().extent(s);
    REQUIRE(acc->fold(s, xb.subspan(e.model_offset, e.bytes), 1, gb));
  }
  auto out = acc->finalize(gb, nullptr);
  REQUIRE(out);
  std::vector<float> mean(x.size());
  std::memcpy(mean.data(), out->data(), out->size());
  float most = 0, off = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    most = std::max(most, std::fabs(x[i]));
    off = std::max(off, std::fabs(mean[i] - x[i]));
  }
  CHECK(off <= most * 0x1p-24f);
  return mean;
}

model_snapshot snapshot_of(const manifest& m, const model_floats& x) {
  model_snapshot s;
  s.layout = m;
  s.bytes = byte_buffer::uninitialized(m.total_bytes());
  size_t at = 0;
  for (const auto& t : x) {
    std::memcpy(s.bytes.data() + at, t.data(), t.size() * sizeof(float));
    at += t.size() * sizeof(float);
  }
  return s;
}

model_floats floats_of(const const_model_view& v) {
  model_floats out;
  for (auto t : v.tensors) {
    out.emplace_back(t.size() / sizeof(float));
    std::memcpy(out.back().data(), t.data(), t.size());
  }
  return out;
}

/// How a trainer lets time pass while it trains (virtual_system::pause).
using pause_fn = std::function<void(std::chrono::milliseconds)>;

/// A trainer whose model lives in plain vectors and whose training applies
/// local_update to every element, after `delay` passed on `pause`.
class synthetic_trainer final : public trainer, public relay_hooks {
public:
  /// Iff `throws`, train() throws std::bad_alloc (as an allocation of a
  /// size its server chose would).
  synthetic_trainer(manifest layout, uint32_t k, uint64_t samples,
                    std::chrono::milliseconds delay = {}, pause_fn pause = {},
                    bool throws = false)
      : layout_(std::move(layout)), k_(k), samples_(samples), delay_(delay),
        pause_(std::move(pause)), throws_(throws) {
    for (const auto& t : layout_.tensors)
      params_.emplace_back(t.byte_size / sizeof(float));
  }
  const manifest& layout() const override { return layout_; }
  model_view parameters() override {
    model_view v;
    for (auto& t : params_)
      v.tensors.push_back(std::as_writable_bytes(std::span{t}));
    return v;
  }
  /// An upload held back: ready_bytes() says how much may go up, and
  /// wake() says it grew (as a streaming relay's sum settles).
  struct gate {
    uint64_t ready = std::numeric_limits<uint64_t>::max();
    std::function<void()> wake;
  };
  /// Round 1 begins `late` (a slow start); uploads go through `g`.
  synthetic_trainer& slowed(std::chrono::milliseconds late,
                            std::shared_ptr<gate> g) {
    late_ = late;
    gate_ = std::move(g);
    return *this;
  }
  void begin_round(uint32_t round, bool) override {
    if (round == 1 && late_ > 0ms)
      pause_(late_);
  }
  uint64_t ready_bytes() const override {
    return gate_ ? gate_->ready : std::numeric_limits<uint64_t>::max();
  }
  void on_ready(std::function<void()> wake) override {
    if (gate_)
      gate_->wake = std::move(wake);
  }

  result<train_metrics> train() override {
    if (delay_ > 0ms)
      pause_(delay_);
    if (throws_)
      throw std::bad_alloc{};
    for (size_t t = 0; t < params_.size(); ++t)
      for (size_t j = 0; j < params_[t].size(); ++j)
        params_[t][j] = local_update(k_, t, j, params_[t][j]);
    return train_metrics{0.1 * (k_ + 1), samples_, 0};
  }
  uint64_t sample_count() const override { return samples_; }

private:
  manifest layout_;
  uint32_t k_;
  uint64_t samples_;
  std::chrono::milliseconds delay_;
  pause_fn pause_;
  bool throws_;
  std::chrono::milliseconds late_{0};
  std::shared_ptr<gate> gate_;
  model_floats params_;
};

/// Keeps a copy of the last model it was asked to evaluate.
class capturing_evaluator final : public evaluator {
public:
  capturing_evaluator() = default;
  /// Each evaluation takes `delay` of `pause`'s time (as a real test set's).
  capturing_evaluator(pause_fn pause, std::chrono::milliseconds delay)
      : pause_(std::move(pause)), delay_(delay) {}

  result<eval_metrics> evaluate(const const_model_view& model) override {
    if (pause_)
      pause_(delay_);
    std::lock_guard<std::mutex> guard{mtx_};
    last_ = floats_of(model);
    last_bytes_.clear();
    for (auto t : model.tensors)
      last_bytes_.insert(last_bytes_.end(), t.begin(), t.end());
    ++count_;
    return eval_metrics{0.5, 0.5, 1};
  }
  model_floats last() {
    std::lock_guard<std::mutex> guard{mtx_};
    return last_;
  }
  int count() {
    std::lock_guard<std::mutex> guard{mtx_};
    return count_;
  }
  std::vector<std::byte> last_bytes() {
    std::lock_guard<std::mutex> guard{mtx_};
    return last_bytes_;
  }

private:
  pause_fn pause_;
  std::chrono::milliseconds delay_{0};
  std::mutex mtx_;
  model_floats last_;
  std::vector<std::byte> last_bytes_;
  int count_ = 0;
};

uint64_t samples_of(uint32_t k) {
  return 100 * (k + 1) + 7;
}

/// Whole-model FedAvg in double, written independently of the accumulator;
/// sample counts capped at `max_samples` (0: no cap).
model_floats reference_fedavg(const manifest& m, uint32_t clients,
                              uint32_t rounds, bool by_samples,
                              uint64_t max_samples = 0) {
  auto global = initial_floats(m);
  for (uint32_t r = 0; r < rounds; ++r) {
    model_floats next = global;
    for (size_t t = 0; t < global.size(); ++t)
      for (size_t j = 0; j < global[t].size(); ++j) {
        double sum = 0, weights = 0;
        for (uint32_t k = 0; k < clients; ++k) {
          auto samples = max_samples > 0 ? std::min(samples_of(k), max_samples)
                                         : samples_of(k);
          double w = by_samples ? static_cast<double>(samples) : 1.0;
          sum += w * local_update(k, t, j, global[t][j]);
          weights += w;
        }
        next[t][j] = static_cast<float>(sum / weights);
      }
    global = std::move(next);
  }
  return global;
}

/// One round of FedAvg (equal weights) of `honest` synthetic clients and a
/// rejected client whose first `prefix` elements (flat, model order) of
/// `rogue` stayed in the sum: each element the mean of the updates that
/// reached it, in double.
model_floats reference_with_prefix(const manifest& m, uint32_t honest,
                                   const std::vector<float>& rogue,
                                   size_t prefix) {
  auto global = initial_floats(m);
  auto next = global;
  size_t flat = 0;
  for (size_t t = 0; t < global.size(); ++t)
    for (size_t j = 0; j < global[t].size(); ++j, ++flat) {
      double sum = 0, weights = 0;
      for (uint32_t k = 0; k < honest; ++k) {
        sum += local_update(k, t, j, global[t][j]);
        weights += 1;
      }
      if (flat < prefix) {
        sum += rogue[flat];
        weights += 1;
      }
      next[t][j] = static_cast<float>(sum / weights);
    }
  return next;
}

struct federation_run {
  run_report server;
  std::vector<run_report> clients;
  model_floats final_model;
  int evaluations = 0;
  int trainers_built = 0;
};

struct run_options {
  uint32_t clients = 3;
  uint32_t rounds = 2;
  uint64_t chunk_bytes = 4096;
  uint32_t window = 4;
  client_weighting weights = client_weighting::equal;
  std::chrono::microseconds fold_delay{0};
  std::string memory_mode = "ram";
  /// Extra clients that register and then never answer.
  uint32_t silent = 0;
  uint32_t min_clients = 0;
  std::chrono::milliseconds deadline{0};
  uint32_t clients_per_round = 0;
  bool hold_model = true;
  std::string aggregator = "FedAvgAggregator";
  /// The updates here are patterns far from the model (the default bound
  /// on an update's distance, max_update_ratio, is off unless a test sets
  /// it; it is tested in chunk_checker_test and hostile_peer's run I).
  rule_config rule = [] {
    rule_config r;
    r.max_update_ratio = 0;
    return r;
  }();
  /// The last client trains this long each round.
  std::chrono::milliseconds last_client_delay{0};
  bool wait_after_deadline = false;
  /// An upload that could send but sent nothing this long is rejected.
  std::chrono::milliseconds idle_timeout{0};
  /// norm_bound: the clients declare their update's norm (else they lie 0).
  bool declare_norm = true;
  /// The last client's training throws std::bad_alloc.
  bool last_client_throws = false;
};

/// An actor system on CAF's test coordinator: every actor runs on the
/// test's thread, one message at a time, and time is virtual: it moves only
/// when no actor can run, so a round deadline or a linger of seconds passes
/// in microseconds, and each run takes the same steps. A test acts as a
/// client through scoped actors (rogue_client) and drives the rest with
/// run_until, wait and at.
class virtual_system {
public:
  virtual_system()
      : sys_(configure(cfg_)),
        sched_(
            dynamic_cast<caf::scheduler::test_coordinator&>(sys_.scheduler())) {
    sched_.clock().current_time += std::chrono::hours(1); // not the epoch
  }
  virtual_system(const virtual_system&) = delete;
  virtual_system& operator=(const virtual_system&) = delete;
  /// Lets the actors that are still running end (exits sent by the test).
  ~virtual_system() {
    for (int steps = 0; steps < 100000 && sched_.has_job(); ++steps)
      sched_.run_once();
  }

  caf::actor_system& sys() { return sys_; }

  /// Runs actors one message at a time until `done()` holds, moving the
  /// clock 1 ms whenever none can run. Returns false iff nothing is left to
  /// happen (no message, no timer, no action) or `limit` of virtual time
  /// passed first.
  template <class F> bool run_until(F done, caf::timespan limit = 10min) {
    auto end = now() + limit;
    while (!done()) {
      if (sched_.try_run_once())
        continue;
      if (now() > end || (!sched_.has_pending_timeout() && actions_.empty()))
        return false;
      tick();
    }
    return true;
  }

  /// Lets `d` of virtual time pass, the actors running as it does.
  void wait(caf::timespan d) {
    auto end = now() + d;
    for (;;) {
      sched_.run();
      if (now() >= end)
        return;
      tick();
    }
  }

  /// Runs `action` once `d` of virtual time has passed, wherever the clock
  /// then is: inside a trainer's pause too.
  void at(caf::timespan d, std::function<void()> action) {
    actions_.emplace_back(now() + d, std::move(action));
  }

  /// Runs one message of one actor, if any can run (the clock stays).
  bool step() { return sched_.try_run_once(); }

  /// For a trainer: `d` passes while it trains, the other actors running
  /// meanwhile (its own messages wait in its mailbox, as while it trains).
  pause_fn pause() {
    return [this](std::chrono::milliseconds d) { wait(d); };
  }

private:
  using time_point = caf::actor_clock::time_point;

  static caf::actor_system_config& configure(caf::actor_system_config& cfg) {
    add_errc_category(cfg);
    cfg.set("scheduler.policy", caf::atom("testing"));
    return cfg;
  }

  time_point now() const { return sched_.clock().current_time; }

  /// One millisecond on: the timers due fire, then the actions due run.
  void tick() {
    sched_.advance_time(1ms);
    for (size_t i = 0; i < actions_.size();) {
      if (actions_[i].first > now()) {
        ++i;
        continue;
      }
      auto action = std::move(actions_[i].second);
      actions_.erase(actions_.begin() + static_cast<std::ptrdiff_t>(i));
      action();
    }
  }

  caf::actor_system_config cfg_;
  caf::actor_system sys_;
  caf::scheduler::test_coordinator& sched_;
  std::vector<std::pair<time_point, std::function<void()>>> actions_;
};

/// Whether `self`'s mailbox holds a message that `pred` accepts.
template <class Pred> bool holds(caf::scoped_actor& self, Pred pred) {
  auto& box = self->mailbox();
  if (box.size() == 0) // also moves new arrivals into the queue
    return false;
  bool found = false;
  box.queue().peek_all(
      [&](const caf::mailbox_element& x) { found = found || pred(x); });
  return found;
}

template <class Handle>
void await_down(virtual_system& vs, const std::vector<Handle>& xs) {
  caf::scoped_actor self{vs.sys()};
  for (const auto& x : xs)
    self->monitor(x);
  auto all_down = [&] {
    return self->mailbox().size() == xs.size(); // only down messages come
  };
  if (!vs.run_until(all_down))
    FAIL("actors did not finish");
  for (size_t i = 0; i < xs.size(); ++i)
    self->receive([](const caf::down_msg&) {});
}

void await_down(virtual_system& vs, const server_actor& server) {
  await_down(vs, std::vector<server_actor>{server});
}

/// A hand-driven client: sends whatever frames the test builds, and waits
/// for the answers in virtual time.
class rogue_client {
public:
  rogue_client(virtual_system& vs, server_link server)
      : vs_(vs), self_(vs.sys()), server_(std::move(server)) {}

  /// Sends a request and waits for its answer (at most one is open; no
  /// timer, so that no late timeout waits in the mailbox).
  template <class Atom> frame ask(Atom atom, frame f) {
    auto reply_to = self_->request(server_, caf::infinite, atom, std::move(f));
    REQUIRE(vs_.run_until([this] {
      return holds(self_, [](const caf::mailbox_element& x) {
        return x.mid.is_response();
      });
    }));
    frame reply;
    reply_to.receive([&](frame& r) { reply = std::move(r); },
                     [&](caf::error& e) {
                       FAIL("transport error: " << self_->system().render(e));
                     });
    return reply;
  }

  /// Sends a request without waiting for its answer (at most one is open).
  template <class Atom> void send(Atom atom, frame f) {
    pending_.emplace(
        self_->request(server_, caf::infinite, atom, std::move(f)));
  }

  /// True iff the answer to send()'s request came within `limit` of
  /// virtual time.
  bool answered(caf::timespan limit) {
    return vs_.run_until(
        [this] {
          return holds(self_, [](const caf::mailbox_element& x) {
            return x.mid.is_response();
          });
        },
        limit);
  }

  /// The answer to send()'s request. REQUIRES: answered().
  frame take() {
    frame reply;
    pending_->receive([&](frame& r) { reply = std::move(r); },
                      [&](caf::error& e) {
                        FAIL("transport error: " << self_->system().render(e));
                      });
    pending_.reset();
    return reply;
  }

  /// Waits for the next round (or task) announcement; skips other unasked
  /// messages (a rejection of its update).
  msg::round_start next_round() {
    std::optional<msg::round_start> out;
    while (!out) {
      auto [a, f] = next_told();
      if (a != round_atom::value)
        continue;
      auto x = msg::decode<msg::round_start>(f);
      REQUIRE(x);
      out = *x;
    }
    return *out;
  }

  template <class T> T expect(caf::atom_value expected_atom) {
    auto [a, f] = next_told();
    CHECK(a == expected_atom);
    auto x = msg::decode<T>(f);
    REQUIRE(x);
    return *x;
  }

private:
  /// The next message the server sent unasked.
  std::pair<caf::atom_value, frame> next_told() {
    auto told = [](const caf::mailbox_element& x) {
      return x.content().match_elements<caf::atom_value, frame>();
    };
    if (!vs_.run_until([&] { return holds(self_, told); }))
      FAIL("nothing arrived");
    std::pair<caf::atom_value, frame> out;
    self_->receive([&](caf::atom_value a, frame& f) {
      out = {a, std::move(f)};
    });
    return out;
  }

  virtual_system& vs_;
  caf::scoped_actor self_;
  server_link server_;
  std::optional<decltype(std::declval<caf::scoped_actor&>()->request(
      std::declval<server_link&>(), caf::infinite, fetch_atom::value, frame{}))>
      pending_;
};

/// The server_configs a run_options stands for, planned as `fedcaf server`
/// plans them.
aggregation_plan plan_of(const run_options& o) {
  server_config sc;
  sc.num_clients = o.clients + o.silent;
  sc.clients_per_round = o.clients_per_round;
  sc.aggregator = rule_of(o.aggregator);
  sc.rule = o.rule;
  sc.rule.client_weights_mode = o.weights;
  sc.memory_mode = parse_word<memory_mode>(o.memory_mode).value();
  sc.round_deadline_s = static_cast<double>(o.deadline.count()) / 1000;
  sc.on_deadline =
      o.wait_after_deadline ? deadline_action::wait : deadline_action::fail;
  auto plan = plan_aggregation(sc);
  REQUIRE_MESSAGE(plan, plan.err().message);
  return *plan;
}

server_side_options side_options(const run_options& o) {
  server_side_options so;
  so.plan = plan_of(o);
  so.scheduler.num_rounds = o.rounds;
  so.scheduler.num_clients = o.clients + o.silent;
  so.scheduler.min_clients = o.min_clients;
  so.scheduler.clients_per_round = o.clients_per_round;
  so.server.num_clients = o.clients + o.silent;
  so.server.num_rounds = o.rounds;
  so.server.chunk_bytes = o.chunk_bytes;
  so.server.window = o.window;
  so.server.client_configs_yaml = "{}";
  so.server.linger = 2000ms;
  so.fold_delay = o.fold_delay;
  so.idle_timeout = o.idle_timeout;
  so.rule = o.rule;
  if (o.rule.dp_clip_norm > 0)
    so.server.client_configs_yaml = "{train_configs: {update_clip_norm: " +
                                    std::to_string(o.rule.dp_clip_norm) + "}}";
  so.server.dp_noise_multiplier = o.rule.dp_noise_multiplier;
  if (o.rule.norm_bound > 0 && o.declare_norm) // as load_config hands it on
    so.server.client_configs_yaml = "{train_configs: {declare_update_norm: "
                                    "true}}";
  return so;
}

federation_run run_federation(const run_options& o) {
  federation_run out;
  out.clients.resize(o.clients);
  auto layout = test_layout();
  auto eval = std::make_shared<capturing_evaluator>();
  {
    virtual_system vs;
    auto& sys = vs.sys();
    auto side =
        spawn_server_side(sys, snapshot_of(layout, initial_floats(layout)),
                          side_options(o), eval, &out.server);
    REQUIRE(side);
    std::vector<client_actor> clients;
    auto built = std::make_shared<std::atomic<int>>(0);
    for (uint32_t k = 0; k < o.clients; ++k) {
      auto delay = k + 1 == o.clients ? o.last_client_delay : 0ms;
      auto throws = k + 1 == o.clients && o.last_client_throws;
      auto factory =
          [layout, k, built, delay, throws, pause = vs.pause()](
              const client_configs&,
              const msg::welcome&) -> result<std::unique_ptr<trainer>> {
        ++*built;
        return std::make_unique<synthetic_trainer>(layout, k, samples_of(k),
                                                   delay, pause, throws);
      };
      client_options co{"C" + std::to_string(k), 10000ms};
      co.hold_model = o.hold_model;
      clients.push_back(
          spawn_client(sys, side->server, co, factory, &out.clients[k]));
    }
    // Silent clients: registered, then deaf to every round.
    std::vector<std::unique_ptr<rogue_client>> silent;
    for (uint32_t k = 0; k < o.silent; ++k) {
      silent.push_back(std::make_unique<rogue_client>(vs, side->server));
      auto hello = msg::hello{"Silent" + std::to_string(k), ""};
      if (!msg::decode<msg::welcome>(
              silent.back()->ask(hello_atom::value, msg::encode(hello))))
        FAIL("a silent client was refused");
    }
    await_down(vs, {side->server});
    await_down(vs, clients);
    side->shut_down(sys);
    out.trainers_built = *built;
  }
  out.final_model = eval->last();
  out.evaluations = eval->count();
  return out;
}

void check_close(const model_floats& got, const model_floats& want) {
  REQUIRE(got.size() == want.size());
  size_t bad = 0;
  for (size_t t = 0; t < got.size(); ++t) {
    REQUIRE(got[t].size() == want[t].size());
    for (size_t j = 0; j < got[t].size(); ++j) {
      auto tolerance = 1e-6 * std::max(1.0, std::fabs(double{want[t][j]}));
      if (std::fabs(double{got[t][j]} - want[t][j]) > tolerance)
        ++bad;
    }
  }
  CHECK(bad == 0);
}

} // namespace

TEST_CASE("incremental FedAvg equals whole-model FedAvg for any chunk size") {
  auto layout = test_layout();
  // 64 and 4096 split tensors; 1 MiB packs the whole model in one chunk.
  for (const char* mode : {"ram", "window"}) {
    for (uint64_t chunk : {64u, 200u, 4096u, 65536u, 1u << 20}) {
      for (auto weights :
           {client_weighting::equal, client_weighting::sample_size}) {
        CAPTURE(mode);
        CAPTURE(chunk);
        CAPTURE(name_of(weights));
        run_options o;
        o.memory_mode = mode;
        o.chunk_bytes = chunk;
        o.weights = weights;
        o.rounds = 2;
        auto run = run_federation(o);
        CHECK(run.server.failure == "");
        REQUIRE(run.server.rounds.size() == 2);
        CHECK(run.evaluations == 2);
        check_close(run.final_model,
                    reference_fedavg(layout, o.clients, o.rounds,
                                     weights == client_weighting::sample_size));
        for (const auto& c : run.clients) {
          CHECK(c.failure == "");
          CHECK(c.rounds.size() == 2);
        }
        CHECK(run.server.rounds[0].bytes_down ==
              o.clients * layout.total_bytes());
      }
    }
  }
}

TEST_CASE("a client that never answers sits out after the round deadline") {
  for (const char* mode : {"ram", "window"}) {
    CAPTURE(mode);
    run_options o;
    o.memory_mode = mode;
    o.clients = 2;
    o.silent = 1;
    o.min_clients = 2;
    o.deadline = 700ms;
    o.rounds = 2;
    auto run = run_federation(o);
    CHECK(run.server.failure == "");
    REQUIRE(run.server.rounds.size() == 2);
    for (const auto& r : run.server.rounds) {
      CHECK(r.clients == 2);
      CHECK(r.missing_clients == std::vector<std::string>{"Silent0"});
    }
    // Round 1 waited for the deadline; round 2 did not choose the client
    // that missed it (it was not heard from since).
    CHECK(run.server.rounds[0].wall_seconds >= 0.6);
    CHECK(run.server.rounds[1].wall_seconds < 0.6);
    check_close(run.final_model, reference_fedavg(test_layout(), 2, 2, false));
  }
  SUBCASE("with fewer than min_clients the run fails and names the missing") {
    run_options o;
    o.clients = 1;
    o.silent = 1;
    o.min_clients = 2;
    o.deadline = 300ms;
    o.rounds = 1;
    auto run = run_federation(o);
    CHECK(run.server.failure.find("Silent0") != std::string::npos);
    CHECK(run.server.failure.find("min_clients is 2") != std::string::npos);
  }
  SUBCASE("on_deadline: wait goes on once min_clients have offered") {
    for (bool wait : {true, false}) {
      CAPTURE(wait);
      run_options o;
      o.clients = 2;
      o.min_clients = 2;
      o.deadline = 200ms;
      o.last_client_delay = 700ms;
      o.wait_after_deadline = wait;
      o.rounds = 1;
      auto run = run_federation(o);
      if (wait) {
        CHECK(run.server.failure == "");
        REQUIRE(run.server.rounds.size() == 1);
        CHECK(run.server.rounds[0].clients == 2);
        CHECK(run.server.rounds[0].wall_seconds >= 0.6);
        check_close(run.final_model,
                    reference_fedavg(test_layout(), 2, 1, false));
      } else {
        CHECK(run.server.failure.find("C1") != std::string::npos);
      }
    }
  }
}

TEST_CASE("an honest client that trains past its round's end sits that "
          "round out and stays in the run") {
  // C2 trains 300 ms a round, the deadline is 200 ms: each round ends
  // without it, and its offer comes for a round already over.
  run_options o;
  o.clients = 3;
  o.min_clients = 2;
  o.deadline = 200ms;
  o.last_client_delay = 300ms;
  o.rounds = 3;
  auto run = run_federation(o);
  CHECK(run.server.failure == "");
  REQUIRE(run.server.rounds.size() == 3);
  for (const auto& r : run.server.rounds) {
    CHECK(r.clients == 2);
    CHECK(r.missing_clients == std::vector<std::string>{"C2"});
  }
  CHECK(run.clients[2].failure == ""); // told not_in_round, not wrong_round
  CHECK(run.clients[0].failure == "");
}

TEST_CASE("a slow aggregator holds every client to its window") {
  for (const char* mode : {"ram", "window"})
    for (uint32_t window : {1u, 3u}) {
      CAPTURE(mode);
      CAPTURE(window);
      run_options o;
      o.memory_mode = mode;
      o.clients = 2;
      o.rounds = 1;
      o.chunk_bytes = 8192;
      o.window = window;
      o.fold_delay = 2ms;
      auto run = run_federation(o);
      CHECK(run.server.failure == "");
      for (const auto& c : run.clients) {
        CHECK(c.failure == "");
        // Never more than the window, and the window was really used.
        CHECK(c.peak_in_flight == window);
      }
      check_close(run.final_model,
                  reference_fedavg(test_layout(), 2, 1, false));
    }
}

namespace {

frame chunk_with(const msg::chunk_header& h, std::span<const std::byte> bytes) {
  return msg::encode_chunk(h, bytes.size(), [&](std::span<std::byte> dst) {
    std::memcpy(dst.data(), bytes.data(), bytes.size());
  });
}

errc refusal_of(const frame& reply) {
  auto c = msg::decode<msg::credit>(reply);
  REQUIRE_FALSE(c);
  return c.err().code;
}

} // namespace

TEST_CASE("bad chunks are refused with typed errors and change nothing") {
  auto layout = test_layout();
  run_options o;
  o.clients = 1;
  o.rounds = 1;
  o.chunk_bytes = 4096;
  auto eval = std::make_shared<capturing_evaluator>();
  run_report report;
  std::vector<float> update(layout.total_bytes() / sizeof(float));
  for (size_t i = 0; i < update.size(); ++i)
    update[i] = 0.25f * static_cast<float>(i % 1001);
  auto bytes = std::as_bytes(std::span{update});
  {
    virtual_system vs;
    auto& sys = vs.sys();
    auto side =
        spawn_server_side(sys, snapshot_of(layout, initial_floats(layout)),
                          side_options(o), eval, &report);
    REQUIRE(side);
    rogue_client rogue{vs, side->server};
    CHECK(msg::decode<msg::welcome>(
        rogue.ask(hello_atom::value, msg::encode(msg::hello{"Rogue", ""}))));
    // A second hello under the same name is refused.
    auto again = msg::decode<msg::welcome>(
        rogue.ask(hello_atom::value, msg::encode(msg::hello{"Rogue", ""})));
    REQUIRE_FALSE(again);
    CHECK(again.err().code == errc::unknown_client);

    auto rs = rogue.expect<msg::round_start>(round_atom::value);
    auto plan = chunk_plan::make(rs.model, rs.chunk_bytes);
    REQUIRE(plan);
    // An offer for another round is refused.
    msg::offer off{
        rs.round + 1,        "Rogue", 10, digest(layout), layout.total_bytes(),
        plan->chunk_count(), 0,       0};
    CHECK_FALSE(msg::decode<msg::accept>(
        rogue.ask(offer_atom::value, msg::encode(off))));
    off.round = rs.round;
    auto acc = msg::decode<msg::accept>(
        rogue.ask(offer_atom::value, msg::encode(off)));
    REQUIRE(acc);

    auto header = [&](uint64_t seq) {
      const auto& e = plan->extent(seq);
      return msg::chunk_header{acc->stream_id, rs.round, seq, e.tensor_index,
                               e.tensor_offset};
    };
    auto payload = [&](uint64_t seq) {
      const auto& e = plan->extent(seq);
      return bytes.subspan(e.model_offset, e.bytes);
    };
    auto send = [&](const frame& f) { return rogue.ask(chunk_atom::value, f); };

    // Bad checksum: one payload byte flipped after encoding.
    auto flipped = chunk_with(header(0), payload(0));
    flipped[flipped.size() - 64] ^= 0x01;
    CHECK(refusal_of(send(flipped)) == errc::bad_checksum);
    // Wrong offset inside the tensor.
    auto h = header(0);
    h.byte_offset += 4;
    CHECK(refusal_of(send(chunk_with(h, payload(0)))) == errc::out_of_range);
    // Out of order: chunk 1 before chunk 0.
    CHECK(refusal_of(send(chunk_with(header(1), payload(1)))) ==
          errc::bad_sequence);
    // Another round.
    h = header(0);
    h.round += 1;
    CHECK(refusal_of(send(chunk_with(h, payload(0)))) == errc::wrong_round);
    // A stream that was never opened.
    h = header(0);
    h.stream_id = 999;
    CHECK(refusal_of(send(chunk_with(h, payload(0)))) == errc::unknown_stream);
    // Truncated and garbage frames.
    auto whole = chunk_with(header(0), payload(0));
    CHECK(refusal_of(send(frame(whole.begin(), whole.begin() + 40))) ==
          errc::malformed_frame);
    CHECK(refusal_of(send(frame(64, '\x7f'))) == errc::malformed_frame);
    // Ending the stream early.
    CHECK(refusal_of(rogue.ask(end_atom::value,
                               msg::encode(msg::end_of_stream{
                                   acc->stream_id, plan->chunk_count()}))) ==
          errc::bad_sequence);

    // The node is still up: the good stream goes through, and a duplicate
    // of an accepted chunk is refused.
    CHECK(msg::decode<msg::credit>(send(chunk_with(header(0), payload(0)))));
    CHECK(refusal_of(send(chunk_with(header(0), payload(0)))) ==
          errc::bad_sequence);
    for (uint64_t s = 1; s < plan->chunk_count(); ++s)
      REQUIRE(
          msg::decode<msg::credit>(send(chunk_with(header(s), payload(s)))));
    auto closed = msg::decode<msg::stream_closed>(rogue.ask(
        end_atom::value,
        msg::encode(msg::end_of_stream{acc->stream_id, plan->chunk_count()})));
    REQUIRE(closed);
    CHECK(closed->bytes_received == layout.total_bytes());
    auto d = rogue.expect<msg::done>(done_atom::value);
    CHECK(d.reason == "");
    await_down(vs, {side->server});
    side->shut_down(sys);
  }
  CHECK(report.failure == "");
  // Eleven refusals above (hello, offer, nine chunk or end frames), each
  // counted in the server's report.
  CHECK(report.refusals == 11);
  // The accumulator saw only the good chunks: the model is the average of
  // one client with weight 1, bit for bit.
  auto expected =
      one_update_mean(layout, o.chunk_bytes, initial_floats(layout), update);
  auto got = eval->last();
  REQUIRE(got.size() == layout.tensors.size());
  size_t at = 0;
  for (const auto& t : got) {
    CHECK(std::memcmp(t.data(), expected.data() + at,
                      t.size() * sizeof(float)) == 0);
    at += t.size();
  }
}

TEST_CASE("another client's stream and a poisoned update are refused, the "
          "round ends with the honest update") {
  auto layout = test_layout();
  for (std::string mode : {"ram", "window"}) {
    CAPTURE(mode);
    run_options o;
    o.clients = 2;
    o.rounds = 1;
    o.min_clients = 1;
    o.memory_mode = mode;
    auto eval = std::make_shared<capturing_evaluator>();
    run_report report;
    std::vector<float> honest(layout.total_bytes() / sizeof(float));
    for (size_t i = 0; i < honest.size(); ++i)
      honest[i] = 0.5f * static_cast<float>(i % 997);
    auto poisoned = honest;
    poisoned[3] = std::nanf("");
    {
      virtual_system vs;
      auto& sys = vs.sys();
      auto side =
          spawn_server_side(sys, snapshot_of(layout, initial_floats(layout)),
                            side_options(o), eval, &report);
      REQUIRE(side);
      rogue_client a{vs, side->server};
      rogue_client b{vs, side->server};
      REQUIRE(msg::decode<msg::welcome>(
          a.ask(hello_atom::value, msg::encode(msg::hello{"A", ""}))));
      REQUIRE(msg::decode<msg::welcome>(
          b.ask(hello_atom::value, msg::encode(msg::hello{"B", ""}))));
      auto rs = a.expect<msg::round_start>(round_atom::value);
      (void)b.expect<msg::round_start>(round_atom::value);
      auto plan = *chunk_plan::make(rs.model, rs.chunk_bytes);
      auto open = [&](rogue_client& c, const std::string& id) {
        msg::offer off{
            rs.round,           id, 10, digest(layout), layout.total_bytes(),
            plan.chunk_count(), 0,  0};
        auto acc = msg::decode<msg::accept>(
            c.ask(offer_atom::value, msg::encode(off)));
        REQUIRE(acc);
        return acc->stream_id;
      };
      auto sa = open(a, "A");
      auto sb = open(b, "B");
      auto chunk = [&](uint64_t stream, uint64_t seq,
                       const std::vector<float>& x) {
        const auto& e = plan.extent(seq);
        return chunk_with(
            {stream, rs.round, seq, e.tensor_index, e.tensor_offset},
            std::as_bytes(std::span{x}).subspan(e.model_offset, e.bytes));
      };
      // B writes into A's stream, and tries to close it: refused, and A's
      // stream is untouched (its chunk 0 is still the next one).
      CHECK(refusal_of(b.ask(chunk_atom::value, chunk(sa, 0, honest))) ==
            errc::not_authorized);
      CHECK(refusal_of(b.ask(end_atom::value, msg::encode(msg::end_of_stream{
                                                  sa, plan.chunk_count()}))) ==
            errc::not_authorized);
      // B's update carries a NaN in its first chunk: the whole update is
      // rejected, and the stream takes nothing more.
      CHECK(refusal_of(b.ask(chunk_atom::value, chunk(sb, 0, poisoned))) ==
            errc::poisoned_update);
      CHECK(refusal_of(b.ask(chunk_atom::value, chunk(sb, 1, honest))) ==
            errc::unknown_stream);
      // A uploads its whole update; the round ends with it alone.
      for (uint64_t seq = 0; seq < plan.chunk_count(); ++seq)
        REQUIRE(msg::decode<msg::credit>(
            a.ask(chunk_atom::value, chunk(sa, seq, honest))));
      REQUIRE(msg::decode<msg::stream_closed>(
          a.ask(end_atom::value,
                msg::encode(msg::end_of_stream{sa, plan.chunk_count()}))));
      await_down(vs, {side->server});
      side->shut_down(sys);
    }
    CHECK(report.failure == "");
    CHECK(report.poisoned_updates == 1);
    REQUIRE(report.rounds.size() == 1);
    CHECK(report.rounds[0].missing_clients == std::vector<std::string>{"B"});
    // The model is the average of A's update alone, bit for bit.
    auto expected =
        one_update_mean(layout, o.chunk_bytes, initial_floats(layout), honest);
    auto got = eval->last();
    size_t at = 0;
    for (const auto& t : got) {
      CHECK(std::memcmp(t.data(), expected.data() + at,
                        t.size() * sizeof(float)) == 0);
      at += t.size();
    }
  }
}

TEST_CASE("dummy clients adding 0.5 move the model by exactly 0.5 a round") {
  for (auto type : {dtype::float32, dtype::bfloat16, dtype::float16}) {
    CAPTURE(dtype_name(type));
    auto layout = synthetic_layout(8, 300000, type);
    auto initial = synthetic_model(layout, 9);
    // The expected model, element by element: init + 3 rounds x 0.5.
    auto expected = synthetic_model(layout, 9);
    auto* base = expected.bytes.data();
    for (const auto& t : layout.tensors) {
      for (size_t i = 0; i < t.byte_size / dtype_bytes(t.type); ++i)
        store_element(t.type, base, i, load_element(t.type, base, i) + 1.5f);
      base += t.byte_size;
    }
    run_options o;
    o.clients = 2;
    o.rounds = 3;
    o.chunk_bytes = 4096;
    auto eval = std::make_shared<capturing_evaluator>();
    auto saved = (std::filesystem::temp_directory_path() /
                  ("fedcaf_dummy_" + std::to_string(::getpid()) +
                   "_{round}.safetensors"))
                     .string();
    run_report report;
    {
      virtual_system vs;
      auto& sys = vs.sys();
      auto so = side_options(o);
      so.save_global_model = saved;
      auto side = spawn_server_side(sys, std::move(initial), so, eval, &report);
      REQUIRE(side);
      std::vector<run_report> client_reports(o.clients);
      std::vector<client_actor> clients;
      for (uint32_t k = 0; k < o.clients; ++k) {
        auto factory =
            [layout](const client_configs&,
                     const msg::welcome&) -> result<std::unique_ptr<trainer>> {
          return make_dummy_trainer(layout, 0.5f, 1);
        };
        clients.push_back(spawn_client(sys, side->server,
                                       {"D" + std::to_string(k), 10000ms},
                                       factory, &client_reports[k]));
      }
      await_down(vs, {side->server});
      await_down(vs, clients);
      side->shut_down(sys);
    }
    CHECK(report.failure == "");
    auto got = eval->last_bytes();
    REQUIRE(got.size() == expected.bytes.size());
    CHECK(std::memcmp(got.data(), expected.bytes.data(), got.size()) == 0);
    // Each round's model went to its own safetensors file; the last one is
    // the expected model, byte for byte.
    for (int r = 1; r <= 3; ++r) {
      auto path = saved;
      path.replace(path.find("{round}"), 7, std::to_string(r));
      auto file = safetensors_file::open(path);
      REQUIRE(file);
      CHECK(file->layout() == layout);
      CHECK(file->metadata().at("fedcaf_round") == std::to_string(r));
      if (r == 3) {
        size_t at = 0;
        for (auto t : file->view().tensors) {
          CHECK(std::memcmp(t.data(), expected.bytes.data() + at, t.size()) ==
                0);
          at += t.size();
        }
      }
      std::filesystem::remove(path);
    }
  }
}

TEST_CASE("an exception in a client actor ends that client as failed") {
  // The third client's training throws std::bad_alloc; the other two go on
  // (min_clients 2) without it, for the 2 rounds run_options holds.
  run_options o;
  o.clients = 3;
  o.min_clients = 2;
  o.last_client_throws = true;
  auto run = run_federation(o);
  CHECK(run.clients[2].failure ==
        "out_of_memory: an allocation failed (std::bad_alloc, unhandled)");
  CHECK(run.clients[0].failure == "");
  CHECK(run.clients[1].failure == "");
  CHECK(run.server.rounds.size() == 2);
}

/// Synthetic clients C0, C1, ... (one per report) of `server`: client k's
/// update is synthetic_trainer(layout, k, 1)'s.
std::vector<client_actor> synthetic_clients(caf::actor_system& sys,
                                            const server_actor& server,
                                            const manifest& layout,
                                            std::vector<run_report>& reports) {
  std::vector<client_actor> clients;
  for (uint32_t k = 0; k < reports.size(); ++k) {
    auto factory =
        [layout, k](const client_configs&,
                    const msg::welcome&) -> result<std::unique_ptr<trainer>> {
      return std::make_unique<synthetic_trainer>(layout, k, 1);
    };
    clients.push_back(spawn_client(
        sys, server, {"C" + std::to_string(k), 10000ms}, factory, &reports[k]));
  }
  return clients;
}

TEST_CASE("an offer of a round being finalized is told to sit it out") {
  // C0 and C1 deliver; R, a participant that trained past the 200 ms
  // deadline, offers at 300 ms, while the round's model is evaluated
  // (250 ms from 200 ms): the round is over for it (not_in_round, which a
  // fedcaf client sits out; wrong_round would end it).
  run_options o;
  o.clients = 2;
  o.min_clients = 2;
  o.deadline = 200ms;
  o.rounds = 2;
  auto layout = test_layout();
  run_report report;
  std::vector<run_report> client_reports(2);
  std::optional<error> got;
  {
    virtual_system vs;
    auto so = side_options(o);
    so.scheduler.num_clients = so.server.num_clients = 3;
    auto side = spawn_server_side(
        vs.sys(), snapshot_of(layout, initial_floats(layout)), so,
        std::make_shared<capturing_evaluator>(vs.pause(), 250ms), &report);
    REQUIRE(side);
    rogue_client r{vs, side->server};
    REQUIRE(msg::decode<msg::welcome>(
        r.ask(hello_atom::value, msg::encode(msg::hello{"R", ""}))));
    auto clients =
        synthetic_clients(vs.sys(), side->server, layout, client_reports);
    auto rs = r.next_round();
    auto plan = chunk_plan::make(rs.model, rs.chunk_bytes);
    REQUIRE(plan);
    vs.at(300ms, [&] {
      r.send(offer_atom::value,
             msg::encode(msg::offer{rs.round, "R", 1, digest(layout),
                                    layout.total_bytes(), plan->chunk_count(),
                                    0, 0}));
    });
    REQUIRE(r.answered(10s));
    auto a = msg::decode<msg::accept>(r.take());
    REQUIRE_FALSE(a);
    got = a.err();
    await_down(vs, {side->server});
    await_down(vs, clients);
    side->shut_down(vs.sys());
  }
  REQUIRE(got);
  CHECK(got->code == errc::not_in_round);
  CHECK(report.failure == "");
}

TEST_CASE("a client cut off mid-upload: kept where it arrived, or discarded") {
  // Two synthetic clients and a hand-driven one that offers, sends its
  // first `cut` chunks and vanishes; it is dropped after the grace period.
  // With no chunk sent, it simply leaves: the others upload once.
  auto layout = test_layout();
  auto start = initial_floats(layout);
  std::vector<float> rogue_update(layout.total_bytes() / sizeof(float), 9.0f);
  auto rogue_bytes = std::as_bytes(std::span{rogue_update});
  for (uint64_t cut : {3, 0})
    for (auto policy : {partial_updates::keep, partial_updates::discard}) {
      for (std::string mode : {"ram", "window"}) {
        CAPTURE(cut);
        CAPTURE(name_of(policy));
        CAPTURE(mode);
        run_options o;
        o.clients = 2;
        o.silent = 1; // the hand-driven client's place
        o.min_clients = 2;
        o.rounds = 1;
        o.memory_mode = mode;
        o.rule.partial_updates = policy;
        auto so = side_options(o);
        so.server.reconnect_grace = 300ms;
        auto eval = std::make_shared<capturing_evaluator>();
        run_report report;
        std::vector<run_report> client_reports(2);
        uint64_t cut_offset = 0;
        {
          virtual_system vs;
          auto& sys = vs.sys();
          auto side = spawn_server_side(sys, snapshot_of(layout, start), so,
                                        eval, &report);
          REQUIRE(side);
          auto rogue = std::make_unique<rogue_client>(vs, side->server);
          REQUIRE(msg::decode<msg::welcome>(rogue->ask(
              hello_atom::value, msg::encode(msg::hello{"Cut", ""}))));
          auto clients =
              synthetic_clients(sys, side->server, layout, client_reports);
          auto rs = rogue->expect<msg::round_start>(round_atom::value);
          auto plan = chunk_plan::make(rs.model, rs.chunk_bytes);
          REQUIRE(plan);
          cut_offset = plan->extent(cut).model_offset;
          auto acc = msg::decode<msg::accept>(rogue->ask(
              offer_atom::value,
              msg::encode(msg::offer{rs.round, "Cut", 1, digest(layout),
                                     layout.total_bytes(), plan->chunk_count(),
                                     0, 0})));
          REQUIRE(acc);
          for (uint64_t s = 0; s < cut; ++s) {
            const auto& e = plan->extent(s);
            msg::chunk_header h{acc->stream_id, rs.round, s, e.tensor_index,
                                e.tensor_offset};
            REQUIRE(msg::decode<msg::credit>(rogue->ask(
                chunk_atom::value,
                chunk_with(h, rogue_bytes.subspan(e.model_offset, e.bytes)))));
          }
          rogue.reset(); // gone for good
          await_down(vs, {side->server});
          await_down(vs, clients);
          side->shut_down(sys);
        }
        CHECK(report.failure == "");
        REQUIRE(report.rounds.size() == 1);
        CHECK(report.rounds[0].clients == 2);
        CHECK(report.rounds[0].missing_clients ==
              std::vector<std::string>{"Cut"});
        // Expected: the two clients' mean, and where the cut-off update
        // arrived (kept), the mean of all three.
        auto want = reference_fedavg(layout, 2, 1, false);
        // With nothing of the cut-off update folded, the two clients'
        // updates are sent once (frames: a little over 2 x model; sent
        // again: over 4 x).
        if (cut == 0)
          CHECK(report.rounds[0].bytes_up < 3 * layout.total_bytes());
        if (policy == partial_updates::keep) {
          uint64_t at = 0;
          for (size_t t = 0; t < want.size(); ++t)
            for (size_t j = 0; j < want[t].size(); ++j, at += sizeof(float))
              if (at < cut_offset)
                want[t][j] = static_cast<float>(
                    (2.0 * want[t][j] + rogue_update[at / sizeof(float)]) / 3);
        }
        check_close(eval->last(), want);
        for (const auto& c : client_reports)
          CHECK(c.failure == "");
      }
    }
}

TEST_CASE("another update offered over a cut-off one is never mixed with it") {
  // A hand-driven client offers update 11, sends 3 chunks, and (as a
  // restarted process that trained again would) offers update 22: the
  // second is refused and the first rejected; its 3 chunks (checked) stay
  // where they went, nobody uploads again, and the round ends with each
  // position the mean of the updates that reached it, whether partial
  // updates are kept.
  auto layout = test_layout();
  std::vector<float> rogue_update(layout.total_bytes() / sizeof(float), 9.0f);
  auto rogue_bytes = std::as_bytes(std::span{rogue_update});
  for (auto policy : {partial_updates::keep, partial_updates::discard})
    for (std::string mode : {"ram", "window"}) {
      CAPTURE(name_of(policy));
      CAPTURE(mode);
      run_options o;
      o.clients = 2;
      o.silent = 1;
      o.min_clients = 2;
      o.rounds = 1;
      o.memory_mode = mode;
      o.rule.partial_updates = policy;
      auto so = side_options(o);
      so.server.reconnect_grace = 300ms;
      auto eval = std::make_shared<capturing_evaluator>();
      run_report report;
      std::vector<run_report> client_reports(2);
      {
        virtual_system vs;
        auto& sys = vs.sys();
        auto side =
            spawn_server_side(sys, snapshot_of(layout, initial_floats(layout)),
                              so, eval, &report);
        REQUIRE(side);
        auto rogue = std::make_unique<rogue_client>(vs, side->server);
        REQUIRE(msg::decode<msg::welcome>(
            rogue->ask(hello_atom::value, msg::encode(msg::hello{"Cut", ""}))));
        auto clients =
            synthetic_clients(sys, side->server, layout, client_reports);
        auto rs = rogue->expect<msg::round_start>(round_atom::value);
        auto plan = chunk_plan::make(rs.model, rs.chunk_bytes);
        REQUIRE(plan);
        auto offer = [&](uint64_t update_id) {
          msg::offer x{rs.round,
                       "Cut",
                       1,
                       digest(layout),
                       layout.total_bytes(),
                       plan->chunk_count(),
                       0,
                       0};
          x.update_id = update_id;
          return msg::decode<msg::accept>(
              rogue->ask(offer_atom::value, msg::encode(x)));
        };
        auto acc = offer(11);
        REQUIRE(acc);
        for (uint64_t s = 0; s < 3; ++s) {
          const auto& e = plan->extent(s);
          msg::chunk_header h{acc->stream_id, rs.round, s, e.tensor_index,
                              e.tensor_offset};
          REQUIRE(msg::decode<msg::credit>(rogue->ask(
              chunk_atom::value,
              chunk_with(h, rogue_bytes.subspan(e.model_offset, e.bytes)))));
        }
        auto again = offer(11); // the same update resumes where it was
        REQUIRE(again);
        CHECK(again->next_sequence == 3);
        auto other = offer(22);
        REQUIRE_FALSE(other);
        CHECK(other.err().code == errc::not_in_round);
        CHECK_FALSE(offer(11)); // it sits the round out
        rogue.reset();
        await_down(vs, {side->server});
        await_down(vs, clients);
        side->shut_down(sys);
      }
      CHECK(report.failure == "");
      REQUIRE(report.rounds.size() == 1);
      CHECK(report.rounds[0].clients == 2);
      auto plan = *chunk_plan::make(layout, so.server.chunk_bytes);
      check_close(
          eval->last(),
          reference_with_prefix(layout, 2, rogue_update,
                                plan.extent(3).model_offset / sizeof(float)));
      for (const auto& c : client_reports)
        CHECK(c.bytes_sent == layout.total_bytes()); // once
    }
}

/// One round of two synthetic clients and a hand-driven relay "R" (at
/// most 20 clients under it; 3 contributors awaited, the default update
/// bound on; `relay`: else R is a plain client) in `memory_mode`, its
/// Welcome's gridSums `grid_sums`:
/// `drive(R, its round start, the round's plan)` plays R. Returns the
/// side's report and the round's model.
std::pair<run_report, model_floats>
relay_round(const std::function<void(rogue_client&, const msg::round_start&,
                                     const chunk_plan&)>& drive,
            const std::string& memory_mode = "ram", bool grid_sums = false,
            bool relay = true) {
  auto layout = test_layout();
  run_options o;
  o.memory_mode = memory_mode;
  o.clients = 2;
  o.silent = 1;
  o.min_clients = 3;
  o.rounds = 1;
  auto so = side_options(o);
  if (relay) // else R is a client like the others
    so.scheduler.relays = {{"R", 20}};
  so.rule.max_update_ratio = 10; // the default bound, on
  so.server.terms.grid_sums = so.server.terms.chunk_float_sums = grid_sums;
  auto eval = std::make_shared<capturing_evaluator>();
  run_report report;
  std::vector<run_report> client_reports(2);
  {
    virtual_system vs;
    auto& sys = vs.sys();
    auto side = spawn_server_side(
        sys, snapshot_of(layout, initial_floats(layout)), so, eval, &report);
    REQUIRE(side);
    rogue_client relay{vs, side->server};
    REQUIRE(msg::decode<msg::welcome>(
        relay.ask(hello_atom::value, msg::encode(msg::hello{"R", ""}))));
    auto clients = synthetic_clients(sys, side->server, layout, client_reports);
    auto rs = relay.expect<msg::round_start>(round_atom::value);
    auto plan = chunk_plan::make(rs.model, rs.chunk_bytes);
    REQUIRE(plan);
    drive(relay, rs, *plan);
    await_down(vs, clients);
    side->shut_down(sys);
  }
  return {std::move(report), eval->last()};
}

/// R's offer of round `rs` over `plan`: of `weight`, a partial sum iff
/// `partial`, its sums on the grid iff `grid`.
result<msg::accept> relay_offer(rogue_client& relay, const msg::round_start& rs,
                                const chunk_plan& plan, bool partial,
                                uint64_t weight, bool grid = false) {
  auto layout = test_layout();
  msg::offer x{
      rs.round,           "R",     weight, digest(layout), layout.total_bytes(),
      plan.chunk_count(), 1.7e308, 0};
  x.partial_sum = partial;
  x.grid_sums = grid;
  x.update_id = 5;
  return msg::decode<msg::accept>(relay.ask(offer_atom::value, msg::encode(x)));
}

/// R streams `bytes` (the model's size) as accepted stream `a`, and ends it;
/// where `floats` is given, its odd chunks are those of `floats`, flagged
/// Chunk.floatSums (a streaming relay's positions off the grid).
void relay_upload(rogue_client& relay, const msg::round_start& rs,
                  const chunk_plan& plan, const msg::accept& a,
                  std::span<const std::byte> bytes,
                  std::span<const std::byte> floats = {}) {
  for (uint64_t s = 0; s < plan.chunk_count(); ++s) {
    const auto& e = plan.extent(s);
    msg::chunk_header h{a.stream_id, rs.round, s, e.tensor_index,
                        e.tensor_offset};
    h.float_sums = !floats.empty() && s % 2 == 1;
    auto from = h.float_sums ? floats : bytes;
    REQUIRE(msg::decode<msg::credit>(
        relay.ask(chunk_atom::value,
                  chunk_with(h, from.subspan(e.model_offset, e.bytes)))));
  }
  REQUIRE(msg::decode<msg::stream_closed>(relay.ask(
      end_atom::value,
      msg::encode(msg::end_of_stream{a.stream_id, plan.chunk_count()}))));
}

TEST_CASE("a relay's partial sum weighs its clients, at most as many as "
          "server_configs.relays allows") {
  // Two synthetic clients and a hand-driven relay "R" (at most 20 clients
  // under it) whose partial sum is that of 20 updates g + 0.5: R must
  // offer a partial sum, of weight 1 to 20 (a weight-0 offer after it
  // withdraws nothing); the sum, about 19 |g| from g,
  // passes the default update bound (10 |g|) as 20 updates 0.5 from g do;
  // the round's model is (c0 + c1 + 20 (g + 0.5)) / 22. Its loss, finite
  // but huge (1.7e308), counts as 1e12: the round's mean loss stays
  // finite (a sum of 1.7e308s is not), so a relay's mean of such losses is one
  // its parent takes.
  auto layout = test_layout();
  auto g = initial_floats(layout);
  std::vector<float> sums;
  for (const auto& t : g)
    for (auto x : t)
      sums.push_back(20 * (x + 0.5f));
  auto [report, model] =
      relay_round([&](rogue_client& relay, const msg::round_start& rs,
                      const chunk_plan& plan) {
        auto whole = relay_offer(relay, rs, plan, false, 2);
        REQUIRE_FALSE(whole);
        CHECK(whole.err().code == errc::not_authorized);
        auto heavy = relay_offer(relay, rs, plan, true, 21);
        REQUIRE_FALSE(heavy);
        CHECK(heavy.err().code == errc::out_of_range);
        auto acc = relay_offer(relay, rs, plan, true, 20);
        REQUIRE(acc);
        // A sum of weight 0 says "my group has nothing this round"; after a sum
        // of the round it withdraws nothing: the first stands (not_in_round).
        auto withdraw = relay_offer(relay, rs, plan, true, 0);
        REQUIRE_FALSE(withdraw);
        CHECK(withdraw.err().code == errc::not_in_round);
        relay_upload(relay, rs, plan, *acc, std::as_bytes(std::span{sums}));
      });
  CHECK(report.failure == "");
  REQUIRE(report.rounds.size() == 1);
  CHECK(report.rounds[0].clients == 3);
  CHECK(std::isfinite(report.rounds[0].train_loss));
  CHECK(report.rounds[0].train_loss > 0.3e12); // a mean of 3 contributors
  CHECK(report.rounds[0].train_loss <= 1e12);
  auto want = reference_fedavg(layout, 2, 1, false);
  for (size_t t = 0; t < want.size(); ++t)
    for (size_t j = 0; j < want[t].size(); ++j)
      want[t][j] = (2 * want[t][j] + 20 * (g[t][j] + 0.5f)) / 22;
  check_close(model, want);
}

TEST_CASE("a relay's int32 sums on the grid are folded as they are by a "
          "server that offered it, in every memory mode, chunks flagged "
          "floatSums as floats, and refused by any other and from a plain "
          "client") {
  // gridSums in the Welcome: R's int32 sums on the server's grid are all
  // 0: its sum is 20 g exactly, and the round's model (c0 + c1 + 20 g) /
  // 22 (read as floats, the zeros would be a sum of 0: the model (c0 +
  // c1) / 22), in ram mode and in window mode (open positions sum on the
  // same grid). A server whose Welcome did not offer it refuses R's grid
  // offer (manifest_mismatch), and takes its sum 20 g as floats then.
  auto layout = test_layout();
  auto g = initial_floats(layout);
  // The round's model: the two clients' updates and R's g of weight w.
  auto with_g = [&](float w) {
    auto want = reference_fedavg(layout, 2, 1, false);
    for (size_t t = 0; t < want.size(); ++t)
      for (size_t j = 0; j < want[t].size(); ++j)
        want[t][j] = (2 * want[t][j] + w * g[t][j]) / (2 + w);
    return want;
  };
  std::vector<std::byte> zeros(layout.total_bytes());
  std::vector<float> sums;
  for (const auto& t : g)
    for (auto x : t)
      sums.push_back(20 * x);
  for (auto [mode, terms, mixed] :
       {std::tuple{"ram", true, false}, std::tuple{"ram", true, true},
        std::tuple{"ram", false, false}, std::tuple{"window", true, false},
        std::tuple{"window", true, true}, std::tuple{"window", false, false},
        std::tuple{"disk", true, true}}) {
    CAPTURE(mode);
    CAPTURE(terms);
    CAPTURE(mixed);
    bool taken = terms;
    auto [report, model] = relay_round(
        [&](rogue_client& relay, const msg::round_start& rs,
            const chunk_plan& plan) {
          auto whole = relay_offer(relay, rs, plan, false, 20, true);
          REQUIRE_FALSE(whole); // a relay's is a partial sum
          auto grid = relay_offer(relay, rs, plan, true, 20, true);
          if (taken) {
            // Its odd chunks as float sums 20 g (Chunk.floatSums): the
            // same model (read as int32, they would be far off the grid).
            REQUIRE(grid);
            REQUIRE(plan.chunk_count() >= 2);
            relay_upload(relay, rs, plan, *grid, zeros,
                         mixed ? std::as_bytes(std::span{sums})
                               : std::span<const std::byte>{});
            return;
          }
          REQUIRE_FALSE(grid);
          CHECK(grid.err().code == errc::manifest_mismatch);
          auto floats = relay_offer(relay, rs, plan, true, 20);
          REQUIRE(floats);
          relay_upload(relay, rs, plan, *floats,
                       std::as_bytes(std::span{sums}));
        },
        mode, terms);
    CHECK(report.failure == "");
    REQUIRE(report.rounds.size() == 1);
    CHECK(report.rounds[0].clients == 3);
    check_close(model, with_g(20));
  }
  // A plain client's update offered as sums on the grid (no partial sum):
  // refused (manifest_mismatch) where the server folds grid sums, and its
  // update then taken as one vote: the model (c0 + c1 + g) / 3. Its odd
  // chunks flagged floatSums change nothing (read in grid sums only).
  std::vector<float> own;
  for (const auto& t : g)
    own.insert(own.end(), t.begin(), t.end());
  auto [report, model] = relay_round(
      [&](rogue_client& client, const msg::round_start& rs,
          const chunk_plan& plan) {
        auto grid = relay_offer(client, rs, plan, false, 20, true);
        REQUIRE_FALSE(grid);
        CHECK(grid.err().code == errc::manifest_mismatch);
        auto plain = relay_offer(client, rs, plan, false, 20);
        REQUIRE(plain);
        relay_upload(client, rs, plan, *plain, std::as_bytes(std::span{own}),
                     std::as_bytes(std::span{own}));
      },
      "ram", true, false);
  CHECK(report.failure == "");
  REQUIRE(report.rounds.size() == 1);
  CHECK(report.rounds[0].clients == 3);
  check_close(model, with_g(1));
}

/// The side of a relay's children (relay mode): its rounds follow its
/// parent's.
server_side_options relay_side_options(const run_options& o) {
  auto so = side_options(o);
  so.server.relay = true;
  so.scheduler.num_rounds = so.server.num_rounds = 1u << 30;
  return so;
}

/// Plays a relay's upstream half: hands the children's side its parent's
/// model of a round (the initial one) and takes the answer in virtual time.
class relay_parent {
public:
  relay_parent(virtual_system& vs, manifest layout)
      : vs_(vs), self_(vs.sys()), layout_(std::move(layout)) {}

  /// With `positions`: its sum may go up on the grid as it settles.
  void hand_model(const server_actor& side,
                  std::shared_ptr<grid_positions> positions = nullptr) {
    self_->send(side, relay_atom::value,
                relay_model{std::make_shared<model_snapshot>(
                                snapshot_of(layout_, initial_floats(layout_))),
                            nullptr, nullptr, positions != nullptr, positions});
  }

  /// Hands `side` a model whose bytes come later (arrive()); returns the
  /// memory they are to be written into.
  std::byte* hand_arriving(const server_actor& side) {
    auto model = std::make_shared<model_snapshot>();
    model->layout = layout_;
    model->bytes = byte_buffer::zeroed(layout_.total_bytes());
    auto* at = model->bytes.data();
    self_->send(side, relay_atom::value,
                relay_model{std::move(model), std::make_shared<model_arrival>(),
                            nullptr});
    return at;
  }

  /// Bytes [offset, + n) were written (as the relay's download goes on).
  void arrive(const server_actor& side, uint64_t offset, uint64_t n) {
    self_->send(side, arrived_atom::value, offset, n);
  }

  /// The side's answer to the model handed down; the steps of a streaming
  /// round's sum that come before it are kept in `settled`.
  relay_result answer(caf::timespan limit = 60s) {
    std::optional<relay_result> out;
    while (!out) {
      REQUIRE(
          vs_.run_until([this] { return self_->mailbox().size() > 0; }, limit));
      self_->receive(
          [&out](relay_result& r) { out = std::move(r); },
          [this](settled_atom, const relay_step& s) {
            settled.push_back({s.ready, s.weight, s.loss, s.clients});
          },
          [this](caf::error& e) { FAIL(self_->system().render(e)); });
    }
    return std::move(*out);
  }

  /// A step of a streaming round's sum (settled_atom).
  struct step {
    uint64_t bytes;
    double weight;
    double loss;
    uint32_t clients;
  };
  std::vector<step> settled;

private:
  virtual_system& vs_;
  caf::scoped_actor self_;
  manifest layout_;
};

TEST_CASE("a relay's round short of min_clients is sat out: its parent's "
          "model is answered with no sum, and the next round follows") {
  // A relay's children's side (relay mode) with a synthetic client and a
  // silent one, min_clients 2, a 300 ms round deadline counted from the
  // parent's model. The test plays the relay's upstream half, handing the
  // side its parent's model each round (relay_atom). Each round the silent
  // client never offers; at the deadline the round holds 1 update of the 2
  // it needs. A server's run would end there; the relay's side answers its
  // parent's model with no sum (weight 0: its group sits the parent's
  // round out), waits for the next model and runs the next round. The
  // synthetic client delivers every round and stays in the run.
  auto layout = test_layout();
  run_options o;
  o.clients = 1;
  o.silent = 1;
  o.min_clients = 2;
  o.deadline = 300ms;
  o.memory_mode = "window";
  auto so = relay_side_options(o);
  run_report report;
  std::vector<run_report> client_reports(1);
  {
    virtual_system vs;
    auto& sys = vs.sys();
    auto side =
        spawn_server_side(sys, snapshot_of(layout, initial_floats(layout)), so,
                          std::make_shared<capturing_evaluator>(), &report);
    REQUIRE(side);
    auto clients = synthetic_clients(sys, side->server, layout, client_reports);
    rogue_client silent{vs, side->server};
    REQUIRE(msg::decode<msg::welcome>(
        silent.ask(hello_atom::value, msg::encode(msg::hello{"Silent0", ""}))));
    relay_parent parent{vs, layout};
    for (int round = 1; round <= 2; ++round) {
      CAPTURE(round);
      parent.hand_model(side->server);
      auto r = parent.answer();
      CHECK(r.weight == 0);
      CHECK(r.clients == 0);
      CHECK(r.sums == nullptr);
    }
    CHECK(report.failed_rounds == std::vector<uint32_t>{1, 2});
    CHECK(report.failure == "");
    caf::anon_send(side->server, stop_atom::value, std::string{});
    await_down(vs, {side->server});
    await_down(vs, clients);
    side->shut_down(sys);
  }
  CHECK(report.rounds.empty()); // no round was published
  REQUIRE(client_reports[0].failure == "");
  CHECK(client_reports[0].rounds.size() == 2); // it trained both rounds
}

TEST_CASE("a window-mode relay sitting a round out does not wait on a "
          "child cut mid-upload") {
  // Window mode, window 1, min_clients 2, a 300 ms deadline. A synthetic
  // child uploads; a hand-driven one offers and sends its first chunk,
  // then either nothing (at the deadline its stream is ended: it owes the
  // chunk the window waits for) or a NaN chunk (rejected at once). Either
  // way it leaves with a chunk in the sum, and the round cannot have 2
  // updates: it is sat out. The window must stop awaiting the cut child
  // (the synthetic child's upload closes; a relay sitting out collects
  // nothing again), and the parent's model is answered with no sum.
  for (bool poisoned : {false, true}) {
    CAPTURE(poisoned);
    auto layout = test_layout();
    run_options o;
    o.clients = 1;
    o.silent = 1;
    o.min_clients = 2;
    o.deadline = 300ms;
    o.memory_mode = "window";
    o.window = 1;
    auto so = side_options(o);
    so.server.relay = true;
    so.scheduler.num_rounds = so.server.num_rounds = 1u << 30;
    run_report report;
    std::vector<run_report> client_reports(1);
    std::vector<float> zeros(layout.total_bytes() / sizeof(float), 0.0f);
    auto zero_bytes = std::as_bytes(std::span{zeros});
    {
      virtual_system vs;
      auto& sys = vs.sys();
      auto side = spawn_server_side(
          sys, snapshot_of(layout, initial_floats(layout)), so,
          std::make_shared<capturing_evaluator>(), &report);
      REQUIRE(side);
      rogue_client cut{vs, side->server};
      REQUIRE(msg::decode<msg::welcome>(
          cut.ask(hello_atom::value, msg::encode(msg::hello{"Cut", ""}))));
      auto clients =
          synthetic_clients(sys, side->server, layout, client_reports);
      relay_parent parent{vs, layout};
      parent.hand_model(side->server);
      auto rs = cut.next_round();
      auto plan = chunk_plan::make(rs.model, rs.chunk_bytes);
      REQUIRE(plan);
      REQUIRE(plan->chunk_count() > 2);
      auto acc = msg::decode<msg::accept>(
          cut.ask(offer_atom::value,
                  msg::encode(msg::offer{rs.round, "Cut", 1, digest(layout),
                                         layout.total_bytes(),
                                         plan->chunk_count(), 0, 0})));
      REQUIRE(acc);
      const auto& e = plan->extent(0);
      msg::chunk_header h{acc->stream_id, rs.round, 0, e.tensor_index,
                          e.tensor_offset};
      REQUIRE(msg::decode<msg::credit>(
          cut.ask(chunk_atom::value,
                  chunk_with(h, zero_bytes.subspan(e.model_offset, e.bytes)))));
      if (poisoned) { // its second chunk is NaN: rejected, a chunk in the sum
        const auto& e1 = plan->extent(1);
        std::vector<float> nan(e1.bytes / sizeof(float),
                               std::numeric_limits<float>::quiet_NaN());
        msg::chunk_header h1{acc->stream_id, rs.round, 1, e1.tensor_index,
                             e1.tensor_offset};
        auto refused = msg::decode<msg::credit>(cut.ask(
            chunk_atom::value, chunk_with(h1, std::as_bytes(std::span{nan}))));
        REQUIRE_FALSE(refused);
        CHECK(refused.err().code == errc::poisoned_update);
      }
      CHECK(parent.answer().weight == 0);
      CHECK(report.failed_rounds == std::vector<uint32_t>{1});
      caf::anon_send(side->server, stop_atom::value, std::string{});
      await_down(vs, {side->server});
      await_down(vs, clients);
      side->shut_down(sys);
    }
    CHECK(report.failure == "");
    CHECK(client_reports[0].failure == "");
  }
}

TEST_CASE("a relay whose children are dropped before its parent's model "
          "comes sits that round out once the model is in") {
  // Two hand-driven children register, so the relay's round 1 is chosen and
  // its start held until the parent's model comes. One child goes away
  // and is dropped after the grace: the round cannot have min_clients 2
  // and is sat out. That must not wait for ever beside the held start: once
  // the model is in the round is chosen again (one child now), sat out,
  // and the model answered with no sum.
  auto layout = test_layout();
  run_options o;
  o.clients = 0;
  o.silent = 2;
  o.min_clients = 2;
  auto so = relay_side_options(o);
  so.server.reconnect_grace = 300ms;
  run_report report;
  {
    virtual_system vs;
    auto& sys = vs.sys();
    auto side =
        spawn_server_side(sys, snapshot_of(layout, initial_floats(layout)), so,
                          std::make_shared<capturing_evaluator>(), &report);
    REQUIRE(side);
    rogue_client stays{vs, side->server};
    REQUIRE(msg::decode<msg::welcome>(
        stays.ask(hello_atom::value, msg::encode(msg::hello{"Stays", ""}))));
    {
      rogue_client leaves{vs, side->server};
      REQUIRE(msg::decode<msg::welcome>(leaves.ask(
          hello_atom::value, msg::encode(msg::hello{"Leaves", ""}))));
    } // gone: lost, then dropped after the grace
    vs.wait(1s);
    relay_parent parent{vs, layout};
    parent.hand_model(side->server);
    CHECK(parent.answer(10s).weight == 0);
    CHECK(report.failed_rounds == std::vector<uint32_t>{1});
    CHECK(report.failure == "");
    caf::anon_send(side->server, stop_atom::value, std::string{});
    await_down(vs, {side->server});
    side->shut_down(sys);
  }
}

TEST_CASE(
    "clients sampled per round: only they train, the rest hold no model") {
  run_options o;
  o.clients = 6;
  o.clients_per_round = 2;
  o.rounds = 4;
  o.hold_model = false;
  auto run = run_federation(o);
  CHECK(run.server.failure == "");
  REQUIRE(run.server.rounds.size() == 4);
  // Replays the rounds with the clients the server reports for each.
  auto layout = test_layout();
  auto global = initial_floats(layout);
  std::set<std::set<uint32_t>> draws;
  for (const auto& r : run.server.rounds) {
    CHECK(r.clients == 2);
    std::set<uint32_t> chosen{0, 1, 2, 3, 4, 5};
    for (const auto& id : r.missing_clients)
      chosen.erase(static_cast<uint32_t>(std::stoul(id.substr(1))));
    REQUIRE(chosen.size() == 2);
    draws.insert(chosen);
    auto next = global;
    for (size_t t = 0; t < global.size(); ++t)
      for (size_t j = 0; j < global[t].size(); ++j) {
        double sum = 0;
        for (auto k : chosen)
          sum += local_update(k, t, j, global[t][j]);
        next[t][j] = static_cast<float>(sum / 2);
      }
    global = std::move(next);
  }
  check_close(run.final_model, global);
  CHECK(draws.size() > 1); // the draw changes from round to round
  // A trainer exists only for a round its client was chosen for.
  CHECK(run.trainers_built == 8);
  size_t trained = 0;
  for (const auto& c : run.clients) {
    CHECK(c.failure == "");
    trained += c.rounds.size();
  }
  CHECK(trained == 8);
}

namespace {

/// Replays an AsyncScheduler run from the server's report (which clients'
/// updates each version holds, how stale the model each trained on was)
/// with the rule's whole-model formula (Xie et al. 2019; Nguyen et al.
/// 2022), and checks the final model. Returns true iff some update was
/// trained on an older model.
bool check_async_replay(const federation_run& run, const std::string& rule,
                        double alpha, double learning_rate) {
  auto layout = test_layout();
  std::vector<model_floats> versions{initial_floats(layout)};
  bool stale = false;
  for (const auto& r : run.server.rounds) {
    REQUIRE(r.contributors.size() == r.staleness.size());
    const auto& x = versions.back();
    auto next = x;
    auto n = static_cast<double>(r.contributors.size());
    for (size_t c = 0; c < r.contributors.size(); ++c) {
      REQUIRE(r.contributors[c].substr(0, 1) == "C");
      auto k = static_cast<uint32_t>(std::stoul(r.contributors[c].substr(1)));
      auto tau = r.staleness[c];
      stale = stale || tau > 0;
      REQUIRE(tau < versions.size());
      const auto& base = versions[versions.size() - 1 - tau];
      double s = std::pow(tau + 1.0, -0.5);
      double w =
          rule == "FedAsyncAggregator" ? alpha * s : learning_rate / n * s;
      for (size_t t = 0; t < x.size(); ++t)
        for (size_t j = 0; j < x[t].size(); ++j)
          next[t][j] = static_cast<float>(
              next[t][j] + w * (local_update(k, t, j, base[t][j]) - x[t][j]));
    }
    versions.push_back(std::move(next));
  }
  check_close(run.final_model, versions.back());
  return stale;
}

/// The async rules as the tests run them: polynomial staleness, a = 0.5.
run_options async_options(const std::string& rule) {
  run_options o;
  o.clients = 3;
  o.rounds = 6;
  o.aggregator = rule;
  o.rule.alpha = 0.6;
  o.rule.staleness_fn = staleness_kind::polynomial;
  o.rule.staleness_a = 0.5;
  o.rule.buffer_k = 2;
  o.rule.server_learning_rate = 0.8;
  o.rule.partial_updates = partial_updates::keep;
  return o;
}

} // namespace

TEST_CASE(
    "FedAsync and FedBuff chunk by chunk equal their whole-model replay") {
  for (std::string rule : {"FedAsyncAggregator", "FedBuffAggregator"}) {
    for (uint64_t chunk : {200u, 4096u}) {
      CAPTURE(rule);
      CAPTURE(chunk);
      auto o = async_options(rule);
      o.chunk_bytes = chunk;
      auto run = run_federation(o);
      CHECK(run.server.failure == "");
      REQUIRE(run.server.rounds.size() == 6);
      for (const auto& r : run.server.rounds)
        CHECK(r.contributors.size() == (rule == "FedBuffAggregator" ? 2 : 1));
      // Some update was trained on an older model.
      CHECK(check_async_replay(run, rule, 0.6, 0.8));
    }
  }
}

TEST_CASE("DP-FedAvg: clients clip their update, the server adds the noise") {
  auto layout = test_layout();
  const double clip = 1.0;
  // Noiseless reference: the mean of the clipped updates (McMahan et al.
  // 2018), in double.
  auto x = initial_floats(layout);
  auto want = x;
  std::vector<double> norms(3, 0);
  for (uint32_t k = 0; k < 3; ++k)
    for (size_t t = 0; t < x.size(); ++t)
      for (size_t j = 0; j < x[t].size(); ++j) {
        double d = double{local_update(k, t, j, x[t][j])} - x[t][j];
        norms[k] += d * d;
      }
  for (size_t t = 0; t < x.size(); ++t)
    for (size_t j = 0; j < x[t].size(); ++j) {
      double sum = 0;
      for (uint32_t k = 0; k < 3; ++k) {
        double d = double{local_update(k, t, j, x[t][j])} - x[t][j];
        sum += d * std::min(1.0, clip / std::sqrt(norms[k]));
      }
      want[t][j] = static_cast<float>(x[t][j] + sum / 3);
    }
  for (double z : {0.0, 2.0}) {
    for (std::string mode : {"ram", "window"}) {
      CAPTURE(z);
      CAPTURE(mode);
      run_options o;
      o.clients = 3;
      o.rounds = 1;
      o.memory_mode = mode;
      o.rule.dp_clip_norm = clip;
      o.rule.dp_noise_multiplier = z;
      o.rule.dp_seed = 11;
      auto run = run_federation(o);
      CHECK(run.server.failure == "");
      REQUIRE(run.server.rounds.size() == 1);
      if (z == 0) {
        check_close(run.final_model, want);
        CHECK_FALSE(run.server.rounds[0].dp_epsilon);
        continue;
      }
      // The noise: mean 0, std z S / m with m = 3 updates everywhere.
      double n = 0, sum = 0, squares = 0;
      for (size_t t = 0; t < want.size(); ++t)
        for (size_t j = 0; j < want[t].size(); ++j) {
          double e = double{run.final_model[t][j]} - want[t][j];
          ++n;
          sum += e;
          squares += e * e;
        }
      auto mean = sum / n;
      auto std = std::sqrt(squares / n - mean * mean);
      CHECK(std::fabs(mean) < 0.02);
      CHECK(std == doctest::Approx(z * clip / 3).epsilon(0.03));
      REQUIRE(run.server.rounds[0].dp_epsilon);
      CHECK(*run.server.rounds[0].dp_epsilon ==
            doctest::Approx(epsilon_for(1.0, z, 1, 1e-5).epsilon));
    }
  }
}

namespace {

/// Ends every actor of a test when a failed REQUIRE leaves the test's scope
/// early, so that the actor system can shut down: the failure is reported
/// instead of hanging the test binary.
class teardown_on_failure {
public:
  teardown_on_failure(caf::actor_system& sys, const server_side& side,
                      const std::vector<client_actor>& clients)
      : sys_(sys), side_(side), clients_(clients) {}
  teardown_on_failure(const teardown_on_failure&) = delete;
  teardown_on_failure& operator=(const teardown_on_failure&) = delete;
  ~teardown_on_failure() {
    if (std::uncaught_exceptions() == 0)
      return;
    caf::scoped_actor self{sys_};
    self->send_exit(side_.server, caf::exit_reason::user_shutdown);
    for (const auto& c : clients_)
      self->send_exit(c, caf::exit_reason::user_shutdown);
    side_.shut_down(sys_);
  }

private:
  caf::actor_system& sys_;
  const server_side& side_;
  const std::vector<client_actor>& clients_;
};

/// All tensors of x back to back.
std::vector<float> flat(const model_floats& x) {
  std::vector<float> out;
  for (const auto& t : x)
    out.insert(out.end(), t.begin(), t.end());
  return out;
}

/// Client k's update of the initial model, flat.
std::vector<float> honest_update(const manifest& m, uint32_t k) {
  auto g = initial_floats(m);
  for (size_t t = 0; t < g.size(); ++t)
    for (size_t j = 0; j < g[t].size(); ++j)
      g[t][j] = local_update(k, t, j, g[t][j]);
  return flat(g);
}

/// The squared L2 distance of elements [from, to) of a and b, as the
/// aggregator measures it (float elements, double sums).
double squared_distance_of(const std::vector<float>& a,
                           const std::vector<float>& b, size_t from,
                           size_t to) {
  double sum = 0;
  for (size_t i = from; i < to; ++i) {
    double d = double{a[i]} - double{b[i]};
    sum += d * d;
  }
  return sum;
}

/// Offers `id`'s update for round (or task) rs; returns the stream's id.
uint64_t offer_as(rogue_client& r, const std::string& id,
                  const msg::round_start& rs, const chunk_plan& plan) {
  const auto& m = rs.model;
  auto acc = msg::decode<msg::accept>(
      r.ask(offer_atom::value,
            msg::encode(msg::offer{rs.round, id, 1, digest(m), m.total_bytes(),
                                   plan.chunk_count(), 0, 0})));
  REQUIRE(acc);
  return acc->stream_id;
}

/// Chunk `seq` of `update` (the whole model, flat) on `stream`.
frame chunk_of(const chunk_plan& plan, uint64_t stream, uint32_t round,
               uint64_t seq, const std::vector<float>& update) {
  const auto& e = plan.extent(seq);
  return chunk_with(
      {stream, round, seq, e.tensor_index, e.tensor_offset},
      std::as_bytes(std::span{update}).subspan(e.model_offset, e.bytes));
}

/// One sync round of `honest` synthetic clients C0... and a hand-driven
/// Mallory whose update is `mallory`: its chunks before `refused_at` are
/// taken, that one is refused (poisoned_update), and the stream takes
/// nothing more. What it folded before stays (each chunk passed every
/// check): the round ends with each position the mean of the updates that
/// reached it, counts one poisoned update, and the honest clients upload
/// once (a liar's partial upload costs the liar only).
void check_rejected_round(const std::string& mode, uint32_t honest,
                          const std::vector<float>& mallory,
                          uint64_t refused_at, double max_update_norm) {
  CAPTURE(mode);
  CAPTURE(refused_at);
  auto layout = test_layout();
  run_options o;
  o.clients = honest;
  o.silent = 1; // Mallory's place
  o.min_clients = honest;
  o.rounds = 1;
  o.memory_mode = mode;
  o.rule.max_update_norm = max_update_norm;
  o.rule.partial_updates = partial_updates::keep;
  auto so = side_options(o);
  auto eval = std::make_shared<capturing_evaluator>();
  run_report report;
  std::vector<run_report> client_reports(honest);
  {
    virtual_system vs;
    auto& sys = vs.sys();
    auto side = spawn_server_side(
        sys, snapshot_of(layout, initial_floats(layout)), so, eval, &report);
    REQUIRE(side);
    std::vector<client_actor> clients;
    teardown_on_failure guard{sys, *side, clients};
    rogue_client rogue{vs, side->server};
    REQUIRE(msg::decode<msg::welcome>(
        rogue.ask(hello_atom::value, msg::encode(msg::hello{"Mallory", ""}))));
    for (uint32_t k = 0; k < honest; ++k) {
      auto factory =
          [layout, k](const client_configs&,
                      const msg::welcome&) -> result<std::unique_ptr<trainer>> {
        return std::make_unique<synthetic_trainer>(layout, k, 1);
      };
      clients.push_back(spawn_client(sys, side->server,
                                     {"C" + std::to_string(k), 10000ms},
                                     factory, &client_reports[k]));
    }
    auto rs = rogue.expect<msg::round_start>(round_atom::value);
    auto plan = *chunk_plan::make(rs.model, rs.chunk_bytes);
    REQUIRE(refused_at + 1 < plan.chunk_count());
    auto stream = offer_as(rogue, "Mallory", rs, plan);
    // Window mode: each credit comes once the honest clients delivered the
    // same chunk, so these positions are averaged before the refusal.
    for (uint64_t seq = 0; seq < refused_at; ++seq)
      REQUIRE(msg::decode<msg::credit>(rogue.ask(
          chunk_atom::value, chunk_of(plan, stream, rs.round, seq, mallory))));
    CHECK(refusal_of(rogue.ask(chunk_atom::value,
                               chunk_of(plan, stream, rs.round, refused_at,
                                        mallory))) == errc::poisoned_update);
    CHECK(refusal_of(rogue.ask(chunk_atom::value,
                               chunk_of(plan, stream, rs.round, refused_at + 1,
                                        mallory))) == errc::unknown_stream);
    await_down(vs, {side->server});
    await_down(vs, clients);
    side->shut_down(sys);
  }
  CHECK(report.failure == "");
  CHECK(report.poisoned_updates == 1);
  REQUIRE(report.rounds.size() == 1);
  CHECK(report.rounds[0].clients == honest);
  CHECK(report.rounds[0].missing_clients ==
        std::vector<std::string>{"Mallory"});
  auto plan = *chunk_plan::make(layout, 4096);
  check_close(eval->last(),
              reference_with_prefix(layout, honest, mallory,
                                    plan.extent(refused_at).model_offset /
                                        sizeof(float)));
  for (const auto& c : client_reports) {
    CHECK(c.failure == "");
    CHECK(c.bytes_sent == layout.total_bytes()); // once
  }
}

} // namespace

TEST_CASE("a NaN after chunks were folded: the chunks before it stay, the "
          "honest clients upload once, in ram and window modes") {
  auto layout = test_layout();
  auto g = flat(initial_floats(layout));
  // Finite and far from the model in its first chunks, a NaN in chunk 3.
  auto mallory = g;
  for (auto& x : mallory)
    x += 5.0f;
  auto plan = *chunk_plan::make(layout, 4096);
  mallory[plan.extent(3).model_offset / sizeof(float) + 10] = std::nanf("");
  for (std::string mode : {"ram", "window"})
    check_rejected_round(mode, 2, mallory, 3, 0);
}

TEST_CASE("max_update_norm refuses an update too far from the global model") {
  auto layout = test_layout();
  auto g = flat(initial_floats(layout));
  auto n = g.size();
  auto d0 = std::sqrt(squared_distance_of(honest_update(layout, 0), g, 0, n));
  auto d1 = std::sqrt(squared_distance_of(honest_update(layout, 1), g, 0, n));
  SUBCASE("far from its first chunk on") {
    auto mallory = g;
    for (auto& x : mallory)
      x += 1000.0f;
    for (std::string mode : {"ram", "window"})
      check_rejected_round(mode, 2, mallory, 0, 1.5 * std::max(d0, d1));
  }
  SUBCASE("within the bound for a third of the model, then far: that third "
          "stays (within the bound), the honest client sends once") {
    // Mallory's first third pulls opposite to C0's update, as far as the
    // bound lets it. In window mode those positions are averaged in place
    // (C0 and Mallory) before Mallory's refusal: measured against them,
    // C0's update sent again would pass the bound (checked below); it must
    // be measured as it was the first time.
    auto h = honest_update(layout, 0);
    auto bound = 1.05 * d0;
    auto plan = *chunk_plan::make(layout, 4096);
    uint64_t m = plan.chunk_count() / 3;
    auto cut = plan.extent(m).model_offset / sizeof(float);
    auto prefix = std::sqrt(squared_distance_of(h, g, 0, cut));
    auto s = 0.98 * bound / prefix;
    auto mallory = g;
    for (size_t i = 0; i < n; ++i)
      mallory[i] = i < cut ? g[i] - static_cast<float>(s) * (h[i] - g[i])
                           : g[i] + 1000.0f;
    auto first_average = g;
    for (size_t i = 0; i < cut; ++i)
      first_average[i] = (h[i] + mallory[i]) / 2;
    REQUIRE(squared_distance_of(h, first_average, 0, n) > bound * bound);
    for (std::string mode : {"ram", "window"})
      check_rejected_round(mode, 1, mallory, m, bound);
  }
}

TEST_CASE("max_sample_size caps the weight a client claims") {
  for (std::string mode : {"ram", "window"}) {
    CAPTURE(mode);
    run_options o;
    o.memory_mode = mode;
    o.weights = client_weighting::sample_size;
    o.rule.max_sample_size = 150; // claims: 107, 207, 307
    o.rounds = 2;
    auto run = run_federation(o);
    CHECK(run.server.failure == "");
    REQUIRE(run.server.rounds.size() == 2);
    check_close(run.final_model,
                reference_fedavg(test_layout(), 3, 2, true, 150));
  }
}

TEST_CASE("an offer followed by silence does not stall the round") {
  auto layout = test_layout();
  for (std::string mode : {"ram", "window"}) {
    CAPTURE(mode);
    run_options o;
    o.clients = 2;
    o.silent = 1; // Quiet's place
    o.min_clients = 2;
    o.rounds = 2;
    o.memory_mode = mode;
    auto so = side_options(o);
    so.idle_timeout = 400ms;
    auto eval = std::make_shared<capturing_evaluator>();
    run_report report;
    std::vector<run_report> client_reports(2);
    {
      virtual_system vs;
      auto& sys = vs.sys();
      auto side = spawn_server_side(
          sys, snapshot_of(layout, initial_floats(layout)), so, eval, &report);
      REQUIRE(side);
      std::vector<client_actor> clients;
      teardown_on_failure guard{sys, *side, clients};
      rogue_client quiet{vs, side->server};
      REQUIRE(msg::decode<msg::welcome>(
          quiet.ask(hello_atom::value, msg::encode(msg::hello{"Quiet", ""}))));
      for (uint32_t k = 0; k < 2; ++k) {
        auto factory = [layout, k](const client_configs&, const msg::welcome&)
            -> result<std::unique_ptr<trainer>> {
          return std::make_unique<synthetic_trainer>(layout, k, 1);
        };
        clients.push_back(spawn_client(sys, side->server,
                                       {"C" + std::to_string(k), 10000ms},
                                       factory, &client_reports[k]));
      }
      // Round 1: an offer, then nothing. Its update is rejected for the
      // silence, a miss: round 2 does not choose it (not heard from since).
      auto start = quiet.next_round();
      offer_as(quiet, "Quiet", start,
               *chunk_plan::make(start.model, start.chunk_bytes));
      await_down(vs, {side->server});
      await_down(vs, clients);
      side->shut_down(sys);
    }
    CHECK(report.failure == "");
    CHECK(report.poisoned_updates == 0); // silence is no poison
    REQUIRE(report.rounds.size() == 2);
    for (const auto& r : report.rounds) {
      CHECK(r.clients == 2);
      CHECK(r.missing_clients == std::vector<std::string>{"Quiet"});
    }
    CHECK(report.rounds[0].wall_seconds >= 0.4); // it waited for the timeout
    CHECK(report.rounds[1].wall_seconds < 0.4);  // Quiet was passed over
    check_close(eval->last(), reference_fedavg(layout, 2, 2, false));
    for (const auto& c : client_reports)
      CHECK(c.failure == "");
  }
}

namespace {

/// Patient, a hand-driven client that registers, offers `update` and sends
/// it chunk by chunk: chunks 1 and 2 each 150 ms after the credit for the
/// one before, the others at once; then it ends its stream and quits. What
/// went wrong goes to `failure`.
caf::behavior patient_client(caf::event_based_actor* self, server_link server,
                             std::vector<float> update,
                             std::shared_ptr<std::string> failure) {
  struct upload {
    msg::round_start round;
    std::optional<chunk_plan> plan;
    uint64_t stream = 0;
    uint64_t next = 0;
  };
  auto up = std::make_shared<upload>();
  auto fail = [self, failure](std::string why) {
    *failure = std::move(why);
    self->quit();
  };
  auto end = [self, server, up, fail] {
    auto e = msg::end_of_stream{up->stream, up->plan->chunk_count()};
    self->request(server, caf::infinite, end_atom::value, msg::encode(e))
        .then([self, fail](const frame& f) {
          if (!msg::decode<msg::stream_closed>(f))
            return fail("the stream did not close");
          self->quit();
        });
  };
  auto send_next = std::make_shared<std::function<void()>>();
  // Itself through a weak handle: the behavior below holds it.
  *send_next = [self, server, up, update, fail, end,
                again = std::weak_ptr{send_next}] {
    if (up->next == up->plan->chunk_count())
      return end();
    auto f = chunk_of(*up->plan, up->stream, up->round.round, up->next, update);
    self->request(server, caf::infinite, chunk_atom::value, std::move(f))
        .then([self, up, fail, again](const frame& reply) {
          if (!msg::decode<msg::credit>(reply))
            return fail("chunk " + std::to_string(up->next) + " refused");
          ++up->next;
          if (up->next == 1 || up->next == 2)
            self->delayed_send(self, 150ms, tick_atom::value);
          else if (auto next = again.lock())
            (*next)();
        });
  };
  self->request(server, caf::infinite, hello_atom::value,
                msg::encode(msg::hello{"Patient", ""}))
      .then([fail](const frame& f) {
        if (!msg::decode<msg::welcome>(f))
          fail("Patient was refused");
      });
  return {
      [self, server, up, fail, send_next](round_atom, const frame& f) {
        auto rs = msg::decode<msg::round_start>(f);
        if (!rs)
          return fail("a bad round start");
        up->round = *rs;
        up->plan = *chunk_plan::make(rs->model, rs->chunk_bytes);
        const auto& m = rs->model;
        msg::offer off{rs->round,
                       "Patient",
                       1,
                       digest(m),
                       m.total_bytes(),
                       up->plan->chunk_count(),
                       0,
                       0};
        self->request(server, caf::infinite, offer_atom::value,
                      msg::encode(off))
            .then([up, fail, send_next](const frame& reply) {
              auto acc = msg::decode<msg::accept>(reply);
              if (!acc)
                return fail("the offer was refused");
              up->stream = acc->stream_id;
              (*send_next)();
            });
      },
      [send_next](tick_atom) { (*send_next)(); },
      [](done_atom, const frame&) {},
  };
}

} // namespace

TEST_CASE("a stream that waits for its credits is not silent") {
  SUBCASE("every chunk sent, the last credits wait for a slow trainer") {
    // One chunk a model, window 4: C0's chunk waits in the window while C1
    // trains for 1 s, past the 400 ms idle timeout.
    for (std::string mode : {"ram", "window"}) {
      CAPTURE(mode);
      run_options o;
      o.clients = 2;
      o.rounds = 1;
      o.memory_mode = mode;
      o.chunk_bytes = 1 << 20;
      o.last_client_delay = 1000ms;
      o.idle_timeout = 400ms;
      auto run = run_federation(o);
      CHECK(run.server.failure == "");
      REQUIRE(run.server.rounds.size() == 1);
      CHECK(run.server.rounds[0].clients == 2);
      CHECK(run.server.rounds[0].missing_clients.empty());
      check_close(run.final_model,
                  reference_fedavg(test_layout(), 2, 1, false));
    }
  }

  SUBCASE("a pause after a credit that came late") {
    // Window mode, window 1: Patient's first credit comes only once C0 has
    // trained (1 s, past the 400 ms idle timeout); Patient then takes
    // 150 ms before each of its next two chunks. Silence counts from the
    // credit, not from its last chunk.
    auto layout = test_layout();
    auto g = flat(initial_floats(layout));
    auto patient = g;
    for (auto& x : patient)
      x += 1.0f;
    for (std::string mode : {"ram", "window"}) {
      CAPTURE(mode);
      run_options o;
      o.clients = 1;
      o.silent = 1; // Patient's place
      o.rounds = 1;
      o.window = 1;
      o.memory_mode = mode;
      auto so = side_options(o);
      so.idle_timeout = 400ms;
      auto eval = std::make_shared<capturing_evaluator>();
      run_report report;
      run_report client_report;
      auto patient_failure = std::make_shared<std::string>();
      {
        virtual_system vs;
        auto& sys = vs.sys();
        auto side =
            spawn_server_side(sys, snapshot_of(layout, initial_floats(layout)),
                              so, eval, &report);
        REQUIRE(side);
        std::vector<client_actor> clients;
        teardown_on_failure guard{sys, *side, clients};
        // Patient is an actor of its own, so that it goes on while C0
        // trains (virtual time passes in C0's pause).
        auto patient_actor =
            sys.spawn(patient_client, side->server, patient, patient_failure);
        auto factory =
            [layout, pause = vs.pause()](
                const client_configs&,
                const msg::welcome&) -> result<std::unique_ptr<trainer>> {
          return std::make_unique<synthetic_trainer>(layout, 0, 1, 1000ms,
                                                     pause);
        };
        clients.push_back(spawn_client(sys, side->server, {"C0", 10000ms},
                                       factory, &client_report));
        await_down(vs, {side->server});
        await_down(vs, clients);
        await_down(vs, std::vector<caf::actor>{patient_actor});
        side->shut_down(sys);
      }
      CHECK(report.failure == "");
      REQUIRE(report.rounds.size() == 1);
      CHECK(report.rounds[0].clients == 2);
      CHECK(report.rounds[0].missing_clients.empty());
      CHECK(client_report.failure == "");
      CHECK(*patient_failure == "");
      auto want = initial_floats(layout);
      size_t at = 0;
      for (size_t t = 0; t < want.size(); ++t)
        for (size_t j = 0; j < want[t].size(); ++j, ++at)
          want[t][j] = static_cast<float>(
              (double{local_update(0, t, j, want[t][j])} + patient[at]) / 2);
      check_close(eval->last(), want);
    }
  }
}

TEST_CASE("AsyncScheduler: a poisoned update is not applied") {
  // FedAsync: Mallory's first three chunks are folded before its NaN; its
  // step holds nothing else, so the step's sum is forgotten. FedBuff: its
  // first chunk holds the NaN, so nothing of it is in the step (not even
  // in the count of updates that eta / K divides by).
  auto layout = test_layout();
  auto mallory = flat(initial_floats(layout));
  for (auto& x : mallory)
    x += 5.0f;
  for (std::string rule : {"FedAsyncAggregator", "FedBuffAggregator"}) {
    CAPTURE(rule);
    uint64_t refused_at = rule == "FedAsyncAggregator" ? 3 : 0;
    auto poisoned = mallory;
    auto plan = *chunk_plan::make(layout, 4096);
    poisoned[plan.extent(refused_at).model_offset / sizeof(float)] =
        std::numeric_limits<float>::infinity();
    auto o = async_options(rule);
    o.silent = 1; // Mallory's place
    auto eval = std::make_shared<capturing_evaluator>();
    federation_run run;
    {
      virtual_system vs;
      auto& sys = vs.sys();
      auto side =
          spawn_server_side(sys, snapshot_of(layout, initial_floats(layout)),
                            side_options(o), eval, &run.server);
      REQUIRE(side);
      std::vector<client_actor> clients;
      teardown_on_failure guard{sys, *side, clients};
      rogue_client rogue{vs, side->server};
      REQUIRE(msg::decode<msg::welcome>(rogue.ask(
          hello_atom::value, msg::encode(msg::hello{"Mallory", ""}))));
      run.clients.resize(o.clients);
      for (uint32_t k = 0; k < o.clients; ++k) {
        auto factory =
            [layout, k, pause = vs.pause()](
                const client_configs&,
                const msg::welcome&) -> result<std::unique_ptr<trainer>> {
          // Slower than Mallory, which offers at once: its update comes
          // before the run ends.
          return std::make_unique<synthetic_trainer>(layout, k, samples_of(k),
                                                     50ms, pause);
        };
        clients.push_back(spawn_client(sys, side->server,
                                       {"C" + std::to_string(k), 10000ms},
                                       factory, &run.clients[k]));
      }
      auto task = rogue.next_round();
      auto stream = offer_as(rogue, "Mallory", task, plan);
      for (uint64_t seq = 0; seq < refused_at; ++seq)
        REQUIRE(msg::decode<msg::credit>(
            rogue.ask(chunk_atom::value,
                      chunk_of(plan, stream, task.round, seq, poisoned))));
      CHECK(refusal_of(rogue.ask(chunk_atom::value,
                                 chunk_of(plan, stream, task.round, refused_at,
                                          poisoned))) == errc::poisoned_update);
      await_down(vs, {side->server});
      await_down(vs, clients);
      side->shut_down(sys);
    }
    run.final_model = eval->last();
    CHECK(run.server.failure == "");
    CHECK(run.server.poisoned_updates == 1);
    REQUIRE(run.server.rounds.size() == 6);
    for (const auto& r : run.server.rounds)
      CHECK(std::find(r.contributors.begin(), r.contributors.end(),
                      "Mallory") == r.contributors.end());
    check_async_replay(run, rule, 0.6, 0.8);
    for (const auto& c : run.clients) {
      CAPTURE(c.node);
      CHECK(c.failure == "");
    }
  }
}

namespace {

/// ||x_k - g|| of client k's update from `global`, in double.
double update_norm_of(const model_floats& global, uint32_t k) {
  double squares = 0;
  for (size_t t = 0; t < global.size(); ++t)
    for (size_t j = 0; j < global[t].size(); ++j) {
      double d = static_cast<double>(local_update(k, t, j, global[t][j])) -
                 global[t][j];
      squares += d * d;
    }
  return std::sqrt(squares);
}

} // namespace

TEST_CASE("norm_bound scales each update back to the bound, by the norm its "
          "client declared, an update beyond what it declared is refused") {
  auto layout = test_layout();
  auto initial = initial_floats(layout);
  // Between the first round's norms: some clients are scaled, some not.
  auto bound = (update_norm_of(initial, 0) + update_norm_of(initial, 1)) / 2;
  REQUIRE(update_norm_of(initial, 0) != update_norm_of(initial, 1));
  for (uint64_t chunk : {64u, 4096u, 1u << 20}) {
    CAPTURE(chunk);
    run_options o;
    o.chunk_bytes = chunk;
    o.rounds = 2;
    o.rule.norm_bound = bound;
    auto run = run_federation(o);
    REQUIRE(run.server.failure == "");
    // Whole-model reference: x' = g + min(1, B / ||x - g||) (x - g), then
    // FedAvg with equal weights.
    auto global = initial;
    for (uint32_t r = 0; r < o.rounds; ++r) {
      auto next = global;
      std::vector<double> scale(o.clients);
      for (uint32_t k = 0; k < o.clients; ++k)
        scale[k] = std::min(1.0, bound / update_norm_of(global, k));
      if (r == 0)
        CHECK(*std::min_element(scale.begin(), scale.end()) < 1);
      for (size_t t = 0; t < global.size(); ++t)
        for (size_t j = 0; j < global[t].size(); ++j) {
          double sum = 0;
          for (uint32_t k = 0; k < o.clients; ++k) {
            float g = global[t][j], x = local_update(k, t, j, g);
            sum += static_cast<float>(g + scale[k] * (x - g));
          }
          next[t][j] = static_cast<float>(sum / o.clients);
        }
      global = std::move(next);
    }
    check_close(run.final_model, global);
  }
  // Clients that declare nothing (0) but move: each update passes what it
  // declared at its first chunk that moved, and is refused.
  run_options liars;
  liars.rounds = 1;
  liars.rule.norm_bound = bound;
  liars.declare_norm = false;
  liars.min_clients = 1;
  liars.deadline = 3000ms;
  auto run = run_federation(liars);
  CHECK(run.server.poisoned_updates == liars.clients);
}

TEST_CASE("clients leaving one after another are not counted out twice: "
          "the honest clients' round completes") {
  // "Cut" offers and vanishes before its first chunk (cut off at chunk 0);
  // "Gone" registers and vanishes later, while C1 still trains: its drop
  // tells the aggregator the participants that remain (C0, C1), which no
  // longer count Cut. Counted out twice, positions would complete with C0
  // alone and C1's chunks be refused.
  auto layout = test_layout();
  auto start = initial_floats(layout);
  for (const char* rule : {"FedAvgAggregator", "MedianAggregator"})
    for (const char* mode : {"ram", "window"}) {
      if (std::string{rule} == "FedAvgAggregator" && std::string{mode} == "ram")
        continue; // no window: nothing is counted
      CAPTURE(rule);
      CAPTURE(mode);
      run_options o;
      o.clients = 2;
      o.silent = 2;
      o.min_clients = 2;
      o.rounds = 1;
      o.memory_mode = mode;
      o.aggregator = rule;
      auto so = side_options(o);
      so.server.reconnect_grace = 200ms;
      auto eval = std::make_shared<capturing_evaluator>();
      run_report report;
      std::vector<run_report> client_reports(2);
      {
        virtual_system vs;
        auto& sys = vs.sys();
        auto side = spawn_server_side(sys, snapshot_of(layout, start), so, eval,
                                      &report);
        REQUIRE(side);
        auto cut = std::make_unique<rogue_client>(vs, side->server);
        auto gone = std::make_unique<rogue_client>(vs, side->server);
        REQUIRE(msg::decode<msg::welcome>(
            cut->ask(hello_atom::value, msg::encode(msg::hello{"Cut", ""}))));
        REQUIRE(msg::decode<msg::welcome>(
            gone->ask(hello_atom::value, msg::encode(msg::hello{"Gone", ""}))));
        std::vector<client_actor> clients;
        for (uint32_t k = 0; k < 2; ++k) {
          auto delay = k == 1 ? 1500ms : 0ms;
          auto factory =
              [layout, k, delay, pause = vs.pause()](
                  const client_configs&,
                  const msg::welcome&) -> result<std::unique_ptr<trainer>> {
            return std::make_unique<synthetic_trainer>(layout, k, 1, delay,
                                                       pause);
          };
          clients.push_back(spawn_client(sys, side->server,
                                         {"C" + std::to_string(k), 10000ms},
                                         factory, &client_reports[k]));
        }
        auto rs = cut->next_round();
        auto plan = chunk_plan::make(rs.model, rs.chunk_bytes);
        REQUIRE(plan);
        REQUIRE(msg::decode<msg::accept>(
            cut->ask(offer_atom::value,
                     msg::encode(msg::offer{rs.round, "Cut", 1, digest(layout),
                                            layout.total_bytes(),
                                            plan->chunk_count(), 0, 0}))));
        cut.reset(); // dropped after 200 ms
        // Dropped at about 600 ms, C1 still training (in its pause, where
        // the timed action runs).
        vs.at(400ms, [&gone] { gone.reset(); });
        await_down(vs, {side->server});
        await_down(vs, clients);
        side->shut_down(sys);
      }
      CHECK(report.failure == "");
      REQUIRE(report.rounds.size() == 1);
      CHECK(report.rounds[0].clients == 2);
      for (const auto& c : client_reports)
        CHECK(c.failure == "");
      // Two clients: the median is their mean, as FedAvg's.
      check_close(eval->last(), reference_fedavg(layout, 2, 1, false));
    }
}

/// A relay's children's side in virtual time for the download tests: a
/// hand-driven child "Early" registered first, then `clients` synthetic
/// ones; min_clients 2, a 2 s round deadline, `mode`; the test plays the
/// parent (relay_parent). Stops the side and awaits every actor when it
/// goes.
class relay_children {
public:
  /// `sums`: the side sums (aggregation_plan::partial_sums, as a relay's
  /// does), and streams its sum in window and disk modes.
  relay_children(const manifest& layout, uint32_t clients,
                 const std::string& mode, run_report& report,
                 std::vector<run_report>& client_reports, bool sums = false)
      : early(vs, spawned(layout, clients, mode, report, sums)),
        parent(vs, layout) {
    REQUIRE(msg::decode<msg::welcome>(
        early.ask(hello_atom::value, msg::encode(msg::hello{"Early", ""}))));
    client_reports.resize(clients);
    children = synthetic_clients(vs.sys(), server(), layout, client_reports);
  }
  relay_children(const relay_children&) = delete;
  relay_children& operator=(const relay_children&) = delete;

  ~relay_children() {
    caf::anon_send(server(), stop_atom::value, std::string{});
    await_down(vs, {server()});
    await_down(vs, children);
    side->shut_down(vs.sys());
  }

  const server_actor& server() const { return side->server; }

  /// Early's offer of round `rs` (weight 1).
  static frame early_offer(const msg::round_start& rs, const chunk_plan& plan) {
    return msg::encode(msg::offer{rs.round, "Early", 1, digest(rs.model),
                                  rs.model.total_bytes(), plan.chunk_count(), 0,
                                  0});
  }

  /// Early's next round and its chunk plan.
  std::pair<msg::round_start, chunk_plan> early_round() {
    auto rs = early.next_round();
    auto plan = chunk_plan::make(rs.model, rs.chunk_bytes);
    REQUIRE(plan);
    return {rs, std::move(*plan)};
  }

  virtual_system vs;
  std::optional<server_side> side;
  rogue_client early;
  relay_parent parent;
  std::vector<client_actor> children;

private:
  server_actor spawned(const manifest& layout, uint32_t clients,
                       const std::string& mode, run_report& report, bool sums) {
    run_options o;
    o.clients = clients;
    o.silent = 1;
    o.min_clients = 2;
    o.deadline = 2s;
    o.memory_mode = mode;
    auto so = relay_side_options(o);
    so.plan.partial_sums = sums;
    auto s =
        spawn_server_side(vs.sys(), snapshot_of(layout, initial_floats(layout)),
                          so, std::make_shared<capturing_evaluator>(), &report);
    REQUIRE(s);
    side = *s;
    return side->server;
  }
};

TEST_CASE("a relay serves its children its parent's model as it arrives, "
          "takes no offer before it is whole, and sums exactly what it sums "
          "from a model handed whole") {
  // Two synthetic children and a hand-driven one ("Early"). The test plays
  // the relay's upstream half: the parent's model is handed down as memory
  // still being written (relay_atom, true), then written 3000 bytes at a
  // time (not the 4096-byte chunks), each piece announced (arrived_atom).
  // Early's fetch of chunk 1 waits until its bytes are in and is then
  // answered with them; its offer before the model is whole is refused (no
  // honest child can have it). The children fetch as the model arrives;
  // the round's sum is byte-identical to the one of the same round on the
  // model handed whole. Early never offers again: the deadline takes it
  // out.
  auto layout = test_layout();
  auto whole = snapshot_of(layout, initial_floats(layout));
  for (std::string mode : {"ram", "window"}) {
    CAPTURE(mode);
    std::vector<std::vector<std::byte>> sums;
    for (bool arriving : {false, true}) {
      CAPTURE(arriving);
      run_report report;
      std::vector<run_report> client_reports;
      {
        relay_children t{layout, 2, mode, report, client_reports};
        if (!arriving) {
          t.parent.hand_model(t.server());
        } else {
          auto* at = t.parent.hand_arriving(t.server());
          auto [rs, plan] = t.early_round();
          REQUIRE(plan.chunk_count() > 3);
          const auto& one = plan.extent(1);
          t.early.send(fetch_atom::value,
                       msg::encode(msg::fetch{rs.round, rs.model_version, 1}));
          CHECK_FALSE(t.early.answered(500ms)); // its bytes are not in
          auto offer = msg::decode<msg::accept>(t.early.ask(
              offer_atom::value,
              msg::encode(msg::offer{rs.round, "Early", 1, digest(layout),
                                     layout.total_bytes(), plan.chunk_count(),
                                     0, 0})));
          REQUIRE_FALSE(offer);
          CHECK(offer.err().code == errc::unexpected_message);
          constexpr uint64_t piece = 3000;
          bool served = false;
          for (uint64_t off = 0; off < whole.bytes.size(); off += piece) {
            auto n = std::min(piece, whole.bytes.size() - off);
            std::memcpy(at + off, whole.bytes.data() + off, n);
            t.parent.arrive(t.server(), off, n);
            bool in = off + n >= one.model_offset + one.bytes;
            if (!served && !in)
              CHECK_FALSE(t.early.answered(10ms));
            if (!served && in) {
              REQUIRE(t.early.answered(1s));
              auto answer = t.early.take(); // the chunk's bytes live in it
              auto chunk = msg::decode_chunk(answer, one.bytes);
              REQUIRE(chunk);
              CHECK(chunk->header.sequence == 1);
              REQUIRE(chunk->bytes.size() == one.bytes);
              CHECK(std::memcmp(chunk->bytes.data(),
                                whole.bytes.data() + one.model_offset,
                                one.bytes) == 0);
              served = true;
            }
          }
          CHECK(served);
        }
        auto r = t.parent.answer();
        CHECK(r.weight == 2);
        CHECK(r.clients == 2);
        REQUIRE(r.sums);
        sums.emplace_back(r.sums->bytes.data(),
                          r.sums->bytes.data() + r.sums->bytes.size());
      }
      CHECK(report.failure == "");
      for (const auto& c : client_reports)
        CHECK(c.failure == "");
    }
    REQUIRE(sums.size() == 2);
    CHECK(sums[0] == sums[1]);
  }
}

TEST_CASE("a window-mode relay streams its sum up as its positions settle, "
          "a child cut or refused mid-upload stays where it delivered, on "
          "the grid where every child did") {
  // Two synthetic children and Early, which offers, sends its first 3
  // chunks (9.0 everywhere) and falls silent (the relay's deadline cuts
  // it), or sends a 4th holding a NaN (refused: poisoned_update).
  // The side announces each position as it settles (settled_atom), from
  // position 0 on, with the round's weight W = 3 (every child delivered
  // position 0) and its children's mean loss, long before its answer. A
  // position Early reached holds the three updates' sum; one it did not,
  // the two others' sum scaled to W (x 3/2). Nothing is collected again.
  // With its parent's grid (grid_positions handed down): each position
  // Early reached settles as int32 sums on the grid, flagged so; the
  // others as those floats, flagged not.
  auto layout = test_layout();
  auto g = initial_floats(layout);
  constexpr uint64_t cut = 3;
  for (auto [mode, poison, grid] :
       {std::tuple{"window", false, false}, std::tuple{"disk", false, false},
        std::tuple{"window", true, false}, std::tuple{"window", false, true},
        std::tuple{"disk", true, true}}) {
    CAPTURE(mode);
    CAPTURE(poison);
    CAPTURE(grid);
    run_report report;
    std::vector<run_report> client_reports;
    relay_result r;
    std::vector<relay_parent::step> steps;
    uint64_t cut_offset = 0;
    std::shared_ptr<grid_positions> positions;
    std::vector<bool> on_grid;
    {
      relay_children t{layout, 2, mode, report, client_reports, true};
      auto chunk = run_options{}.chunk_bytes; // the side's
      if (grid)
        positions = std::make_shared<grid_positions>(
            (layout.total_bytes() + chunk - 1) / chunk, chunk);
      t.parent.hand_model(t.server(), positions);
      auto [rs, plan] = t.early_round();
      REQUIRE(plan.chunk_count() > cut + 2);
      cut_offset = plan.extent(cut).model_offset;
      auto acc = msg::decode<msg::accept>(
          t.early.ask(offer_atom::value, t.early_offer(rs, plan)));
      REQUIRE(acc);
      std::vector<float> nines(layout.total_bytes() / sizeof(float), 9.0f);
      auto bytes = std::as_bytes(std::span{nines});
      for (uint64_t s = 0; s < cut; ++s) {
        const auto& e = plan.extent(s);
        msg::chunk_header h{acc->stream_id, rs.round, s, e.tensor_index,
                            e.tensor_offset};
        REQUIRE(msg::decode<msg::credit>(t.early.ask(
            chunk_atom::value,
            chunk_with(h, bytes.subspan(e.model_offset, e.bytes)))));
      }
      if (poison) {
        const auto& e = plan.extent(cut);
        nines[e.model_offset / sizeof(float)] = std::nanf("");
        msg::chunk_header h{acc->stream_id, rs.round, cut, e.tensor_index,
                            e.tensor_offset};
        CHECK(refusal_of(t.early.ask(
                  chunk_atom::value,
                  chunk_with(h, bytes.subspan(e.model_offset, e.bytes)))) ==
              errc::poisoned_update);
      }
      r = t.parent.answer();
      steps = t.parent.settled;
      REQUIRE(plan.chunk_bytes() == chunk);
      for (uint64_t s = 0; positions && s < plan.chunk_count(); ++s)
        on_grid.push_back(positions->on_grid(plan.extent(s).model_offset));
    }
    CHECK(report.failure == "");
    if (grid) { // Early's positions on the grid, the others not
      REQUIRE(on_grid.size() > cut + 1);
      for (uint64_t s = 0; s < on_grid.size(); ++s)
        CHECK(on_grid[s] == (s < cut));
    }
    REQUIRE(steps.size() >= 2);
    uint64_t last = 0;
    for (const auto& s : steps) {
      CHECK(s.weight == 3);
      CHECK(s.clients == 3);
      CHECK(s.loss == doctest::Approx((0.1 + 0.2 + 0) / 3));
      CHECK(s.bytes > last);
      last = s.bytes;
    }
    CHECK(last == layout.total_bytes());
    REQUIRE(r.sums);
    const auto* got = reinterpret_cast<const float*>(r.sums->bytes.data());
    uint64_t at = 0, bad = 0, on_grid_values = 0, float_like = 0;
    for (size_t ti = 0; ti < g.size(); ++ti)
      for (size_t j = 0; j < g[ti].size(); ++j, at += sizeof(float)) {
        double two = double{local_update(0, ti, j, g[ti][j])} +
                     local_update(1, ti, j, g[ti][j]);
        double want = at < cut_offset ? two + 9.0 : two * 3 / 2;
        bool near = std::fabs(got[at / sizeof(float)] - want) <=
                    1e-5 * std::max(1.0, std::fabs(want));
        if (grid && at < cut_offset) { // int32 sums on the grid: not these
          ++on_grid_values;
          float_like += near;
          continue;
        }
        if (std::fabs(got[at / sizeof(float)] - want) >
            1e-5 * std::max(1.0, std::fabs(want)))
          ++bad;
      }
    CHECK(bad == 0);
    CHECK(float_like * 10 < on_grid_values + 1); // ints, not floats
    for (const auto& c : client_reports)
      CHECK(c.failure == "");
  }
}

TEST_CASE("a child of a window- or disk-mode relay is never served the "
          "round's running sum") {
  // Early offers the parent's model itself as its update and sends it
  // chunk by chunk; once a chunk's credit says its position settled
  // (summed into the model's memory in place), Early asks for that chunk
  // of the round's model again. It is refused (not_in_round): served, it
  // would be its sibling's update plus its own, the group's sum that only
  // the relay's parent is to see. The round goes on, Early in it.
  auto layout = test_layout();
  auto whole = snapshot_of(layout, initial_floats(layout));
  auto g = std::span<const std::byte>(whole.bytes.data(), whole.bytes.size());
  for (std::string mode : {"window", "disk"}) {
    CAPTURE(mode);
    run_report report;
    std::vector<run_report> client_reports;
    relay_result r;
    uint64_t refused = 0, chunks = 0;
    {
      relay_children t{layout, 1, mode, report, client_reports, true};
      t.parent.hand_model(t.server());
      auto [rs, plan] = t.early_round();
      chunks = plan.chunk_count();
      auto acc = msg::decode<msg::accept>(
          t.early.ask(offer_atom::value, t.early_offer(rs, plan)));
      REQUIRE(acc);
      for (uint64_t s = 0; s < chunks; ++s) {
        const auto& e = plan.extent(s);
        msg::chunk_header h{acc->stream_id, rs.round, s, e.tensor_index,
                            e.tensor_offset};
        REQUIRE(msg::decode<msg::credit>(
            t.early.ask(chunk_atom::value,
                        chunk_with(h, g.subspan(e.model_offset, e.bytes)))));
        auto again =
            t.early.ask(fetch_atom::value,
                        msg::encode(msg::fetch{rs.round, rs.model_version, s}));
        auto e_in = msg::error_in(again);
        refused += e_in && e_in->code == errc::not_in_round;
      }
      REQUIRE(msg::decode<msg::stream_closed>(t.early.ask(
          end_atom::value,
          msg::encode(msg::end_of_stream{acc->stream_id, chunks}))));
      r = t.parent.answer();
    }
    CHECK(refused == chunks);
    CHECK(r.weight == 2);
    CHECK(report.failure == "");
  }
}

TEST_CASE("an offer of a relay's round just over, as the parent's next "
          "model starts arriving, is told to sit it out") {
  // Round 1 ends at its deadline without Early (it trained too slowly);
  // the parent's next model starts arriving and Early's offer of round 1
  // comes right behind it, while the relay adopts that model: not_in_round,
  // not the refusal of an offer before the model is whole (which ends a
  // child's connection).
  auto layout = test_layout();
  run_report report;
  std::vector<run_report> client_reports;
  relay_children t{layout, 2, "ram", report, client_reports};
  t.parent.hand_model(t.server());
  auto [rs, plan] = t.early_round();
  CHECK(t.parent.answer(10s).weight == 2); // the deadline took Early out
  t.parent.hand_arriving(t.server());
  auto a = msg::decode<msg::accept>(t.early.ask(
      offer_atom::value,
      msg::encode(msg::offer{rs.round, "Early", 1, digest(layout),
                             layout.total_bytes(), plan.chunk_count(), 0, 0})));
  REQUIRE_FALSE(a);
  CHECK(a.err().code == errc::not_in_round);
}

TEST_CASE("a relay whose download of its parent's model is given up for a "
          "newer one sits that round out and takes the next") {
  // The parent's model of the relay's round comes as arriving memory, half
  // of it is written, and the hand-driven child waits on a chunk of the
  // other half. Then the next model comes whole (the relay's download was
  // given up upstream: a newer round). The waiting fetch is answered with
  // what is there (the round is sat out: what a child trains on it is
  // refused), the first model is answered with no sum (nobody could
  // offer), and the round on the new model completes with the synthetic
  // children, which stay in the run (the given-up model is still served
  // to them while they download it).
  auto layout = test_layout();
  run_report report;
  std::vector<run_report> client_reports;
  {
    relay_children t{layout, 2, "window", report, client_reports};
    auto* at = t.parent.hand_arriving(t.server());
    auto [rs, plan] = t.early_round();
    auto last = plan.chunk_count() - 1;
    auto half = layout.total_bytes() / 2;
    std::memset(at, 0, half);
    t.parent.arrive(t.server(), 0, half);
    t.early.send(fetch_atom::value,
                 msg::encode(msg::fetch{rs.round, rs.model_version, last}));
    CHECK_FALSE(t.early.answered(200ms));
    t.parent.hand_model(t.server()); // the next model, whole
    REQUIRE(t.early.answered(1s));
    const auto& e = plan.extent(last);
    auto answer = t.early.take(); // the chunk's bytes live in it
    auto chunk = msg::decode_chunk(answer, e.bytes);
    REQUIRE(chunk); // what is there: nothing waits for what never comes
    CHECK(chunk->header.sequence == last);
    CHECK(std::all_of(chunk->bytes.begin(), chunk->bytes.end(),
                      [](std::byte b) { return b == std::byte{0}; }));
    auto given_up = t.parent.answer();
    CHECK(given_up.weight == 0);
    CHECK(given_up.sums == nullptr);
    auto next = t.parent.answer();
    CHECK(next.weight == 2);
    CHECK(next.clients == 2);
  }
  CHECK(report.failure == "");
  CHECK(report.failed_rounds == std::vector<uint32_t>{1});
  REQUIRE(report.rounds.size() == 1);
  CHECK(report.rounds[0].clients == 2);
  for (const auto& c : client_reports)
    CHECK(c.failure == "");
}

TEST_CASE("a relay's parent's models given up one after another: each is "
          "answered with no sum, the bytes of the newest that come before "
          "its turn count, and its round completes") {
  // Model 0 comes arriving and its round opens; model 1 comes while model
  // 0 is still arriving (model 0 is given up, its round to be sat out);
  // model 2 comes before that sit-out is through (model 1 is displaced,
  // answered with no sum at once), and all of model 2's bytes arrive right
  // behind it, before its turn: they count, and its round completes.
  auto layout = test_layout();
  auto whole = snapshot_of(layout, initial_floats(layout));
  run_report report;
  std::vector<run_report> client_reports;
  {
    relay_children t{layout, 2, "ram", report, client_reports};
    t.parent.hand_arriving(t.server());
    t.early.next_round(); // round 1 open on model 0, still arriving
    t.parent.hand_arriving(t.server());
    auto* at = t.parent.hand_arriving(t.server());
    std::memcpy(at, whole.bytes.data(), whole.bytes.size());
    t.parent.arrive(t.server(), 0, whole.bytes.size());
    for (int given_up = 0; given_up < 2; ++given_up) {
      auto r = t.parent.answer();
      CHECK(r.weight == 0);
      CHECK(r.sums == nullptr);
    }
    auto r = t.parent.answer();
    CHECK(r.weight == 2);
    CHECK(r.clients == 2);
  }
  CHECK(report.failure == "");
  REQUIRE(report.rounds.size() == 1);
  CHECK(report.rounds[0].clients == 2);
}

TEST_CASE("a relay's child's fetch that waits on a model whose round was sat "
          "out at its deadline is answered once a newer model comes") {
  // Nothing of model 0 arrives; Early waits on its last chunk; the 2 s
  // round deadline sits the round out. The next model then comes whole:
  // Early's fetch is answered (with what is there), and the round on the
  // new model completes.
  auto layout = test_layout();
  run_report report;
  std::vector<run_report> client_reports;
  {
    relay_children t{layout, 2, "ram", report, client_reports};
    t.parent.hand_arriving(t.server());
    auto [rs, plan] = t.early_round();
    auto last = plan.chunk_count() - 1;
    t.early.send(fetch_atom::value,
                 msg::encode(msg::fetch{rs.round, rs.model_version, last}));
    CHECK_FALSE(t.early.answered(500ms));
    CHECK(t.parent.answer(10s).weight == 0); // sat out at the deadline
    t.parent.hand_model(t.server());
    REQUIRE(t.early.answered(60s));
    auto answer = t.early.take();
    auto chunk = msg::decode_chunk(answer, plan.extent(last).bytes);
    REQUIRE(chunk);
    CHECK(chunk->header.sequence == last);
    CHECK(t.parent.answer().weight == 2);
  }
  CHECK(report.failure == "");
  CHECK(report.rounds.size() == 1);
}

TEST_CASE("a relay's children are never served its published sum") {
  // ram mode keeps the round's model apart from the sum: a child asking
  // for the version after the round's (the sum's) is refused. window mode
  // sums in the model's own memory, published as the next model: a child
  // asking for the round's model after the round is refused too (its
  // memory holds the sum now). So a child of a small group cannot read its
  // siblings' sum off the relay.
  auto layout = test_layout();
  for (std::string mode : {"ram", "window"}) {
    CAPTURE(mode);
    run_report report;
    std::vector<run_report> client_reports;
    {
      relay_children t{layout, 2, mode, report, client_reports};
      t.parent.hand_model(t.server());
      auto rs = t.early.next_round();
      auto r = t.parent.answer();
      REQUIRE(r.sums);
      CHECK(r.sums->version == rs.model_version + 1);
      for (auto version : {rs.model_version, r.sums->version}) {
        CAPTURE(version);
        auto f = t.early.ask(fetch_atom::value,
                             msg::encode(msg::fetch{rs.round, version, 0}));
        auto chunk = msg::decode_chunk(f, layout.total_bytes());
        if (mode == "ram" && version == rs.model_version) {
          CHECK(chunk); // the parent's model, intact
          continue;
        }
        REQUIRE_FALSE(chunk);
        // The round's model in window mode: its sums overwrote it.
        CHECK(chunk.err().code == (version == rs.model_version
                                       ? errc::not_in_round
                                       : errc::wrong_round));
      }
    }
    CHECK(report.failure == "");
  }
}

TEST_CASE("honest children of a relay whose download was given up finish "
          "that model, offer it, sit its round out and stay in the run") {
  // All but the last chunk of model 0 arrives; both children wait on it.
  // The next model comes (arriving, or whole), so model 0 is given up: the
  // children's waiting fetches are answered with what is there, they
  // train (one of them slowly, past the next round's start) and offer
  // round 1, which is over: they are told to sit it out (not_in_round), not
  // refused as liars, and deliver the next round.
  auto layout = test_layout();
  auto whole = snapshot_of(layout, initial_floats(layout));
  for (bool next_arriving : {true, false})
    for (auto delay : {0ms, 300ms}) {
      CAPTURE(next_arriving);
      CAPTURE(delay);
      run_report report;
      std::vector<run_report> reports(2);
      {
        virtual_system vs;
        run_options o;
        o.clients = 2;
        o.min_clients = 2;
        o.deadline = 2s;
        o.memory_mode = "window";
        auto side = spawn_server_side(
            vs.sys(), snapshot_of(layout, initial_floats(layout)),
            relay_side_options(o), std::make_shared<capturing_evaluator>(),
            &report);
        REQUIRE(side);
        std::vector<client_actor> clients;
        for (uint32_t k = 0; k < 2; ++k) {
          auto d = k == 1 ? delay : 0ms;
          auto factory =
              [layout, k, d, pause = vs.pause()](
                  const client_configs&,
                  const msg::welcome&) -> result<std::unique_ptr<trainer>> {
            return std::make_unique<synthetic_trainer>(layout, k, 1, d, pause);
          };
          clients.push_back(spawn_client(vs.sys(), side->server,
                                         {"C" + std::to_string(k), 10000ms},
                                         factory, &reports[k]));
        }
        relay_parent parent{vs, layout};
        auto* at = parent.hand_arriving(side->server);
        auto plan = chunk_plan::make(layout, 4096);
        REQUIRE(plan);
        auto last = plan->extent(plan->chunk_count() - 1);
        std::memcpy(at, whole.bytes.data(), last.model_offset);
        parent.arrive(side->server, 0, last.model_offset);
        vs.wait(300ms); // both children wait on the last chunk
        if (next_arriving) {
          auto* next = parent.hand_arriving(side->server);
          vs.wait(1s);
          std::memcpy(next, whole.bytes.data(), whole.bytes.size());
          parent.arrive(side->server, 0, whole.bytes.size());
        } else {
          parent.hand_model(side->server);
        }
        CHECK(parent.answer().weight == 0);
        auto r = parent.answer();
        CHECK(r.weight == 2);
        caf::anon_send(side->server, stop_atom::value, std::string{});
        await_down(vs, {side->server});
        await_down(vs, clients);
        side->shut_down(vs.sys());
      }
      for (const auto& c : reports)
        CHECK(c.failure == "");
      CHECK(report.rounds.size() == 1);
    }
}

// ---------------------------------------------------------------------------
// Streaming relays and in-place sums against slow, late and lying children.

TEST_CASE("an honest client that starts its download after the deadline "
          "took it out of a window-mode round sits that round out") {
  // C0 fast; C1 uploads only its first 8 chunks until 4 s (a slow link:
  // the round stays open); C2 starts round 1 2.5 s late (slow start). At
  // the 2 s deadline C2 has not offered: it leaves round 1, positions
  // settle in place. C2's fetches of the parts its sums overwrote are
  // refused with not_in_round: it sits round 1 out and takes round 2 (a
  // fatal refusal would end an honest, slow client).
  auto layout = test_layout();
  run_options o;
  o.clients = 3;
  o.min_clients = 2;
  o.deadline = 2s;
  o.rounds = 2;
  o.memory_mode = "window";
  auto plan = chunk_plan::make(layout, o.chunk_bytes);
  REQUIRE(plan);
  run_report report;
  std::vector<run_report> reports(3);
  {
    virtual_system vs;
    auto side = spawn_server_side(
        vs.sys(), snapshot_of(layout, initial_floats(layout)), side_options(o),
        std::make_shared<capturing_evaluator>(), &report);
    REQUIRE(side);
    auto gate = std::make_shared<synthetic_trainer::gate>();
    gate->ready = plan->extent(8).model_offset;
    std::vector<client_actor> clients;
    for (uint32_t k = 0; k < 3; ++k) {
      auto delay = k == 2 ? 2500ms : 0ms;
      auto gk = k == 1 ? gate : nullptr;
      auto factory =
          [layout, k, delay, gk, pause = vs.pause()](
              const client_configs&,
              const msg::welcome&) -> result<std::unique_ptr<trainer>> {
        auto t = std::make_unique<synthetic_trainer>(layout, k, 1, 0ms, pause);
        t->slowed(delay, gk);
        return std::unique_ptr<trainer>{std::move(t)};
      };
      clients.push_back(spawn_client(vs.sys(), side->server,
                                     {"C" + std::to_string(k), 10000ms},
                                     factory, &reports[k]));
    }
    vs.at(4000ms, [gate] {
      gate->ready = std::numeric_limits<uint64_t>::max();
      if (gate->wake)
        gate->wake();
    });
    await_down(vs, {side->server});
    await_down(vs, clients);
    side->shut_down(vs.sys());
  }
  INFO("server failure: '" << report.failure << "', rounds "
                           << report.rounds.size());
  for (uint32_t k = 0; k < 3; ++k)
    INFO("C" << k << " failure: '" << reports[k].failure << "'");
  CHECK(report.failure == "");
  CHECK(reports[0].failure == "");
  CHECK(reports[1].failure == "");
  CHECK(reports[2].failure == ""); // an honest, slow client
}

TEST_CASE("a sat-out round's position weights do not scale a later streamed "
          "round's positions nobody delivered") {
  // A window-mode streaming relay, min_clients 3, children K0 K1 K2
  // (hand-driven, each offers the model g itself, weight 1).
  // Round 1: K0 and K1 deliver everything, K2 never offers: at the 2 s
  // deadline the round falls short of min_clients and is sat out; its
  // positions settled with weight 2 (no publish took those weights).
  // Round 2: all three deliver chunks 0..2 (W = 3, streaming) and are cut
  // at chunk 3 (a NaN: refused). Positions 3.. hold nobody's chunk: they
  // go up as g x W = 3 g (weighed by round 1's 2, they went up as 1.5 g).
  auto layout = test_layout();
  auto whole = snapshot_of(layout, initial_floats(layout));
  auto g = std::span<const std::byte>(whole.bytes.data(), whole.bytes.size());
  auto plan = chunk_plan::make(layout, 4096);
  REQUIRE(plan);
  constexpr uint64_t cut = 3;
  run_report report;
  relay_result r1, r2;
  std::vector<relay_parent::step> steps;
  {
    virtual_system vs;
    run_options o;
    o.clients = 3;
    o.min_clients = 3;
    o.deadline = 2s;
    o.memory_mode = "window";
    auto so = relay_side_options(o);
    so.plan.partial_sums = true;
    auto side =
        spawn_server_side(vs.sys(), snapshot_of(layout, initial_floats(layout)),
                          so, std::make_shared<capturing_evaluator>(), &report);
    REQUIRE(side);
    std::vector<std::unique_ptr<rogue_client>> kids;
    for (int k = 0; k < 3; ++k) {
      kids.push_back(std::make_unique<rogue_client>(vs, side->server));
      REQUIRE(msg::decode<msg::welcome>(kids.back()->ask(
          hello_atom::value,
          msg::encode(msg::hello{"K" + std::to_string(k), ""}))));
    }
    relay_parent parent{vs, layout};
    auto offer = [&](int k, const msg::round_start& rs) {
      auto a = msg::decode<msg::accept>(kids[k]->ask(
          offer_atom::value,
          msg::encode(msg::offer{rs.round, "K" + std::to_string(k), 1,
                                 digest(layout), layout.total_bytes(),
                                 plan->chunk_count(), 0, 0})));
      REQUIRE(a);
      return a->stream_id;
    };
    auto chunk = [&](uint64_t sid, uint32_t round, uint64_t s,
                     std::span<const std::byte> bytes) {
      const auto& e = plan->extent(s);
      msg::chunk_header h{sid, round, s, e.tensor_index, e.tensor_offset};
      return chunk_with(h, bytes.subspan(e.model_offset, e.bytes));
    };
    // Round 1.
    parent.hand_model(side->server);
    std::vector<msg::round_start> rs;
    for (auto& k : kids)
      rs.push_back(k->next_round());
    std::vector<uint64_t> sid{offer(0, rs[0]), offer(1, rs[1])};
    for (uint64_t s = 0; s < plan->chunk_count(); ++s) {
      for (int k = 0; k < 2; ++k)
        kids[k]->send(chunk_atom::value, chunk(sid[k], rs[k].round, s, g));
      for (int k = 0; k < 2; ++k) {
        REQUIRE(kids[k]->answered(10s));
        REQUIRE(msg::decode<msg::credit>(kids[k]->take()));
      }
    }
    for (int k = 0; k < 2; ++k)
      REQUIRE(msg::decode<msg::stream_closed>(kids[k]->ask(
          end_atom::value,
          msg::encode(msg::end_of_stream{sid[k], plan->chunk_count()}))));
    r1 = parent.answer();
    CHECK(r1.weight == 0); // sat out
    // Round 2.
    parent.hand_model(side->server);
    rs.clear();
    for (auto& k : kids)
      rs.push_back(k->next_round());
    REQUIRE(rs[0].round == 2);
    sid = {offer(0, rs[0]), offer(1, rs[1]), offer(2, rs[2])};
    for (uint64_t s = 0; s < cut; ++s) {
      for (int k = 0; k < 3; ++k)
        kids[k]->send(chunk_atom::value, chunk(sid[k], rs[k].round, s, g));
      for (int k = 0; k < 3; ++k) {
        REQUIRE(kids[k]->answered(10s));
        REQUIRE(msg::decode<msg::credit>(kids[k]->take()));
      }
    }
    std::vector<float> nan(layout.total_bytes() / sizeof(float), std::nanf(""));
    for (int k = 0; k < 3; ++k)
      CHECK(refusal_of(kids[k]->ask(chunk_atom::value,
                                    chunk(sid[k], rs[k].round, cut,
                                          std::as_bytes(std::span{nan})))) ==
            errc::poisoned_update);
    r2 = parent.answer();
    steps = parent.settled;
    caf::anon_send(side->server, stop_atom::value, std::string{});
    await_down(vs, {side->server});
    side->shut_down(vs.sys());
  }
  REQUIRE(!steps.empty());
  CHECK(steps.back().weight == 3);
  CHECK(steps.back().bytes == layout.total_bytes());
  REQUIRE(r2.sums);
  const auto* got = reinterpret_cast<const float*>(r2.sums->bytes.data());
  const auto* g0 = reinterpret_cast<const float*>(whole.bytes.data());
  auto cut_at = plan->extent(cut).model_offset / sizeof(float);
  uint64_t bad_before = 0, bad_after = 0;
  double ratio = 0;
  for (uint64_t i = 0; i < layout.total_bytes() / sizeof(float); ++i) {
    double want = 3.0 * g0[i];
    bool ok = std::fabs(got[i] - want) <= 1e-5 * std::max(1.0, std::fabs(want));
    (i < cut_at ? bad_before : bad_after) += !ok;
    if (i >= cut_at && std::fabs(g0[i]) > 0.5 && ratio == 0)
      ratio = got[i] / g0[i];
  }
  INFO("positions past the cut go up as g x " << ratio
                                              << " (the design: g x W = 3)");
  CHECK(bad_before == 0);
  CHECK(bad_after == 0);
}

namespace {

/// Ghost offers round `rs`'s update with 4 bytes too many: the aggregator
/// refuses it (manifest_mismatch), after the scheduler counted the offer.
void offer_refused(rogue_client& ghost, const msg::round_start& rs) {
  auto plan = chunk_plan::make(rs.model, rs.chunk_bytes);
  REQUIRE(plan);
  auto a = msg::decode<msg::accept>(
      ghost.ask(offer_atom::value,
                msg::encode(msg::offer{rs.round, "Ghost", 1, digest(rs.model),
                                       rs.model.total_bytes() + 4,
                                       plan->chunk_count(), 0, 0})));
  REQUIRE_FALSE(a);
  CHECK(a.err().code == errc::manifest_mismatch);
}

} // namespace

TEST_CASE("a child whose offer the aggregator refused, then dropped, does "
          "not hold a streaming relay's round (no round deadline)") {
  // Ghost offers an update of another size (the aggregator refuses it:
  // manifest_mismatch, after the scheduler counted the offer) and goes
  // away. Its drop finds no stream to cut: the window awaits it no more
  // (expect), the round completes with the honest children. Baseline: the
  // same child dropped without that offer.
  auto layout = test_layout();
  for (bool ghost_offers : {false, true}) {
    CAPTURE(ghost_offers);
    run_report report;
    std::vector<run_report> reports(2);
    bool answered = false;
    {
      virtual_system vs;
      run_options o;
      o.clients = 2;
      o.silent = 1;
      o.min_clients = 2;
      o.memory_mode = "window"; // no round deadline
      auto so = relay_side_options(o);
      so.plan.partial_sums = true;
      so.server.reconnect_grace = 200ms;
      auto side = spawn_server_side(
          vs.sys(), snapshot_of(layout, initial_floats(layout)), so,
          std::make_shared<capturing_evaluator>(), &report);
      REQUIRE(side);
      auto ghost = std::make_unique<rogue_client>(vs, side->server);
      REQUIRE(msg::decode<msg::welcome>(
          ghost->ask(hello_atom::value, msg::encode(msg::hello{"Ghost", ""}))));
      auto children =
          synthetic_clients(vs.sys(), side->server, layout, reports);
      caf::scoped_actor parent{vs.sys()};
      parent->send(side->server, relay_atom::value,
                   relay_model{std::make_shared<model_snapshot>(
                       snapshot_of(layout, initial_floats(layout)))});
      auto rs = ghost->next_round();
      if (ghost_offers)
        offer_refused(*ghost, rs);
      ghost.reset(); // dropped after 200 ms
      answered = vs.run_until(
          [&] {
            return holds(parent, [](const caf::mailbox_element& x) {
              return x.content().match_elements<relay_result>();
            });
          },
          120s);
      caf::anon_send(side->server, stop_atom::value, std::string{});
      await_down(vs, {side->server});
      await_down(vs, children);
      side->shut_down(vs.sys());
    }
    INFO("side failure: '" << report.failure << "'");
    for (uint32_t k = 0; k < 2; ++k)
      INFO("C" << k << " failure: '" << reports[k].failure << "'");
    CHECK(answered); // the round ends with C0 and C1
    CHECK(report.failure == "");
    for (const auto& c : reports)
      CHECK(c.failure == "");
  }
}

TEST_CASE("a refused offer and a drop do not hold a flat window-mode "
          "server's round (partial_updates: discard, no round deadline)") {
  auto layout = test_layout();
  run_report report;
  std::vector<run_report> reports(2);
  {
    virtual_system vs;
    run_options o;
    o.clients = 2;
    o.silent = 1;
    o.min_clients = 2;
    o.rounds = 1;
    o.memory_mode = "window";
    auto so = side_options(o);
    so.server.reconnect_grace = 200ms;
    auto side =
        spawn_server_side(vs.sys(), snapshot_of(layout, initial_floats(layout)),
                          so, std::make_shared<capturing_evaluator>(), &report);
    REQUIRE(side);
    auto ghost = std::make_unique<rogue_client>(vs, side->server);
    REQUIRE(msg::decode<msg::welcome>(
        ghost->ask(hello_atom::value, msg::encode(msg::hello{"Ghost", ""}))));
    auto children = synthetic_clients(vs.sys(), side->server, layout, reports);
    offer_refused(*ghost, ghost->next_round());
    ghost.reset();
    await_down(vs, {side->server});
    await_down(vs, children);
    side->shut_down(vs.sys());
  }
  CHECK(report.failure == "");
  REQUIRE(report.rounds.size() == 1); // with C0 and C1, Ghost named missing
  CHECK(report.rounds[0].clients == 2);
  CHECK(report.rounds[0].missing_clients == std::vector<std::string>{"Ghost"});
  for (const auto& c : reports)
    CHECK(c.failure == "");
}

// -- a relay's round at its edges: finalizing, the end of its run ---------------

namespace {

/// Whether the mailbox of the scheduled actor `h` holds a message that
/// `pred` accepts (a peek: nothing is taken).
template <class Handle, class Pred>
bool actor_holds(const Handle& h, Pred pred) {
  auto* a = caf::actor_cast<caf::abstract_actor*>(h);
  auto* s = dynamic_cast<caf::scheduled_actor*>(a);
  REQUIRE(s);
  auto& box = s->mailbox();
  // An idle actor's inbox is blocked: taking from it would unblock it, and
  // the next message would then not schedule the actor.
  if (box.blocked() || box.size() == 0)
    return false;
  bool found = false;
  box.queue().peek_all(
      [&](const caf::mailbox_element& x) { found = found || pred(x); });
  return found;
}

/// A relay's children's side (partial sums, ram mode, min_clients 1) for
/// `children` hand-driven children.
server_side_options ram_relay_options(uint32_t children) {
  run_options o;
  o.clients = 0;
  o.silent = children;
  o.min_clients = 1;
  auto so = relay_side_options(o);
  so.plan.partial_sums = true; // as fedcaf relay plans it
  return so;
}

/// Child `id`'s whole update of round `rs`, every value `value`; the end
/// of its stream is sent without waiting for its answer iff `last`.
void upload_all(rogue_client& c, const std::string& id,
                const msg::round_start& rs, float value, bool last) {
  auto plan = chunk_plan::make(rs.model, rs.chunk_bytes);
  REQUIRE(plan);
  auto acc = msg::decode<msg::accept>(
      c.ask(offer_atom::value,
            msg::encode(msg::offer{rs.round, id, 1, digest(rs.model),
                                   rs.model.total_bytes(), plan->chunk_count(),
                                   0, 0})));
  REQUIRE(acc);
  std::vector<float> values(rs.model.total_bytes() / sizeof(float), value);
  auto bytes = std::as_bytes(std::span{values});
  for (uint64_t s = 0; s < plan->chunk_count(); ++s) {
    const auto& e = plan->extent(s);
    msg::chunk_header h{acc->stream_id, rs.round, s, e.tensor_index,
                        e.tensor_offset};
    REQUIRE(msg::decode<msg::credit>(
        c.ask(chunk_atom::value,
              chunk_with(h, bytes.subspan(e.model_offset, e.bytes)))));
  }
  auto end =
      msg::encode(msg::end_of_stream{acc->stream_id, plan->chunk_count()});
  if (last)
    return c.send(end_atom::value, std::move(end));
  REQUIRE(msg::decode<msg::stream_closed>(c.ask(end_atom::value, end)));
}

} // namespace

TEST_CASE("a ram-mode relay's round is what its finalize summed: a child "
          "dropped while it finalizes stays counted, at the weight its sum "
          "goes up at") {
  // A and B deliver (values 1 and 3, weight 1 each: the sum is 4 at weight
  // 2). While the aggregator finalizes, A (delivered) is dropped from the
  // run (its grace ran out). Its update is in the sum: the round's figures
  // are taken as it finalizes, so the relay answers 2 clients at weight 2
  // and the sum as summed. (Before, the figures were taken at publish and
  // the sum scaled down to them: 1 client at weight 1, values 2, though
  // A's update was in it.)
  auto layout = test_layout();
  run_report report;
  relay_result r;
  {
    virtual_system vs;
    auto side = spawn_server_side(
        vs.sys(), snapshot_of(layout, initial_floats(layout)),
        ram_relay_options(2), std::make_shared<capturing_evaluator>(), &report);
    REQUIRE(side);
    rogue_client a{vs, side->server};
    rogue_client b{vs, side->server};
    REQUIRE(msg::decode<msg::welcome>(
        a.ask(hello_atom::value, msg::encode(msg::hello{"A", ""}))));
    REQUIRE(msg::decode<msg::welcome>(
        b.ask(hello_atom::value, msg::encode(msg::hello{"B", ""}))));
    relay_parent parent{vs, layout};
    parent.hand_model(side->server);
    auto rs = a.next_round();
    REQUIRE(b.next_round().round == rs.round);
    upload_all(a, "A", rs, 1.0f, false);
    upload_all(b, "B", rs, 3.0f, true);
    auto finalizing = [](const caf::mailbox_element& x) {
      return x.content().match_elements<caf::atom_value, uint32_t, double>() &&
             x.content().get_as<caf::atom_value>(0) == finalize_atom::value;
    };
    int steps = 0;
    while (!actor_holds(side->aggregator, finalizing)) {
      REQUIRE(vs.step());
      REQUIRE(++steps < 10000);
    }
    // As the server's drop_atom after A's grace: it reaches the scheduler
    // before the aggregator's answer.
    caf::anon_send(side->scheduler, drop_atom::value, std::string{"A"});
    r = parent.answer();
    caf::anon_send(side->server, stop_atom::value, std::string{});
    await_down(vs, {side->server});
    side->shut_down(vs.sys());
  }
  CHECK(r.clients == 2);
  CHECK(r.weight == 2);
  REQUIRE(r.sums);
  const auto* f = reinterpret_cast<const float*>(r.sums->bytes.data());
  CHECK(f[0] == doctest::Approx(4.0)); // the sum at its weight
  REQUIRE(report.rounds.size() == 1);
  CHECK(report.rounds[0].clients == 2);
}

TEST_CASE("an offer passed on as a relay's run ends is not refused "
          "by its aggregator as an early one") {
  // The parent's model handed whole; child A offers, and the relay's run
  // ends (its parent's Done) while the offer is on its way through the
  // scheduler. The model arrived whole and stays so at the end: the
  // aggregator takes the offer, and never refuses it as one before the
  // model was whole (unexpected_message: a refusal that would end a remote
  // child's connection).
  auto layout = test_layout();
  run_report report;
  frame reply;
  {
    virtual_system vs;
    auto side = spawn_server_side(
        vs.sys(), snapshot_of(layout, initial_floats(layout)),
        ram_relay_options(1), std::make_shared<capturing_evaluator>(), &report);
    REQUIRE(side);
    rogue_client a{vs, side->server};
    REQUIRE(msg::decode<msg::welcome>(
        a.ask(hello_atom::value, msg::encode(msg::hello{"A", ""}))));
    relay_parent parent{vs, layout};
    parent.hand_model(side->server);
    auto rs = a.next_round();
    auto plan = chunk_plan::make(rs.model, rs.chunk_bytes);
    REQUIRE(plan);
    a.send(offer_atom::value,
           msg::encode(msg::offer{rs.round, "A", 1, digest(rs.model),
                                  rs.model.total_bytes(), plan->chunk_count(),
                                  0, 0}));
    caf::anon_send(side->server, stop_atom::value, std::string{});
    REQUIRE(a.answered(10s));
    reply = a.take();
    await_down(vs, {side->server});
    side->shut_down(vs.sys());
  }
  auto acc = msg::decode<msg::accept>(reply);
  CHECK_MESSAGE(acc, (acc ? "" : acc.err().message));
}

TEST_CASE("a relay's run that ends before its parent's first model "
          "takes no offer after the end") {
  // The end abandons the download, whether a model came or not: an offer
  // after the end is told not_in_round by the server, and no stream opens
  // for it after the run has ended.
  auto layout = test_layout();
  run_report report;
  frame reply;
  {
    virtual_system vs;
    auto side = spawn_server_side(
        vs.sys(), snapshot_of(layout, initial_floats(layout)),
        ram_relay_options(1), std::make_shared<capturing_evaluator>(), &report);
    REQUIRE(side);
    rogue_client a{vs, side->server};
    REQUIRE(msg::decode<msg::welcome>(
        a.ask(hello_atom::value, msg::encode(msg::hello{"A", ""}))));
    caf::anon_send(side->server, stop_atom::value, std::string{});
    auto plan = chunk_plan::make(layout, 4096);
    REQUIRE(plan);
    reply = a.ask(
        offer_atom::value,
        msg::encode(msg::offer{1, "A", 1, digest(layout), layout.total_bytes(),
                               plan->chunk_count(), 0, 0}));
    await_down(vs, {side->server});
    side->shut_down(vs.sys());
  }
  auto acc = msg::decode<msg::accept>(reply);
  REQUIRE_FALSE(acc);
  CHECK(acc.err().code == errc::not_in_round);
}

TEST_CASE("a sharded client's ranks are one client: its Hellos, offers and "
          "chunks are checked, and the update joined from its shards is "
          "the whole update, in every memory mode") {
  auto layout = test_layout();
  for (std::string mode : {"ram", "window", "disk"}) {
    CAPTURE(mode);
    run_options o;
    o.clients = 1;
    o.rounds = 1;
    o.chunk_bytes = 4096;
    o.memory_mode = mode;
    auto eval = std::make_shared<capturing_evaluator>();
    run_report report;
    std::vector<float> update(layout.total_bytes() / sizeof(float));
    for (size_t i = 0; i < update.size(); ++i)
      update[i] = 0.25f * static_cast<float>(i % 1001);
    auto bytes = std::as_bytes(std::span{update});
    {
      virtual_system vs;
      auto& sys = vs.sys();
      auto side =
          spawn_server_side(sys, snapshot_of(layout, initial_floats(layout)),
                            side_options(o), eval, &report);
      REQUIRE(side);
      rogue_client r0{vs, side->server}, r1{vs, side->server},
          stranger{vs, side->server};
      auto hello = [](uint32_t rank, uint32_t ranks) {
        return msg::encode(msg::hello{"Shard", "", shard_spec{rank, ranks}});
      };
      CHECK(msg::decode<msg::welcome>(r0.ask(hello_atom::value, hello(0, 2))));
      // Rank 0 alone is not the client: no round starts before rank 1.
      auto dup = msg::decode<msg::welcome>(
          stranger.ask(hello_atom::value, hello(0, 2)));
      REQUIRE_FALSE(dup); // rank 0 is connected: a second one adds nothing
      CHECK(dup.err().code == errc::unknown_client);
      auto recount = msg::decode<msg::welcome>(
          stranger.ask(hello_atom::value, hello(1, 3)));
      REQUIRE_FALSE(recount);
      CHECK(recount.err().code == errc::not_authorized);
      CHECK(recount.err().message.find("registered with 2 ranks") !=
            std::string::npos);
      auto whole = msg::decode<msg::welcome>(stranger.ask(
          hello_atom::value, msg::encode(msg::hello{"Shard", ""})));
      REQUIRE_FALSE(whole);
      CHECK(whole.err().code == errc::not_authorized);
      CHECK(msg::decode<msg::welcome>(r1.ask(hello_atom::value, hello(1, 2))));
      rogue_client* ranks[] = {&r0, &r1};
      std::vector<chunk_plan> plans;
      msg::round_start rs;
      for (uint32_t r = 0; r < 2; ++r) {
        rs = ranks[r]->expect<msg::round_start>(round_atom::value);
        plans.push_back(*chunk_plan::make_shard(rs.model, rs.chunk_bytes,
                                                dim0_slices(rs.model, r, 2)));
      }
      CHECK(plans[0].total_bytes() + plans[1].total_bytes() ==
            layout.total_bytes());
      // Each rank is served its shard, as the whole model has it there.
      auto initial = snapshot_of(layout, initial_floats(layout));
      for (uint32_t r = 0; r < 2; ++r)
        for (uint64_t s = 0; s < plans[r].chunk_count(); s += 3) {
          auto answer = ranks[r]->ask( // the chunk's bytes live in it
              fetch_atom::value,
              msg::encode(msg::fetch{rs.round, rs.model_version, s}));
          auto got = msg::decode_chunk(answer, 1 << 20);
          REQUIRE(got);
          CHECK(got->header.byte_offset == plans[r].extent(s).tensor_offset);
          plans[r].for_each_model_run(
              s, [&](uint64_t at_model, uint64_t n, uint64_t at) {
                CHECK(std::memcmp(got->bytes.data() + at,
                                  initial.bytes.data() + at_model, n) == 0);
              });
        }
      // One evaluation of a model per client: a second rank's is a second.
      auto evaluation = msg::encode(
          msg::evaluation{0, 10, {{"accuracy", 0.5}, {"loss", 1.0}}});
      CHECK(msg::decode<msg::evaluation>(
          r0.ask(evaluated_atom::value, evaluation)));
      auto twice = msg::decode<msg::evaluation>(
          r1.ask(evaluated_atom::value, evaluation));
      REQUIRE_FALSE(twice);
      CHECK(twice.err().code == errc::bad_sequence);
      auto offer = [&](uint32_t r, uint64_t samples) {
        return msg::encode(msg::offer{rs.round, "Shard", samples,
                                      digest(layout), plans[r].total_bytes(),
                                      plans[r].chunk_count(), 0, 0});
      };
      r0.send(offer_atom::value, offer(0, 10));
      CHECK_FALSE(r0.answered(1s)); // it waits for rank 1's offer
      auto mismatch =
          msg::decode<msg::accept>(r1.ask(offer_atom::value, offer(1, 11)));
      REQUIRE_FALSE(mismatch);
      CHECK(mismatch.err().code == errc::manifest_mismatch);
      CHECK(mismatch.err().message ==
            "rank 1 of Shard offered 11 samples, rank 0 10: the ranks of a "
            "client train one update");
      // An offer of the whole model from a rank does not fit its shard.
      auto too_big = msg::decode<msg::accept>(
          r1.ask(offer_atom::value,
                 msg::encode(msg::offer{rs.round, "Shard", 10, digest(layout),
                                        layout.total_bytes(),
                                        plans[0].chunk_count(), 0, 0})));
      REQUIRE_FALSE(too_big);
      CHECK(too_big.err().code == errc::manifest_mismatch);
      auto a1 =
          msg::decode<msg::accept>(r1.ask(offer_atom::value, offer(1, 10)));
      REQUIRE(r0.answered(1s));
      auto a0 = msg::decode<msg::accept>(r0.take());
      REQUIRE(a0);
      REQUIRE(a1);
      CHECK(a0->stream_id == a1->stream_id);
      auto sid = a0->stream_id;
      auto piece = [&](uint32_t r, uint64_t s, std::span<const std::byte> src) {
        const auto& e = plans[r].extent(s);
        std::vector<std::byte> out(e.bytes);
        plans[r].for_each_model_run(
            s, [&](uint64_t at_model, uint64_t n, uint64_t at) {
              std::memcpy(out.data() + at, src.data() + at_model, n);
            });
        return chunk_with(msg::chunk_header{sid, rs.round, s, e.tensor_index,
                                            e.tensor_offset},
                          out);
      };
      // Rank 1 sending rank 0's first chunk: positions outside its slices.
      {
        const auto& e = plans[0].extent(0);
        std::vector<std::byte> out(e.bytes);
        CHECK(refusal_of(r1.ask(
                  chunk_atom::value,
                  chunk_with(msg::chunk_header{sid, rs.round, 0, e.tensor_index,
                                               e.tensor_offset},
                             out))) == errc::out_of_range);
      }
      // The ranks send their chunks position by position; a rank's chunk is
      // credited once the model's chunk it lies in is complete.
      std::vector<uint64_t> next(2, 0);
      uint64_t credited = 0;
      for (uint64_t k = 0;
           next[0] < plans[0].chunk_count() || next[1] < plans[1].chunk_count();
           ++k) {
        std::vector<uint32_t> sent;
        for (uint32_t r = 0; r < 2; ++r)
          if (next[r] < plans[r].chunk_count() &&
              plans[r].position(next[r]) == k) {
            ranks[r]->send(chunk_atom::value, piece(r, next[r]++, bytes));
            sent.push_back(r);
          }
        for (auto r : sent) {
          REQUIRE(ranks[r]->answered(1s));
          CHECK(msg::decode<msg::credit>(ranks[r]->take()));
          ++credited;
        }
      }
      CHECK(credited == plans[0].chunk_count() + plans[1].chunk_count());
      r0.send(end_atom::value,
              msg::encode(msg::end_of_stream{sid, plans[0].chunk_count()}));
      CHECK_FALSE(r0.answered(1s)); // the client's end waits for rank 1's
      auto closed1 = msg::decode<msg::stream_closed>(
          r1.ask(end_atom::value,
                 msg::encode(msg::end_of_stream{sid, plans[1].chunk_count()})));
      REQUIRE(closed1);
      CHECK(closed1->bytes_received == layout.total_bytes());
      REQUIRE(r0.answered(1s));
      CHECK(msg::decode<msg::stream_closed>(r0.take()));
      for (auto* r : ranks)
        CHECK(r->expect<msg::done>(done_atom::value).reason == "");
      await_down(vs, {side->server});
      side->shut_down(sys);
    }
    CHECK(report.failure == "");
    REQUIRE(report.rounds.size() == 1);
    CHECK(report.rounds[0].clients == 1);
    // One client, weight 1: the model is the average of its update alone,
    // bit for bit (the update itself but in ram mode, see one_update_mean).
    auto expected =
        one_update_mean(layout, o.chunk_bytes, initial_floats(layout), update);
    auto got = eval->last();
    REQUIRE(got.size() == layout.tensors.size());
    size_t at = 0;
    for (const auto& t : got) {
      CHECK(std::memcmp(t.data(), expected.data() + at,
                        t.size() * sizeof(float)) == 0);
      at += t.size();
    }
  }
}

TEST_CASE("a rank that declares less than its part's norm gets its whole "
          "client's update refused, declared in full, it is scaled as one") {
  auto layout = test_layout();
  auto initial = initial_floats(layout);
  std::vector<float> update(layout.total_bytes() / sizeof(float));
  for (size_t i = 0; i < update.size(); ++i)
    update[i] = 0.25f * static_cast<float>(i % 1001);
  auto bytes = std::as_bytes(std::span{update});
  auto start = snapshot_of(layout, initial);
  for (bool lie : {true, false}) {
    CAPTURE(lie);
    run_options o;
    o.clients = 1;
    o.rounds = 1;
    o.rule.norm_bound = 1.0;
    auto eval = std::make_shared<capturing_evaluator>();
    run_report report;
    {
      virtual_system vs;
      auto& sys = vs.sys();
      auto side = spawn_server_side(sys, snapshot_of(layout, initial),
                                    side_options(o), eval, &report);
      REQUIRE(side);
      rogue_client r0{vs, side->server}, r1{vs, side->server};
      rogue_client* ranks[] = {&r0, &r1};
      for (uint32_t r = 0; r < 2; ++r)
        REQUIRE(msg::decode<msg::welcome>(ranks[r]->ask(
            hello_atom::value,
            msg::encode(msg::hello{"Shard", "", shard_spec{r, 2}}))));
      msg::round_start rs;
      std::vector<chunk_plan> plans;
      std::vector<double> norms;
      for (uint32_t r = 0; r < 2; ++r) {
        rs = ranks[r]->expect<msg::round_start>(round_atom::value);
        plans.push_back(*chunk_plan::make_shard(rs.model, rs.chunk_bytes,
                                                dim0_slices(rs.model, r, 2)));
        double squares = 0; // ||x - g|| over the rank's part
        for (uint64_t s = 0; s < plans[r].chunk_count(); ++s)
          plans[r].for_each_model_run(
              s, [&](uint64_t at, uint64_t n, uint64_t) {
                for (uint64_t b = at; b < at + n; b += 4) {
                  float x, g;
                  std::memcpy(&x, bytes.data() + b, 4);
                  std::memcpy(&g, start.bytes.data() + b, 4);
                  squares += (double(x) - g) * (double(x) - g);
                }
              });
        norms.push_back(std::sqrt(squares));
      }
      // Rank 1 lies: it declares its part has not moved at all.
      for (uint32_t r = 0; r < 2; ++r) {
        msg::offer off{rs.round,
                       "Shard",
                       10,
                       digest(layout),
                       plans[r].total_bytes(),
                       plans[r].chunk_count(),
                       0,
                       0};
        off.update_norm = lie && r == 1 ? 0.0 : norms[r];
        ranks[r]->send(offer_atom::value, msg::encode(off));
      }
      uint64_t sid = 0;
      for (auto* r : ranks) {
        REQUIRE(r->answered(1s));
        auto a = msg::decode<msg::accept>(r->take());
        REQUIRE(a);
        sid = a->stream_id;
      }
      bool refused = false;
      std::vector<uint64_t> next(2, 0);
      for (uint64_t k = 0; !refused && (next[0] < plans[0].chunk_count() ||
                                        next[1] < plans[1].chunk_count());
           ++k) {
        std::vector<uint32_t> sent;
        for (uint32_t r = 0; r < 2; ++r)
          if (next[r] < plans[r].chunk_count() &&
              plans[r].position(next[r]) == k) {
            const auto& e = plans[r].extent(next[r]);
            std::vector<std::byte> out(e.bytes);
            plans[r].for_each_model_run(
                next[r], [&](uint64_t at_model, uint64_t n, uint64_t at) {
                  std::memcpy(out.data() + at, bytes.data() + at_model, n);
                });
            ranks[r]->send(
                chunk_atom::value,
                chunk_with(msg::chunk_header{sid, rs.round, next[r]++,
                                             e.tensor_index, e.tensor_offset},
                           out));
            sent.push_back(r);
          }
        for (auto r : sent) {
          REQUIRE(ranks[r]->answered(1s));
          auto c = msg::decode<msg::credit>(ranks[r]->take());
          if (!c) { // the client's update refused: this rank's stream gone
            CHECK(c.err().code == errc::unknown_stream);
            CHECK(c.err().message.find("the client's update was refused") !=
                  std::string::npos);
            refused = true;
          }
        }
      }
      CHECK(refused == lie);
      if (!lie) {
        for (uint32_t r = 0; r < 2; ++r)
          ranks[r]->send(end_atom::value, msg::encode(msg::end_of_stream{
                                              sid, plans[r].chunk_count()}));
        for (auto* r : ranks) {
          REQUIRE(r->answered(1s));
          CHECK(msg::decode<msg::stream_closed>(r->take()));
        }
      }
      await_down(vs, {side->server});
      side->shut_down(sys);
    }
    CHECK(report.poisoned_updates == (lie ? 1u : 0u));
    if (lie)
      continue;
    // Declared in full: the whole update scaled to norm_bound as one,
    // g + (x - g) / ||x - g||.
    auto got = eval->last();
    double whole = 0, moved = 0;
    size_t at = 0;
    for (size_t t = 0; t < got.size(); ++t)
      for (size_t j = 0; j < got[t].size(); ++j, ++at) {
        whole += std::pow(double(update[at]) - initial[t][j], 2);
        moved += std::pow(double(got[t][j]) - initial[t][j], 2);
      }
    CHECK(std::sqrt(moved) == doctest::Approx(1.0).epsilon(1e-4));
    CHECK(std::sqrt(whole) > 10.0);
  }
}

TEST_CASE("a population's members are spawned when drawn and sent away when "
          "not, and nobody over the network takes a member's place") {
  auto layout = test_layout();
  run_options o;
  o.clients = 12;
  o.clients_per_round = 3;
  o.rounds = 4;
  auto so = side_options(o);
  auto members = std::make_shared<const population>(0, 12, "C");
  so.scheduler.members = members;
  so.server.drawn.members = members;
  run_report server_report;
  std::vector<run_report> reports(64);
  std::vector<client_actor> spawned;
  std::vector<uint32_t> summoned;
  {
    virtual_system vs;
    auto& sys = vs.sys();
    so.server.drawn.summon = [&](const server_actor& server, uint32_t i) {
      REQUIRE(spawned.size() < reports.size());
      summoned.push_back(i);
      auto factory =
          [layout, i, pause = vs.pause()](
              const client_configs&,
              const msg::welcome&) -> result<std::unique_ptr<trainer>> {
        return std::make_unique<synthetic_trainer>(layout, i, samples_of(i),
                                                   0ms, pause, false);
      };
      client_options co{members->id_of(i), 10000ms};
      co.hold_model = false;
      spawned.push_back(
          spawn_client(sys, server, co, factory, &reports[spawned.size()]));
    };
    auto side =
        spawn_server_side(sys, snapshot_of(layout, initial_floats(layout)),
                          std::move(so), nullptr, &server_report);
    REQUIRE(side);
    // Over the network (a gateway's Hello, with the peer's address), a
    // member's id and any other: refused.
    using door =
        caf::typed_actor<caf::replies_to<hello_atom, frame, std::string,
                                         std::string>::with<frame>>;
    caf::scoped_actor self{sys};
    for (const char* id : {"C5", "Mallory"}) {
      auto reply_to =
          self->request(caf::actor_cast<door>(side->server), caf::infinite,
                        hello_atom::value, msg::encode(msg::hello{id, ""}),
                        std::string{"10.0.0.9:4000"}, std::string{});
      REQUIRE(vs.run_until([&self] {
        return holds(self, [](const caf::mailbox_element& x) {
          return x.mid.is_response();
        });
      }));
      frame reply;
      reply_to.receive([&](frame& r) { reply = std::move(r); },
                       [&](caf::error&) { FAIL("transport error"); });
      auto w = msg::decode<msg::welcome>(reply);
      REQUIRE_FALSE(w);
      CHECK(w.err().code == errc::not_authorized);
      CHECK(w.err().message.find("all simulated") != std::string::npos);
    }
    await_down(vs, side->server);
    await_down(vs, spawned);
    side->shut_down(sys);
  }
  CHECK(server_report.failure == "");
  CHECK(server_report.refusals == 2); // both Hellos over the network
  REQUIRE(server_report.rounds.size() == 4);
  std::set<std::string> drawn;
  for (const auto& r : server_report.rounds) {
    CHECK(r.clients == 3);
    std::set<std::string> c(r.contributors.begin(), r.contributors.end());
    CHECK(c.size() == 3);
    for (const auto& id : c)
      CHECK(members->index_of(id));
    drawn.insert(c.begin(), c.end());
  }
  // Each spawn for a round that drew it after one that did not: at most 3
  // a round, every member spawned once at a time, every client ended well.
  CHECK(summoned.size() >= drawn.size());
  CHECK(summoned.size() <= 3 * 4);
  for (size_t k = 0; k < spawned.size(); ++k)
    CHECK(reports[k].failure == "");
}

TEST_CASE("after a reset, a relay's chunk sent again must be read as it was "
          "before: its int32 sums resent as floats are refused") {
  // A window-mode server (positions overwritten in place) with R, a relay
  // of 20, sending int32 sums on the grid: zeros (20 g) but for 8 elements
  // of chunk 0 holding the bits of 5e5 (a small step on the grid). Cut
  // sends 2 chunks and is dropped: the round's updates are collected
  // again, and R's chunks 0 and 1 lie below the positions the first pass
  // overwrote, judged by the distances it recorded. R sends them again as
  // before (taken), or chunk 0's same bytes flagged Chunk.floatSums, or
  // re-offered without gridSums: read as floats (5e5, far past the update
  // bound), and refused, poisoned_update, not judged by the grid's
  // distance. Measured in the fold (no norm_bound) or by inspect(). In
  // ram mode nothing was overwritten: measured again, refused as well.
  auto layout = test_layout();
  auto g = initial_floats(layout);
  std::vector<float> gflat;
  for (const auto& t : g)
    gflat.insert(gflat.end(), t.begin(), t.end());
  constexpr float poison = 5e5f;
  std::map<std::string, model_floats> taken; // flip 0's, per mode
  for (std::string mode : {"ram", "window", "disk"})
    for (double norm_bound : {0.0, 1e9})
      for (int flip : {0, 1, 2}) { // 1: Chunk.floatSums; 2: no Offer.gridSums
        if (norm_bound > 0 && mode == "disk")
          continue;
        CAPTURE(mode);
        CAPTURE(norm_bound);
        CAPTURE(flip);
        run_options o;
        o.memory_mode = mode;
        o.clients = 2;
        o.silent = 2; // R and Cut
        o.min_clients = 2;
        o.rounds = 1;
        o.rule.max_update_ratio = 10;
        o.rule.norm_bound = norm_bound;
        auto so = side_options(o);
        so.scheduler.relays = {{"R", 20}};
        so.server.terms.grid_sums = so.server.terms.chunk_float_sums = true;
        so.server.reconnect_grace = 300ms;
        auto eval = std::make_shared<capturing_evaluator>();
        run_report report;
        std::vector<run_report> client_reports(2);
        std::optional<errc> refused;
        {
          virtual_system vs;
          auto& sys = vs.sys();
          auto side = spawn_server_side(
              sys, snapshot_of(layout, initial_floats(layout)), so, eval,
              &report);
          REQUIRE(side);
          rogue_client relay{vs, side->server};
          REQUIRE(msg::decode<msg::welcome>(
              relay.ask(hello_atom::value, msg::encode(msg::hello{"R", ""}))));
          auto cut = std::make_unique<rogue_client>(vs, side->server);
          REQUIRE(msg::decode<msg::welcome>(
              cut->ask(hello_atom::value, msg::encode(msg::hello{"Cut", ""}))));
          auto clients =
              synthetic_clients(sys, side->server, layout, client_reports);
          auto rs = relay.expect<msg::round_start>(round_atom::value);
          (void)cut->expect<msg::round_start>(round_atom::value);
          auto plan = chunk_plan::make(rs.model, rs.chunk_bytes);
          REQUIRE(plan);
          REQUIRE(plan->chunk_count() > 2);
          std::vector<std::byte> sums(layout.total_bytes());
          for (uint64_t i = 0; i < 8; ++i)
            std::memcpy(sums.data() + 4 * i, &poison, 4);
          auto offer = [&](const msg::round_start& r, bool grid) {
            msg::offer x{r.round,
                         "R",
                         20,
                         digest(layout),
                         layout.total_bytes(),
                         plan->chunk_count(),
                         0,
                         0};
            x.partial_sum = true;
            x.grid_sums = grid;
            x.update_norm = 1e6; // within norm_bound: scale 1
            x.update_id = 5;
            auto a = msg::decode<msg::accept>(
                relay.ask(offer_atom::value, msg::encode(x)));
            REQUIRE(a);
            return *a;
          };
          auto header = [&](uint64_t stream, uint32_t round, uint64_t s) {
            const auto& e = plan->extent(s);
            return msg::chunk_header{stream, round, s, e.tensor_index,
                                     e.tensor_offset};
          };
          auto a = offer(rs, true);
          auto ca = msg::decode<msg::accept>(cut->ask(
              offer_atom::value,
              msg::encode(msg::offer{rs.round, "Cut", 1, digest(layout),
                                     layout.total_bytes(), plan->chunk_count(),
                                     0, 0})));
          REQUIRE(ca);
          auto gbytes = std::as_bytes(std::span{gflat});
          for (uint64_t s = 0; s < 2; ++s) { // positions 0 and 1 settle
            const auto& e = plan->extent(s);
            relay.send(
                chunk_atom::value,
                chunk_with(header(a.stream_id, rs.round, s),
                           std::span{sums}.subspan(e.model_offset, e.bytes)));
            REQUIRE(msg::decode<msg::credit>(
                cut->ask(chunk_atom::value,
                         chunk_with(header(ca->stream_id, rs.round, s),
                                    gbytes.subspan(e.model_offset, e.bytes)))));
            REQUIRE(relay.answered(10s));
            REQUIRE(msg::decode<msg::credit>(relay.take()));
          }
          cut.reset(); // dropped after the grace: collected again
          auto again = relay.next_round();
          a = offer(again, flip != 2);
          std::vector<float> g20;
          for (auto x : gflat)
            g20.push_back(20 * x);
          for (uint64_t s = 0; s < plan->chunk_count() && !refused; ++s) {
            const auto& e = plan->extent(s);
            auto h = header(a.stream_id, again.round, s);
            h.float_sums = flip == 1 && s == 0; // the same bytes, as floats
            auto part = flip == 2 && s >= 2 ? std::as_bytes(std::span{g20})
                                            : std::span<const std::byte>{sums};
            auto reply =
                relay.ask(chunk_atom::value,
                          chunk_with(h, part.subspan(e.model_offset, e.bytes)));
            if (!msg::decode<msg::credit>(reply))
              refused = refusal_of(reply);
          }
          if (!refused)
            REQUIRE(msg::decode<msg::stream_closed>(relay.ask(
                end_atom::value, msg::encode(msg::end_of_stream{
                                     a.stream_id, plan->chunk_count()}))));
          await_down(vs, clients);
          side->shut_down(sys);
        }
        CHECK(report.failure == "");
        REQUIRE(report.rounds.size() == 1);
        if (flip == 0) {
          CHECK_FALSE(refused);
          CHECK(report.rounds[0].clients == 3);
        } else {
          REQUIRE(refused);
          CHECK(*refused == errc::poisoned_update);
          CHECK(report.rounds[0].clients == 2);
        }
        auto model = eval->last();
        REQUIRE_FALSE(model.empty());
        for (uint64_t i = 0; i < 8; ++i)
          CHECK(std::fabs(model[0][i]) < 100); // never 5e5 / 22
        if (flip == 0 && norm_bound == 0)
          taken[mode] = model;
      }
  // The positions the first pass overwrote in place were folded again
  // from the values R's sums are relative to (kept aside): every mode's
  // model is ram mode's, bit for bit, as a flat round's would be.
  REQUIRE(taken.size() == 3);
  CHECK(taken["window"] == taken["ram"]);
  CHECK(taken["disk"] == taken["ram"]);
}
