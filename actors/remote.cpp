#include "actors/remote.hpp"
#include "actors/errors.hpp"

#include <algorithm>
#include <thread>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "fedcaf/log.hpp"
#include "protocol/network.hpp"
#include "protocol/reconnect_backoff.hpp"

namespace fedcaf {

namespace {

/// Connects to the server, retrying after retry_delays (100 ms doubling to
/// 2 s) where nothing answered, until `give_up_after` has passed or `*stop`
/// is set; counts the retries. A name that does not resolve fails at once.
result<server_link>
dial_with_retry(caf::actor_system& sys, const endpoint& at,
                const gateway_limits& limits, std::shared_ptr<tls_context> tls,
                std::chrono::milliseconds give_up_after, uint64_t& retries,
                const std::atomic<bool>* stop, const done_flag& done) {
  using clock = std::chrono::steady_clock;
  retry_delays delays;
  auto started = clock::now();
  auto deadline = started + give_up_after;
  // Quiet for the first 2 s: a server started beside its clients is
  // usually listening by then.
  auto next_note = started + std::chrono::seconds{2};
  auto stopped = [stop] { return stop && stop->load(); };
  for (;;) {
    if (stopped())
      return error{errc::cancelled, "stopped while connecting"};
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - clock::now());
    auto g = dial(sys, at, limits, tls,
                  std::clamp(left, std::chrono::milliseconds{100},
                             std::chrono::milliseconds{5000}),
                  done);
    if (g || g.err().code != errc::disconnected)
      return g;
    auto seconds = std::to_string(give_up_after.count() / 1000) + " s";
    if (clock::now() + delays.peek() > deadline) {
      // "cannot reach the server at H:P (why)" -> "... at H:P after 60 s
      // (why): ...".
      auto why = g.err().message;
      auto cut = why.rfind(" (");
      if (cut == std::string::npos)
        cut = why.size();
      return error{errc::disconnected,
                   why.substr(0, cut) + " after " + seconds + why.substr(cut) +
                       ": is it running, and is the port right?"};
    }
    if (clock::now() >= next_note) { // not silent while it keeps trying
      auto left_s = std::chrono::duration_cast<std::chrono::seconds>(
                        deadline - clock::now())
                        .count();
      log_line(log_level::warning, "client",
               g.err().message + "; trying again for " +
                   std::to_string(left_s) +
                   " s more (comm_configs.stream_configs.connect_timeout_s)");
      next_note = clock::now() + std::chrono::seconds{10};
    }
    ++retries;
    auto delay = delays.next();
    for (auto slept = std::chrono::milliseconds{0}; slept < delay && !stopped();
         slept += std::chrono::milliseconds{20})
      std::this_thread::sleep_for(std::chrono::milliseconds{20});
  }
}

/// Blocks until `a` has terminated.
template <class Handle> void await(caf::actor_system& sys, const Handle& a) {
  caf::scoped_actor self{sys};
  self->monitor(a);
  self->receive([](const caf::down_msg&) {});
}

} // namespace

caf::actor_system_config make_system_config(size_t threads, bool network) {
  caf::actor_system_config sc;
  add_errc_category(sc);
  sc.set("scheduler.max-threads", threads);
  // Workers that wait on a condition variable instead of polling with
  // sleeps: a third of the context switches of a chunk stream
  // (tests/perf/stream_bench), idle processes that stay idle, and a quick
  // end where a simulate has a worker per training client (work stealing
  // stops its workers one 10 ms sleep after another: 7 s for 700).
  sc.set("scheduler.policy", caf::atom("sharing"));
  if (network) // the multiplexer for the gateways; BASP listens nowhere
    sc.load<caf::io::middleman>();
  return sc;
}

gateway_limits limits_of(const comm_config& comm) {
  gateway_limits l;
  l.max_frame_bytes = comm.max_message_size;
  l.window = comm.stream.window;
  l.handshake_timeout = millis_of(comm.stream.handshake_timeout_s);
  l.heartbeat = millis_of(comm.stream.heartbeat_s);
  l.connection_timeout = millis_of(comm.stream.connection_timeout_s);
  l.max_unauthenticated = comm.stream.max_unauthenticated;
  l.refusal_log_lines = comm.stream.refusal_log_lines;
  return l;
}

result<std::shared_ptr<tls_context>> tls_of(const comm_config& comm,
                                            bool server) {
  if (!comm.use_ssl)
    return std::shared_ptr<tls_context>{};
  return tls_context::make(comm.tls, server);
}

void run_remote_client(const client_config& cc, trainer_factory factory,
                       run_report& report, const client_started& started,
                       const std::atomic<bool>* stop,
                       std::shared_ptr<transfer_progress> progress,
                       std::shared_ptr<const departure> leaving,
                       std::shared_ptr<std::atomic<bool>> done) {
  report.role = "client";
  auto at = parse_endpoint(cc.comm.server_uri);
  if (!at) {
    report.failure = to_string(at.err());
    return;
  }
  auto tls = tls_of(cc.comm, false);
  if (!tls) {
    report.failure = to_string(tls.err());
    return;
  }
  auto sc = make_system_config(2, true);
  caf::actor_system sys{sc};
  auto idle = millis_of(cc.comm.stream.idle_timeout_s);
  auto limits = limits_of(cc.comm);
  auto server = dial_with_retry(sys, *at, limits, *tls,
                                millis_of(cc.comm.stream.connect_timeout_s),
                                report.retries, stop, done);
  if (!server) {
    report.failure = to_string(server.err());
    return;
  }
  client_options co;
  co.client_id = cc.client_id;
  co.idle_timeout = idle;
  co.reconnect_for = millis_of(cc.comm.stream.reconnect_grace_s);
  co.token = cc.comm.auth.enabled ? cc.comm.auth.token : "";
  co.storage_dir = cc.storage_dir; // never the server's
  co.connector = spawn_dialer(sys, *at, limits, *tls, done);
  co.done_heard = done;
  co.host = at->host;
  co.port = at->port;
  co.progress = std::move(progress);
  co.shard = cc.shard;
  co.leaving = std::move(leaving);
  auto client = spawn_client(sys, *server, co, std::move(factory), &report);
  if (started)
    started(sys, client);
  await(sys, client);
  caf::anon_send_exit(co.connector, caf::exit_reason::user_shutdown);
}

} // namespace fedcaf
