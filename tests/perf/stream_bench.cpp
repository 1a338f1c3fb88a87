// Streams a synthetic model between two processes (a server and one client,
// each behind its gateway, on 127.0.0.1) and prints the download and upload
// rates as ratios of a raw TCP loopback copy measured in the same run, plus
// chunks in flight and peak RSS of both processes as multiples of the model.
// Then the same over TLS (certificates from deploy/make-certs.sh), printed
// as a ratio of the plain rates of the same run, with what bounds that
// ratio here: the CPU time both processes spent per MiB moved, plain and
// TLS, and AES-128-GCM's own rate on one core.
// Each CPU figure is set beside a floor measured in the same run: for the
// plain stream, raw TCP's kernel copies plus the passes this design's
// stream of checked chunks makes (the checksum of each chunk moved at both
// ends, the server's fold of each upload) and the round's own work outside
// the stream (the server's finalize, the trainer's pass); for TLS, the
// cipher at both ends plus the copy OpenSSL's record layer makes at each
// end (no kernel TLS here).
//
//   stream_bench [--mib 256] [--chunk-kib 1024] [--window 4] [--rounds 10]
//                [--tls 1] [--pairs 3]

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <nlohmann/json.hpp>
#include <openssl/evp.h>

#include "actors/client.hpp"
#include "actors/errors.hpp"
#include "actors/gateway.hpp"
#include "actors/server_side.hpp"
#include "fedcaf/chunk_plan.hpp"
#include "fedcaf/dummy_trainer.hpp"
#include "fedcaf/fedavg_accumulator.hpp"
#include "fedcaf/memory_probe.hpp"
#include "fedcaf/tls.hpp"
#include "messages/codec.hpp"

using namespace fedcaf;
using clock_type = std::chrono::steady_clock;

namespace {

struct bench_options {
  uint64_t model_bytes = 256ull << 20;
  uint64_t chunk_bytes = 1 << 20;
  uint32_t window = 4;
  uint32_t rounds = 10; ///< the best round counts: a shared machine is noisy
  bool tls = true;      ///< also measure over TLS
  uint32_t pairs = 3;   ///< plain and TLS runs alternated, for TLS's cost
};

bench_options parse(int argc, char** argv) {
  bench_options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    auto v = std::strtoull(argv[i + 1], nullptr, 10);
    if (k == "--mib")
      o.model_bytes = v << 20;
    else if (k == "--chunk-kib")
      o.chunk_bytes = v << 10;
    else if (k == "--window")
      o.window = static_cast<uint32_t>(v);
    else if (k == "--rounds")
      o.rounds = static_cast<uint32_t>(v);
    else if (k == "--tls")
      o.tls = v != 0;
    else if (k == "--pairs")
      o.pairs = std::max<uint32_t>(1, static_cast<uint32_t>(v));
  }
  return o;
}

/// Writes `n` bytes to `fd`, or ends the process with 3 (_exit: a forked
/// child must not flush the stdio buffers it inherited).
void write_all(int fd, const void* p, size_t n) {
  auto* c = static_cast<const char*>(p);
  while (n > 0) {
    auto k = ::write(fd, c, n);
    if (k <= 0)
      ::_exit(3);
    c += k;
    n -= static_cast<size_t>(k);
  }
}

void read_all(int fd, void* p, size_t n) {
  auto* c = static_cast<char*>(p);
  while (n > 0) {
    auto k = ::read(fd, c, n);
    if (k <= 0)
      std::exit(3);
    c += k;
    n -= static_cast<size_t>(k);
  }
}

/// CPU seconds (user and system) of this process and of its children
/// waited for so far.
double cpu_seconds() {
  double total = 0;
  for (auto who : {RUSAGE_SELF, RUSAGE_CHILDREN}) {
    rusage u{};
    ::getrusage(who, &u);
    total += static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
             static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
  }
  return total;
}

/// Bytes per second of a plain TCP copy of `bytes` between two processes on
/// loopback, in 1 MiB system calls. `model_sized`: sent straight from one
/// process's model-sized buffer, received straight into the other's (both
/// already faulted in): the same job the stream does, minus framing,
/// checksums and the actor runtime. Otherwise sent from and received into
/// one 1 MiB buffer, hot in the cache: what the socket itself can carry.
double raw_tcp_rate(uint64_t bytes, bool model_sized) {
  int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
  ::listen(listener, 1);
  constexpr uint64_t step = 1 << 20;
  auto span = model_sized ? bytes : step;
  if (::fork() == 0) {
    std::vector<char> model(span, 1);
    int s = ::socket(AF_INET, SOCK_STREAM, 0);
    if (::connect(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
      ::_exit(3);
    uint64_t got = 0;
    while (got < bytes) {
      auto at = got % span; // reads may end anywhere in a step
      auto k = ::read(s, model.data() + at,
                      std::min({step, span - at, bytes - got}));
      if (k <= 0)
        ::_exit(3);
      got += static_cast<uint64_t>(k);
    }
    char ack = model[span / 2];
    write_all(s, &ack, 1);
    ::_exit(0);
  }
  std::vector<char> model(span, 2);
  int s = ::accept(listener, nullptr, nullptr);
  auto start = clock_type::now();
  for (uint64_t sent = 0; sent < bytes; sent += step)
    write_all(s, model.data() + sent % span, std::min(step, bytes - sent));
  char ack;
  read_all(s, &ack, 1);
  std::chrono::duration<double> took = clock_type::now() - start;
  ::close(s);
  ::close(listener);
  ::wait(nullptr);
  return static_cast<double>(bytes) / took.count();
}

/// CPU seconds of the calling thread.
double thread_seconds() {
  timespec t{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) / 1e9;
}

/// CPU seconds, on one thread, of each pass the floor counts, over a model
/// of layout `m` in chunks of `chunk_bytes`, each the least of 3 passes.
/// Each chunk is taken from a chunk-sized buffer it was just copied into
/// (untimed), as a receiver takes it from the frame it just received, and
/// each of its passes is timed alone.
struct floor_passes {
  double checksum = 1e9; ///< XXH3 of every chunk (a sender's, a receiver's)
  double fold = 1e9;     ///< ram mode's exact fold of one update, measured
                         ///< and its values' bounds tested, as the server's
  double finalize = 1e9; ///< its finalize into the next model
  double train = 1e9;    ///< the dummy trainer's pass over the model
  double records = 1e9;  ///< every chunk copied into and out of a 16 KiB
                         ///< record buffer: TLS's record layer, both ends
};

/// Measures floor_passes in a child process (its buffers, 4 models' worth,
/// stay out of this process's peak RSS). Returns an error iff it failed.
result<floor_passes> measure_floor(const manifest& m, uint64_t chunk_bytes) {
  int pipe_fds[2];
  if (::pipe(pipe_fds) != 0)
    return error{errc::io_error, "pipe"};
  auto child = ::fork();
  if (child < 0) {
    ::close(pipe_fds[0]);
    ::close(pipe_fds[1]);
    return error{errc::io_error, "fork"};
  }
  if (child == 0) {
    ::close(pipe_fds[0]);
    floor_passes f;
    auto plan = chunk_plan::make(m, chunk_bytes);
    auto acc = plan ? fedavg_accumulator::make(m, *plan)
                    : result<fedavg_accumulator>{plan.err()};
    if (!acc)
      ::_exit(4);
    acc->recycle(byte_buffer::zeroed(m.total_bytes()));
    auto global = synthetic_model(m, 1);
    auto update = synthetic_model(m, 2);
    auto g = global.bytes.bytes();
    std::vector<std::byte> frame(chunk_bytes), into(chunk_bytes);
    std::vector<std::byte> record(16 << 10);
    uint64_t sink = 0;
    for (int pass = 0; pass < 3; ++pass) {
      double checksum = 0, fold = 0, records = 0;
      for (uint64_t seq = 0; seq < plan->chunk_count(); ++seq) {
        const auto& e = plan->extent(seq);
        std::memcpy(frame.data(), update.bytes.data() + e.model_offset,
                    e.bytes);
        std::span<const std::byte> x{frame.data(), e.bytes};
        auto t = thread_seconds();
        sink ^= msg::checksum(x);
        checksum += thread_seconds() - t;
        t = thread_seconds();
        if (!acc->fold_measured(seq, x, 1.0, false, g, 1e30))
          ::_exit(5);
        fold += thread_seconds() - t;
        t = thread_seconds();
        for (uint64_t o = 0; o < e.bytes; o += record.size()) {
          auto k = std::min<uint64_t>(record.size(), e.bytes - o);
          std::memcpy(record.data(), frame.data() + o, k); // sender
          std::memcpy(into.data() + o, record.data(), k);  // receiver
        }
        records += thread_seconds() - t;
        sink += static_cast<uint64_t>(into[seq % e.bytes]);
      }
      f.checksum = std::min(f.checksum, checksum);
      f.fold = std::min(f.fold, fold);
      f.records = std::min(f.records, records);
      auto t = thread_seconds();
      auto next = acc->finalize(g, nullptr);
      f.finalize = std::min(f.finalize, thread_seconds() - t);
      if (!next)
        ::_exit(6);
      acc->recycle(std::move(*next));
      t = thread_seconds();
      auto* v = reinterpret_cast<float*>(update.bytes.data());
      auto add = pass % 2 == 0 ? 0.5f : -0.5f; // the same values every pass
      for (uint64_t i = 0, n = m.total_bytes() / 4; i < n; ++i)
        v[i] += add;
      f.train = std::min(f.train, thread_seconds() - t);
    }
    if (sink == 42) // keeps the checksums and copies from being dropped
      std::fprintf(stderr, " ");
    write_all(pipe_fds[1], &f, sizeof f);
    ::_exit(0);
  }
  ::close(pipe_fds[1]);
  floor_passes f;
  auto got = ::read(pipe_fds[0], &f, sizeof f);
  ::close(pipe_fds[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  if (got != static_cast<ssize_t>(sizeof f) || !WIFEXITED(status) ||
      WEXITSTATUS(status) != 0)
    return error{errc::internal, "the floor's child failed (status " +
                                     std::to_string(status) + ")"};
  return f;
}

caf::actor_system_config network_config() {
  caf::actor_system_config cfg;
  add_errc_category(cfg);
  cfg.set("scheduler.max-threads", 2);
  cfg.set("scheduler.policy", caf::atom("sharing")); // as cli/run.cpp
  cfg.load<caf::io::middleman>();
  return cfg;
}

std::shared_ptr<tls_context> tls_for(const comm_config& comm, bool server) {
  if (!comm.use_ssl)
    return nullptr;
  auto t = tls_context::make(comm.tls, server);
  if (!t) {
    std::fprintf(stderr, "%s\n", to_string(t.err()).c_str());
    std::exit(6);
  }
  return *t;
}

/// The client process: connects, runs the rounds, writes its report to `fd`.
[[noreturn]] void client_process(int port_fd, int report_fd, const manifest& m,
                                 comm_config comm) {
  uint16_t port;
  read_all(port_fd, &port, sizeof port);
  run_report report;
  {
    auto cfg = network_config();
    caf::actor_system sys{cfg};
    auto server = dial(sys, {"127.0.0.1", port}, gateway_limits{},
                       tls_for(comm, false), std::chrono::seconds{10});
    if (!server)
      ::_exit(4);
    auto factory =
        [m](const client_configs&,
            const msg::welcome&) -> result<std::unique_ptr<trainer>> {
      return make_dummy_trainer(m, 0.5f, 1);
    };
    auto client =
        spawn_client(sys, *server, {"bench", std::chrono::milliseconds{60000}},
                     factory, &report);
    caf::scoped_actor self{sys};
    self->monitor(client);
    self->receive([](const caf::down_msg&) {});
  }
  auto text = to_json(report);
  write_all(report_fd, text.data(), text.size());
  ::_exit(report.failure.empty() ? 0 : 5);
}

std::string read_to_end(int fd) {
  std::string out;
  char buf[4096];
  ssize_t k;
  while ((k = ::read(fd, buf, sizeof buf)) > 0)
    out.append(buf, static_cast<size_t>(k));
  return out;
}

struct measured {
  double down = 0; ///< bytes/s, best round
  double up = 0;
  uint32_t in_flight = 0;
  double server_rss = 0; ///< bytes
  double client_rss = 0;
  double cpu_seconds = 0;  ///< both processes, the whole run
  double wall_seconds = 0; ///< the whole run
  double moved = 0;        ///< bytes streamed, both ways, every round
};

/// Bytes per second one core encrypts (or decrypts) with AES-128-GCM in
/// TLS records of 16 KiB, as OpenSSL does for the stream: the best of 3
/// passes over 64 MiB.
double aes_gcm_rate(bool encrypt) {
  constexpr size_t record = 16 << 10;
  constexpr size_t total = 64 << 20;
  std::vector<unsigned char> buf(1 << 20, 7);
  unsigned char key[16] = {1}, iv[12] = {2}, tag[16] = {};
  double best = 0;
  for (int pass = 0; pass < 3; ++pass) {
    auto* ctx = EVP_CIPHER_CTX_new();
    auto start = clock_type::now();
    for (size_t done = 0; done < total; done += record) {
      auto* p = buf.data() + done % buf.size();
      int n = 0;
      if (encrypt) {
        EVP_EncryptInit_ex(ctx, EVP_aes_128_gcm(), nullptr, key, iv);
        EVP_EncryptUpdate(ctx, p, &n, p, static_cast<int>(record));
        EVP_EncryptFinal_ex(ctx, tag, &n);
        EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, sizeof tag, tag);
      } else { // the tag does not match: decrypting costs the same
        EVP_DecryptInit_ex(ctx, EVP_aes_128_gcm(), nullptr, key, iv);
        EVP_DecryptUpdate(ctx, p, &n, p, static_cast<int>(record));
        EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, sizeof tag, tag);
        EVP_DecryptFinal_ex(ctx, tag, &n);
      }
    }
    std::chrono::duration<double> took = clock_type::now() - start;
    EVP_CIPHER_CTX_free(ctx);
    best = std::max(best, static_cast<double>(total) / took.count());
  }
  return best;
}

/// Runs the server here and one client in a child process over `comm`.
std::optional<measured> run_fedcaf(const bench_options& o, const manifest& m,
                                   const comm_config& comm,
                                   const comm_config& client_comm) {
  int port_pipe[2], report_pipe[2];
  if (::pipe(port_pipe) != 0 || ::pipe(report_pipe) != 0)
    return std::nullopt;
  auto cpu_before = cpu_seconds();
  auto wall_before = clock_type::now();
  auto child = ::fork();
  if (child == 0) {
    ::close(report_pipe[0]);
    client_process(port_pipe[0], report_pipe[1], m, client_comm);
  }
  ::close(report_pipe[1]);
  run_report server_report;
  {
    auto cfg = network_config();
    caf::actor_system sys{cfg};
    server_side_options so;
    so.server.require_certificate_name = comm.use_ssl;
    so.scheduler.num_clients = 1;
    so.scheduler.num_rounds = o.rounds;
    so.server.num_clients = 1;
    so.server.num_rounds = o.rounds;
    so.server.chunk_bytes = o.chunk_bytes;
    so.server.window = o.window;
    so.server.client_configs_yaml = "{}";
    auto side = spawn_server_side(sys, synthetic_model(m, 1), so, nullptr,
                                  &server_report);
    if (!side)
      return std::nullopt;
    gateway_limits limits;
    limits.window = o.window;
    limits.max_frame_bytes = std::max<uint64_t>(16 << 20, o.chunk_bytes + 4096);
    auto gate = listen(sys, side->server, {"127.0.0.1", 0}, limits,
                       tls_for(comm, true), side->refusals);
    if (!gate)
      return std::nullopt;
    uint16_t p = gate->port;
    write_all(port_pipe[1], &p, sizeof p);
    caf::scoped_actor self{sys};
    self->monitor(side->server);
    int status = 0;
    for (bool running = true; running;)
      self->receive([&](const caf::down_msg&) { running = false; },
                    caf::after(std::chrono::seconds{1}) >>
                        [&] {
                          // A client that failed never finishes the run.
                          if (::waitpid(child, &status, WNOHANG) == child &&
                              status != 0) {
                            self->send_exit(side->server,
                                            caf::exit_reason::user_shutdown);
                            server_report.failure = "the client failed";
                            child = -1;
                          }
                        });
    self->send_exit(gate->acceptor, caf::exit_reason::user_shutdown);
    side->shut_down(sys);
  }
  ::close(port_pipe[0]);
  ::close(port_pipe[1]);
  auto client_json = read_to_end(report_pipe[0]);
  ::close(report_pipe[0]);
  int status = 0;
  if (child > 0)
    ::waitpid(child, &status, 0);
  std::chrono::duration<double> wall = clock_type::now() - wall_before;
  auto cpu = cpu_seconds() - cpu_before;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 ||
      !server_report.failure.empty()) {
    std::fprintf(stderr, "run failed: %s\n", server_report.failure.c_str());
    return std::nullopt;
  }
  auto client = nlohmann::json::parse(client_json);
  auto model = static_cast<double>(m.total_bytes());
  measured out;
  for (const auto& r : client["rounds"]) {
    out.down = std::max(out.down, model / r["download_seconds"].get<double>());
    out.up = std::max(out.up, model / r["upload_seconds"].get<double>());
  }
  out.in_flight = client["peak_in_flight"].get<uint32_t>();
  out.server_rss = static_cast<double>(server_report.peak_rss_bytes);
  out.client_rss = client["peak_rss_bytes"].get<double>();
  out.cpu_seconds = cpu;
  out.wall_seconds = wall.count();
  out.moved = 2.0 * model * static_cast<double>(client["rounds"].size());
  return out;
}

} // namespace

int main(int argc, char** argv) {
  tune_malloc_for_streams(); // as `fedcaf server` and `fedcaf client` do
  auto o = parse(argc, argv);
  auto m = synthetic_layout(16, o.model_bytes);
  auto model = static_cast<double>(m.total_bytes());
  std::printf("model %.0f MiB in %zu tensors, chunk %llu KiB, window %u, "
              "%u rounds\n",
              model / (1 << 20), m.tensors.size(),
              static_cast<unsigned long long>(o.chunk_bytes >> 10), o.window,
              o.rounds);
  // The machine is shared: the best of three raw copies, like the best of
  // the rounds below. The ratios are taken to the faster of the two raw
  // copies: on some machines the kernel's copy into a cold model-sized
  // buffer is the slower one, and the socket's own speed is the ceiling.
  double raw_model = 0, raw_socket = 0, raw_cpu = 0;
  for (int i = 0; i < 3; ++i) {
    raw_model = std::max(raw_model, raw_tcp_rate(o.model_bytes, true));
    auto cpu_before = cpu_seconds();
    raw_socket = std::max(raw_socket, raw_tcp_rate(o.model_bytes, false));
    raw_cpu += cpu_seconds() - cpu_before;
  }
  // CPU milliseconds both processes of the raw copy spent per MiB.
  auto raw_per_mib = 1e3 * raw_cpu / (3.0 * model / (1 << 20));
  auto raw = std::max(raw_model, raw_socket);
  std::printf("raw TCP copy of the model:    %6.2f GB/s (best of 3)\n",
              raw_model / 1e9);
  std::printf("raw TCP through a 1 MiB buffer: %4.2f GB/s (best of 3); "
              "ratios below are to %.2f GB/s\n",
              raw_socket / 1e9, raw / 1e9);
  comm_config plain;
  auto r = run_fedcaf(o, m, plain, plain);
  if (!r)
    return 1;
  std::printf("fedcaf download, best round: %6.2f GB/s   ratio to raw TCP "
              "%.2f\n",
              r->down / 1e9, r->down / raw);
  std::printf("fedcaf upload, best round:   %6.2f GB/s   ratio to raw TCP "
              "%.2f\n",
              r->up / 1e9, r->up / raw);
  std::printf("peak chunks in flight: %u (window %u): at most %.1f MiB of "
              "payload in flight per stream\n",
              r->in_flight, o.window,
              static_cast<double>(r->in_flight * o.chunk_bytes) / (1 << 20));
  std::printf("peak RSS: server %.2f x model, client %.2f x model\n",
              r->server_rss / model, r->client_rss / model);
  auto per_mib = [](const measured& x) {
    return 1e3 * x.cpu_seconds / (x.moved / (1 << 20));
  };
  // The raw copy is a pipeline of one thread per process and does not fill
  // two cores; fedcaf's rate is bounded by its CPU time per byte spread
  // over all of them.
  auto cores = static_cast<double>(::sysconf(_SC_NPROCESSORS_ONLN));
  std::printf("CPU per MiB moved (both processes): raw TCP through a 1 MiB "
              "buffer %.3f ms (%.2f cores busy), fedcaf %.3f ms (whole run: "
              "with all %.0f cores busy, at most %.2f of raw TCP)\n",
              raw_per_mib, raw_socket / (1 << 20) * raw_per_mib / 1e3,
              per_mib(*r), cores,
              cores / (per_mib(*r) / 1e3) * (1 << 20) / raw);
  // The floor of this run's work per MiB moved (each round moves the model
  // down and up): the kernel's copies (raw TCP's CPU), the checksum of each
  // chunk moved at both ends (made, verified) and the server's fold of the
  // upload (the stream's floor), then the server's finalize and the
  // trainer's pass (the round's own, which the whole run's CPU includes).
  auto floor = measure_floor(m, o.chunk_bytes);
  if (!floor) {
    std::fprintf(stderr, "%s\n", to_string(floor.err()).c_str());
    return 1;
  }
  auto per_moved = [&](double seconds) {
    return 1e3 * seconds / (2.0 * model / (1 << 20));
  };
  auto checksums = per_moved(4 * floor->checksum); // each MiB, twice
  auto stream_floor = raw_per_mib + checksums + per_moved(floor->fold);
  auto run_floor = stream_floor + per_moved(floor->finalize + floor->train);
  std::printf("floor per MiB moved, one core: kernel copies (raw TCP) %.3f "
              "ms + checksums %.3f + fold %.3f = %.3f ms (%.2f x raw TCP); "
              "+ finalize %.3f + trainer %.3f = %.3f ms (%.2f x raw TCP)\n",
              raw_per_mib, checksums, per_moved(floor->fold), stream_floor,
              stream_floor / raw_per_mib, per_moved(floor->finalize),
              per_moved(floor->train), run_floor, run_floor / raw_per_mib);
  std::printf("fedcaf's CPU per MiB moved: %.2f x raw TCP, %.2f x the run's "
              "floor (beyond it: %.3f ms per MiB)\n",
              per_mib(*r) / raw_per_mib, per_mib(*r) / run_floor,
              per_mib(*r) - run_floor);
  // The server's aggregator verifies each chunk's checksum and folds it on
  // its one thread (this bench's server always; `fedcaf server` splits a
  // fold over a quarter of the host's cores): an upload goes no faster,
  // however the bytes travel.
  auto aggregator_rate = model / (floor->checksum + floor->fold);
  std::printf("the server's checksum and fold of an upload, on one thread: "
              "%.2f GB/s, %.2f of raw TCP (an upload's ceiling here)\n",
              aggregator_rate / 1e9, aggregator_rate / raw);
  if (!o.tls)
    return 0;
  char dir[] = "/tmp/fedcaf-bench-certsXXXXXX";
  if (!::mkdtemp(dir))
    return 1;
  auto make = std::string{FEDCAF_SOURCE_DIR} + "/deploy/make-certs.sh " + dir +
              " 127.0.0.1 bench > /dev/null";
  if (std::system(make.c_str()) != 0)
    return 1;
  std::string d = dir;
  comm_config server_tls;
  server_tls.use_ssl = true;
  server_tls.tls = {d + "/server.pem", d + "/server.key", d + "/ca.pem"};
  auto client_tls = server_tls;
  client_tls.tls = {d + "/bench.pem", d + "/bench.key", d + "/ca.pem"};
  auto t = run_fedcaf(o, m, server_tls, client_tls);
  std::error_code ignored; // a leftover temporary folder is no failure
  if (!t) {
    std::filesystem::remove_all(dir, ignored);
    return 1;
  }
  std::printf("TLS download, best round:    %6.2f GB/s   ratio to plain "
              "%.2f\n",
              t->down / 1e9, t->down / r->down);
  std::printf("TLS upload, best round:      %6.2f GB/s   ratio to plain "
              "%.2f\n",
              t->up / 1e9, t->up / r->up);
  // What bounds TLS/plain here: the CPU time each byte costs. Both
  // processes share this machine's cores, so a run can go no faster than
  // its CPU time spread over all of them.
  auto enc = aes_gcm_rate(true), dec = aes_gcm_rate(false);
  std::printf("CPU per MiB moved (both processes, whole run): plain %.3f ms, "
              "TLS %.3f ms (%.3f ms more)\n",
              per_mib(*r), per_mib(*t), per_mib(*t) - per_mib(*r));
  std::printf("AES-128-GCM on one core, 16 KiB records: encrypt %.2f GB/s, "
              "decrypt %.2f GB/s: %.3f ms per MiB for both ends\n",
              enc / 1e9, dec / 1e9, 1e3 * (1 << 20) * (1 / enc + 1 / dec));
  // At the best rounds' rates, that CPU time per byte keeps this many cores
  // busy: where both runs fill the machine's cores, TLS/plain can be no
  // more than the inverse ratio of their CPU time per byte.
  auto busy = [&](const measured& x) {
    return (x.down + x.up) / 2 / (1 << 20) * per_mib(x) / 1e3;
  };
  std::printf("cores kept busy at the best rounds' rates: plain %.2f, TLS "
              "%.2f of %.0f; TLS/plain at equal use of the cores: %.2f\n",
              busy(*r), busy(*t), cores, per_mib(*r) / per_mib(*t));
  // What TLS must add here with OpenSSL: the cipher at both ends, and the
  // copy its record layer makes at each end (the plaintext into its
  // 16 KiB record buffer, encrypted there; decrypted there, then copied
  // out). The kernel offers no TLS of its own here. TLS's cost is the
  // difference of two whole runs' CPU, noisy on a shared machine: more
  // pairs of runs, alternated, each with the cipher measured beside it,
  // and the medians.
  auto record_copies = per_moved(2 * floor->records); // both ends, per MiB
  std::vector<double> to_cipher, to_floor, floor_ratio;
  auto note_pair = [&](const measured& plain_run, const measured& tls_run,
                       double e, double d) {
    auto cipher = 1e3 * (1 << 20) * (1 / e + 1 / d);
    auto added = per_mib(tls_run) - per_mib(plain_run);
    to_cipher.push_back(added / cipher);
    to_floor.push_back(added / (cipher + record_copies));
    floor_ratio.push_back((cipher + record_copies) / cipher);
    return std::pair{cipher, added};
  };
  auto [cipher, added] = note_pair(*r, *t, enc, dec);
  std::printf(
      "TLS's floor per MiB moved: cipher %.3f ms + OpenSSL's record "
      "copy at each end %.3f = %.3f ms (%.2f x the cipher); TLS added %.3f "
      "ms: %.2f x the cipher, %.2f x its floor\n",
      cipher, record_copies, cipher + record_copies, floor_ratio.back(), added,
      to_cipher.back(), to_floor.back());
  for (uint32_t pair = 1; pair < o.pairs; ++pair) {
    auto p = run_fedcaf(o, m, plain, plain);
    auto q = run_fedcaf(o, m, server_tls, client_tls);
    if (!p || !q) {
      std::filesystem::remove_all(dir, ignored);
      return 1;
    }
    note_pair(*p, *q, aes_gcm_rate(true), aes_gcm_rate(false));
  }
  std::filesystem::remove_all(dir, ignored);
  auto spread = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    auto mid = v.size() % 2 ? v[v.size() / 2]
                            : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
    char line[96];
    std::snprintf(line, sizeof line, "%.2f to %.2f (median %.2f)", v.front(),
                  v.back(), mid);
    return std::string{line};
  };
  std::printf("over %zu pairs of runs, plain and TLS alternated: TLS added "
              "%s x the cipher, %s x its floor; the floor %s x the cipher\n",
              to_cipher.size(), spread(to_cipher).c_str(),
              spread(to_floor).c_str(), spread(floor_ratio).c_str());
  return 0;
}
