// A hostile peer for tests/integration/hostile_peer_test.sh. It connects to a
// real `fedcaf server` on 127.0.0.1, mounts one attack, and says what the
// server did, as seen from the wire. Frames are built and read with
// messages/codec.hpp (it links fedcaf_messages only: no CAF, no LibTorch),
// so what it sends is exactly the bytes it means to send.
//
//   hostile_peer --port P --attack NAME [--expect CODE] [--id ID --token T]
//                [--registered] [options, see usage()]
//
// For every connection it prints `conn LABEL 127.0.0.1:PORT` (the driver
// looks for the server's refusal of that address), then one line per
// observation, and last `verdict: ok` or `verdict: unexpected: ...`.
// Exits 0 iff the server behaved as specified, 1 iff it did not, 2 on a
// usage or local error. Every wait is bounded in time, every loop in count.
// Thread-safety: one thread, but for `keepalive`, which owns the session it
// serves while it runs.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/ssl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "fedcaf/chunk_plan.hpp"
#include "fedcaf/compression.hpp"
#include "fedcaf/config.hpp"
#include "fedcaf/error.hpp"
#include "fedcaf/manifest.hpp"
#include "messages/codec.hpp"
#include "messages/frame_reader.hpp"

namespace {

using namespace fedcaf;
using clock_type = std::chrono::steady_clock;
using std::chrono::milliseconds;

// -- options -------------------------------------------------------------------

struct options {
  uint16_t port = 0;
  std::string attack;
  /// The refusal code the server must answer with (alternatives: a|b).
  std::string expect;
  std::string client_id; ///< registered attacks: an identity with a token
  std::string token;
  bool registered = false; ///< pre-auth attacks: mount them after a Welcome
  uint64_t frame_bytes = 1ull << 30;     ///< oversized_header: announced
  uint32_t held = 8;                     ///< idle_flood: max_unauthenticated
  uint32_t count = 25;                   ///< hellos: how many
  uint32_t extra = 4;                    ///< idle_flood: beyond the bound
  double handshake_s = 2;                ///< the server's handshake_timeout_s
  uint32_t trickle_ms = 100;             ///< slow_hello: one byte this often
  double delay_s = 1.5;                  ///< hijack_stream: before the attack
  uint32_t finite_chunks = 2;            ///< uploads: the first spoiled
  uint8_t encoding = 1;                  ///< wrong_encoding: the offer's
  double heartbeat_s = 0.5;              ///< welcomed: send one this often
  double timeout_s = 30;                 ///< bound on the whole attack
  double drip_s = 2.5;                   ///< slow_drip: one chunk this often
  std::optional<uint64_t> target_stream; ///< hijack_stream: else guessed
  std::string accomplice_id; ///< hijack_stream: opens the stream attacked
  std::string accomplice_token;
  /// hold_round: leave once this file exists; uploads: offer once it does.
  std::string until_file;
  /// The local address the connections come from (token_guess: another
  /// loopback address than the honest clients').
  std::string source = "127.0.0.1";
  uint32_t attempts = 200; ///< token_guess: Hellos, each on a connection
  double hold_s = 20;      ///< stall_read: how long it watches the server
  uint32_t overflow = 0;   ///< stall_read: fetches past the window
};

void usage() {
  std::fprintf(
      stderr,
      "usage: hostile_peer --port P --attack NAME [--expect CODE] [options]\n"
      "  before a Welcome (or after one: --registered --id ID --token T):\n"
      "    oversized_header [--frame-bytes N], garbage, garbage_body,\n"
      "    zero_request_id, unknown_kind, server_kind, log_injection,\n"
      "    evaluation_first, utf8_id, secagg_keys\n"
      "  before a Welcome only, each with [--handshake-s S]: slow_hello,\n"
      "    slow_tls (to a TLS server) [--trickle-ms MS], idle_flood\n"
      "    [--held N --extra N]\n"
      "  registered (--id ID --token T): fetch_flood, credit_flood,\n"
      "    nan_update [--finite-chunks N], huge_update, big_update,\n"
      "    update_switch [--finite-chunks N] (then another updateId),\n"
      "    offer_silent,\n"
      "    reoffer_keepalive, takeover_flood, refusal_flood, hijack_stream\n"
      "    --accomplice-id ID --accomplice-token T [--delay-s S]\n"
      "    [--target-stream ID], hold_round --until-file F (joins a round,\n"
      "    never offers, leaves once F exists), never_offer (joins every\n"
      "    round, never offers), slow_drip [--drip-s S] (offers, then one\n"
      "    chunk every S seconds), pace_stall [--drip-s S] (fetches chunk 0\n"
      "    again every S seconds, never another), refetch_loop [--drip-s S]\n"
      "    (every chunk, one each S s, then again and again at once),\n"
      "    drip_new [--drip-s S] (one new chunk every S seconds)\n"
      "  registered, to a server that takes compressed uploads (chunks\n"
      "    spoiled from --finite-chunks N on): int8_nan_scale,\n"
      "    int8_huge_scale, short_chunk,\n"
      "    zfp_garbage, zfp_over_bound, wrong_encoding [--encoding N]\n"
      "  uploads (nan_update, huge_update and the compressed ones): they\n"
      "    hold the round until --until-file F exists, if given\n"
      "  a test device: hellos [--count N] [--id ID --token T] (each on a\n"
      "    new connection, one after another; each must be answered)\n"
      "  stall_read --id ID --token T [--hold-s S] [--count N]\n"
      "    [--overflow K] (1 s later, K fetches past the window: refused)\n"
      "    [--until-file F]: fetches a window of chunks, never reads; the\n"
      "    server must close within S seconds (N connections in turn; held\n"
      "    open until F exists)\n"
      "  token_guess --id ID [--source ADDR] [--attempts N]: wrong tokens\n"
      "    for ID, each on a new connection from ADDR\n"
      "  all: [--heartbeat-s S] [--timeout-s S] [--source ADDR]\n");
}

std::optional<options> parse_options(int argc, char** argv) {
  options o;
  std::map<std::string, std::string> kv;
  for (int i = 1; i < argc; ++i) {
    std::string key = argv[i];
    if (key == "--registered") {
      o.registered = true;
      continue;
    }
    if (key.rfind("--", 0) != 0 || i + 1 >= argc)
      return std::nullopt;
    kv[key.substr(2)] = argv[++i];
  }
  try {
    for (const auto& [k, v] : kv) {
      if (k == "port")
        o.port = static_cast<uint16_t>(std::stoul(v));
      else if (k == "attack")
        o.attack = v;
      else if (k == "expect")
        o.expect = v;
      else if (k == "id")
        o.client_id = v;
      else if (k == "token")
        o.token = v;
      else if (k == "frame-bytes")
        o.frame_bytes = std::stoull(v);
      else if (k == "count")
        o.count = static_cast<uint32_t>(std::stoul(v));
      else if (k == "held")
        o.held = static_cast<uint32_t>(std::stoul(v));
      else if (k == "extra")
        o.extra = static_cast<uint32_t>(std::stoul(v));
      else if (k == "handshake-s")
        o.handshake_s = std::stod(v);
      else if (k == "trickle-ms")
        o.trickle_ms = static_cast<uint32_t>(std::stoul(v));
      else if (k == "delay-s")
        o.delay_s = std::stod(v);
      else if (k == "finite-chunks")
        o.finite_chunks = static_cast<uint32_t>(std::stoul(v));
      else if (k == "encoding" && std::stoul(v) <= 0xff)
        o.encoding = static_cast<uint8_t>(std::stoul(v));
      else if (k == "heartbeat-s")
        o.heartbeat_s = std::stod(v);
      else if (k == "timeout-s")
        o.timeout_s = std::stod(v);
      else if (k == "target-stream")
        o.target_stream = std::stoull(v);
      else if (k == "accomplice-id")
        o.accomplice_id = v;
      else if (k == "accomplice-token")
        o.accomplice_token = v;
      else if (k == "until-file")
        o.until_file = v;
      else if (k == "drip-s")
        o.drip_s = std::stod(v);
      else if (k == "source")
        o.source = v;
      else if (k == "overflow")
        o.overflow = static_cast<uint32_t>(std::stoul(v));
      else if (k == "hold-s")
        o.hold_s = std::stod(v);
      else if (k == "attempts")
        o.attempts = static_cast<uint32_t>(std::stoul(v));
      else
        return std::nullopt;
    }
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (o.port == 0 || o.attack.empty() || o.held > 1024 || o.extra > 1024)
    return std::nullopt;
  return o;
}

// -- reporting ---------------------------------------------------------------

/// What the attack saw, and what it expected but did not see.
class verdict {
public:
  explicit verdict(std::string attack) : attack_(std::move(attack)) {}

  void note(const std::string& line) const {
    std::printf("hostile_peer: %s: %s\n", attack_.c_str(), line.c_str());
    std::fflush(stdout);
  }

  /// Records `what` as unexpected unless `ok`.
  void expect(bool ok, const std::string& what) {
    if (!ok) {
      note("UNEXPECTED: " + what);
      problems_.push_back(what);
    }
  }

  /// Prints the verdict line; returns the exit status.
  int finish() const {
    if (problems_.empty()) {
      note("verdict: ok");
      return 0;
    }
    std::string all;
    for (const auto& p : problems_)
      all += (all.empty() ? "" : "; ") + p;
    note("verdict: unexpected: " + all);
    return 1;
  }

private:
  std::string attack_;
  std::vector<std::string> problems_;
};

/// A local failure (not the server's): usage, socket, crafting.
struct local_failure {
  std::string what;
};

double seconds_since(clock_type::time_point t) {
  return std::chrono::duration<double>(clock_type::now() - t).count();
}

clock_type::time_point after_s(double s) {
  return clock_type::now() + std::chrono::duration_cast<clock_type::duration>(
                                 std::chrono::duration<double>(s));
}

/// Milliseconds in `d`, rounded up, at least 0 (for poll).
int64_t ceil_ms(clock_type::duration d) {
  return std::max<int64_t>(0, std::chrono::ceil<milliseconds>(d).count());
}

std::string fmt_s(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f s", s);
  return buf;
}

// -- frames --------------------------------------------------------------------

/// The kind's name, in the order of msg::frame_kind.
const char* kind_name(msg::frame_kind k) {
  static constexpr const char* names[] = {
      "hello", "welcome", "round_start", "offer",         "accept",
      "chunk", "credit",  "fetch",       "end_of_stream", "stream_closed",
      "done",  "error",   "heartbeat",   "round_over"};
  auto i = static_cast<size_t>(k);
  return i < std::size(names) ? names[i] : "?";
}

/// Returns the refusal an error frame carries, or nothing iff `f` is not one.
std::optional<error> refusal_of(const msg::frame& f) {
  auto k = msg::kind_of(f);
  if (!k || *k != msg::frame_kind::error)
    return std::nullopt;
  auto e = msg::decode<msg::round_over>(f); // an error frame decodes to it
  if (e)
    return std::nullopt;
  return e.err();
}

/// One line about a frame the server sent.
std::string describe(const msg::frame& f) {
  auto id = " (request id " + std::to_string(msg::request_id(f)) + ")";
  auto k = msg::kind_of(f);
  if (!k)
    return "an undecodable frame: " + to_string(k.err()) + id;
  if (auto e = refusal_of(f))
    return "error frame " + to_string(*e) + id;
  return std::string{kind_name(*k)} + " frame of " + std::to_string(f.size()) +
         " bytes" + id;
}

msg::frame with_id(msg::frame f, uint32_t id) {
  msg::set_request_id(f, id);
  return f;
}

void put_u32(msg::frame& f, size_t at, uint32_t x) {
  x = htole32(x);
  std::memcpy(f.data() + at, &x, sizeof x);
}

/// A frame header (envelope and segment table) that announces a frame of
/// `total_bytes` (rounded down to whole words), followed by `body_bytes`
/// bytes of `fill`.
msg::frame header_announcing(uint64_t total_bytes, uint32_t request_id,
                             size_t body_bytes, char fill) {
  msg::frame f(msg::frame_header_bytes + body_bytes, fill);
  std::fill_n(f.begin(), msg::frame_header_bytes, 0);
  auto words = (total_bytes - msg::frame_header_bytes) / 8;
  put_u32(f, 0, request_id);
  put_u32(f, 12, static_cast<uint32_t>(std::min<uint64_t>(words, 0xFFFFFFFFu)));
  return f;
}

/// Byte offset of the Frame body's union discriminant: envelope, segment
/// table, root pointer, then the data word (version u16, discriminant u16).
constexpr size_t discriminant_at = 8 + 8 + 8 + 2;

/// Returns a frame of a kind the protocol does not have: a heartbeat whose
/// union discriminant says 0x7fff. Throws local_failure iff the encoder's
/// layout is not the one assumed (checked against kind_of).
msg::frame frame_of_unknown_kind(uint32_t request_id) {
  auto f = with_id(msg::encode_heartbeat(), request_id);
  auto patch = [&](uint16_t which) {
    which = htole16(which);
    std::memcpy(f.data() + discriminant_at, &which, sizeof which);
  };
  patch(13); // round_over's place in the union: proves the offset
  auto k = msg::kind_of(f);
  if (!k || *k != msg::frame_kind::round_over)
    throw local_failure{"the Frame layout is not the one assumed"};
  patch(0x7fff);
  if (msg::kind_of(f))
    throw local_failure{"a discriminant of 0x7fff still decodes"};
  return f;
}

/// splitmix64: reproducible bytes.
class byte_source {
public:
  explicit byte_source(uint64_t seed) : state_(seed) {}
  uint8_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return static_cast<uint8_t>(z ^ (z >> 31));
  }

private:
  uint64_t state_;
};

// -- one TCP connection ---------------------------------------------------------

enum class wire_state { frame, closed, timeout, broken };

struct wire_event {
  wire_state state = wire_state::timeout;
  msg::frame f;
  std::string detail; ///< closed: "EOF" or "reset"; broken: why
};

/// A connection to the server, owned by one attack (RAII). Frames are cut
/// with msg::frame_reader, so a frame the server sends is read exactly.
class peer_socket {
public:
  /// Connects to 127.0.0.1:`port` from `source` (an IPv4 address of this
  /// host). Throws local_failure iff it cannot.
  explicit peer_socket(uint16_t port, const std::string& source = "127.0.0.1")
      : source_(source), reader_(64u << 20) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0)
      throw local_failure{std::string{"socket: "} + std::strerror(errno)};
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    sockaddr_in from{};
    from.sin_family = AF_INET;
    if (::inet_pton(AF_INET, source.c_str(), &from.sin_addr) != 1 ||
        ::bind(fd_, reinterpret_cast<sockaddr*>(&from), sizeof from) != 0) {
      ::close(fd_);
      throw local_failure{"cannot connect from " + source};
    }
    sockaddr_in at{};
    at.sin_family = AF_INET;
    at.sin_port = htons(port);
    at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&at), sizeof at) != 0) {
      auto why = std::string{"connect: "} + std::strerror(errno);
      ::close(fd_);
      throw local_failure{why};
    }
    sockaddr_in me{};
    socklen_t n = sizeof me;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&me), &n);
    local_port_ = ntohs(me.sin_port);
  }
  ~peer_socket() {
    if (fd_ >= 0)
      ::close(fd_);
  }
  peer_socket(const peer_socket&) = delete;
  peer_socket& operator=(const peer_socket&) = delete;

  int fd() const { return fd_; }
  uint16_t local_port() const { return local_port_; }
  std::string address() const {
    return source_ + ":" + std::to_string(local_port_);
  }

  /// Sends all of `bytes` within 5 s. Returns false iff the server closed
  /// or reset the connection first (or it did not drain).
  bool send_all(const char* bytes, size_t n) {
    auto deadline = after_s(5);
    while (n > 0 && clock_type::now() < deadline) {
      auto sent = ::send(fd_, bytes, n, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (sent > 0) {
        bytes += sent;
        n -= static_cast<size_t>(sent);
        continue;
      }
      if (sent < 0 && errno != EAGAIN && errno != EINTR)
        return false;
      pollfd p{fd_, POLLOUT, 0};
      ::poll(&p, 1, 50);
    }
    return n == 0;
  }
  bool send_frame(const msg::frame& f) { return send_all(f.data(), f.size()); }

  /// Waits until `deadline` for the next whole frame from the server.
  wire_event read_frame(clock_type::time_point deadline) {
    if (failed_)
      return {wire_state::broken, {}, "the stream broke before"};
    for (int reads = 0; reads < (1 << 20); ++reads) {
      pollfd p{fd_, POLLIN, 0};
      auto ready = ::poll(
          &p, 1, static_cast<int>(ceil_ms(deadline - clock_type::now())));
      if (ready == 0)
        return {wire_state::timeout, {}, ""};
      auto dst = reader_.next();
      auto got = ::recv(fd_, dst.data(), dst.size(), MSG_DONTWAIT);
      if (got == 0)
        return {wire_state::closed, {}, "EOF"};
      if (got < 0 && errno == ECONNRESET)
        return {wire_state::closed, {}, "reset"};
      if (got < 0 && (errno == EINTR || errno == EAGAIN))
        continue;
      if (got < 0)
        return {wire_state::broken, {}, std::strerror(errno)};
      auto f = reader_.commit(static_cast<size_t>(got));
      if (!f) {
        failed_ = true;
        return {wire_state::broken, {}, to_string(f.err())};
      }
      if (*f)
        return {wire_state::frame, std::move(**f), ""};
    }
    return {wire_state::broken, {}, "too many reads for one frame"};
  }

private:
  int fd_ = -1;
  uint16_t local_port_ = 0;
  std::string source_;
  msg::frame_reader reader_;
  bool failed_ = false;
};

/// Opens a connection and announces it for the driver.
std::unique_ptr<peer_socket> open_conn(const options& o, verdict& v,
                                       const std::string& label) {
  auto s = std::make_unique<peer_socket>(o.port, o.source);
  v.note("conn " + label + " " + s->address());
  return s;
}

// -- what the server answers ------------------------------------------------------

/// How a connection ended after an attack.
struct ending {
  std::optional<error> refusal;       ///< the first error frame
  std::vector<std::string> frames;    ///< every frame, described
  std::vector<msg::frame> non_errors; ///< frames other than error frames
  bool closed = false;                ///< by the server (EOF or reset)
  std::string closed_how = "still open";
  double seconds = 0; ///< from `since` (see take_arrived) to the close
};

/// Takes every frame that has arrived on `s` without waiting. Returns true
/// iff the connection has ended (the server closed it, or it broke).
bool take_arrived(peer_socket& s, ending& out, clock_type::time_point since) {
  for (int frames = 0; frames < 100000; ++frames) {
    auto ev = s.read_frame(clock_type::now());
    if (ev.state == wire_state::timeout)
      return false;
    if (ev.state != wire_state::frame) {
      out.closed = ev.state == wire_state::closed;
      out.closed_how = ev.detail;
      out.seconds = seconds_since(since);
      return true;
    }
    auto k = msg::kind_of(ev.f);
    if (k && *k == msg::frame_kind::heartbeat)
      continue;
    out.frames.push_back(describe(ev.f));
    auto e = refusal_of(ev.f);
    if (e && !out.refusal)
      out.refusal = e;
    if (!e)
      out.non_errors.push_back(std::move(ev.f));
  }
  return false;
}

/// How long a connection may stay open after a refusal: the server writes
/// the error frame, then closes (it gives pending output 2 s).
constexpr double close_after_refusal_s = 2.5;

/// Reads into `out` until the server closes the connection or `deadline`.
/// Sends a heartbeat every `beat_s` (0: never), so that only the attack can
/// be the reason for a close. Returns true iff the connection ended.
bool await_close(peer_socket& s, clock_type::time_point deadline, ending& out,
                 clock_type::time_point since, double beat_s = 0) {
  auto next_beat = beat_s > 0 ? after_s(beat_s) : deadline;
  bool refused = out.refusal.has_value();
  for (int polls = 0; polls < 1000000; ++polls) {
    if (take_arrived(s, out, since))
      return true;
    auto now = clock_type::now();
    if (out.refusal && !refused) { // the close follows at once (grace: 2 s)
      refused = true;
      deadline = std::min(deadline, after_s(close_after_refusal_s));
    }
    if (now >= deadline)
      break;
    if (beat_s > 0 && now >= next_beat) {
      s.send_frame(msg::encode_heartbeat());
      next_beat = after_s(beat_s);
    }
    auto until = std::min(deadline, next_beat);
    pollfd p{s.fd(), POLLIN, 0};
    ::poll(&p, 1, static_cast<int>(ceil_ms(until - now)));
  }
  out.seconds = seconds_since(since);
  return false;
}

ending await_close(peer_socket& s, clock_type::time_point deadline,
                   double beat_s = 0) {
  ending out;
  await_close(s, deadline, out, clock_type::now(), beat_s);
  return out;
}

/// Returns true iff `code` is one of `codes` ("a|b|...").
bool one_of(const std::string& code, const std::string& codes) {
  for (size_t at = 0; at <= codes.size();) {
    auto end = std::min(codes.find('|', at), codes.size());
    if (codes.compare(at, end - at, code) == 0)
      return true;
    at = end + 1;
  }
  return false;
}

/// Checks that the server refused with `code` (or one of "a|b"), then
/// closed the connection.
void expect_refusal(verdict& v, const ending& e, const std::string& code,
                    const std::string& label) {
  for (const auto& f : e.frames)
    v.note(label + ": got " + f);
  v.note(label + ": connection " +
         (e.closed ? "closed by the server (" + e.closed_how + ") after " +
                         fmt_s(e.seconds)
                   : "still open after " + fmt_s(e.seconds)));
  if (!e.refusal) {
    v.expect(false, label + (e.closed ? ": closed without an error frame"
                                      : ": no answer and no close within " +
                                            fmt_s(e.seconds)));
    return;
  }
  v.expect(one_of(to_string(e.refusal->code), code),
           label + ": refused with " + to_string(e.refusal->code) +
               ", expected " + code);
  v.expect(e.closed, label + ": refused, but the connection stayed open for " +
                         fmt_s(e.seconds));
}

// -- a welcomed connection ---------------------------------------------------------

/// A connection that said Hello with valid credentials and was welcomed.
/// Reads unasked frames (heartbeats, round start, round over) while waiting
/// for an answer, and sends a heartbeat every heartbeat_s.
class session {
public:
  session(const options& o, verdict& v, const std::string& label)
      : o_(o), v_(v), sock_(open_conn(o, v, label)) {}

  peer_socket& socket() { return *sock_; }
  uint32_t next_id() { return next_id_++; }

  /// Says Hello; returns the Welcome, or the refusal.
  result<msg::welcome> hello(clock_type::time_point deadline) {
    auto id = next_id();
    sock_->send_frame(
        with_id(msg::encode(msg::hello{o_.client_id, o_.token}), id));
    auto f = await_reply(id, deadline);
    if (!f)
      return f.err();
    return msg::decode<msg::welcome>(*f);
  }

  /// Waits for the next round start (skipping heartbeats and round over).
  result<msg::round_start> await_round(clock_type::time_point deadline) {
    for (int n = 0; n < 100000; ++n) {
      auto f = next_unasked(deadline);
      if (!f)
        return f.err();
      auto k = msg::kind_of(*f);
      if (k && *k == msg::frame_kind::round_start)
        return msg::decode<msg::round_start>(*f);
      v_.note("while waiting for a round: " + describe(*f));
      if (k && *k == msg::frame_kind::done)
        return error{errc::disconnected, "the run ended"};
    }
    return error{errc::internal, "too many frames"};
  }

  /// Sends `f` as request `id` and returns the server's reply to it.
  result<msg::frame> ask(msg::frame f, clock_type::time_point deadline) {
    auto id = next_id();
    if (!sock_->send_frame(with_id(std::move(f), id)))
      return error{errc::disconnected, "the server closed the connection"};
    return await_reply(id, deadline);
  }

  /// Returns the reply to request `id`, skipping unasked frames (kept for
  /// await_round). An error frame with another id answers it too.
  result<msg::frame> await_reply(uint32_t id, clock_type::time_point deadline) {
    for (int n = 0; n < 100000; ++n) {
      auto ev = read(deadline);
      if (ev.state != wire_state::frame)
        return lost(ev);
      auto got = msg::request_id(ev.f);
      if (got == id || refusal_of(ev.f))
        return std::move(ev.f);
      if (got == 0)
        keep_unasked(std::move(ev.f));
      else
        v_.note("a reply to another request: " + describe(ev.f));
    }
    return error{errc::internal, "too many frames"};
  }

  /// Returns the next frame that answers a request (a nonzero request id,
  /// or an error frame), keeping unasked ones; a wire_event other than a
  /// frame iff the connection ended or `deadline` passed.
  wire_event next_reply(clock_type::time_point deadline) {
    for (int n = 0; n < 100000; ++n) {
      auto ev = read(deadline);
      if (ev.state != wire_state::frame || msg::request_id(ev.f) != 0 ||
          refusal_of(ev.f))
        return ev;
      keep_unasked(std::move(ev.f));
    }
    return {wire_state::broken, {}, "too many frames"};
  }

  /// Reads frames until `deadline`, sending heartbeats; returns early iff
  /// the connection ends, and then says how.
  std::optional<wire_event> idle_until(clock_type::time_point deadline) {
    for (int n = 0; n < 100000; ++n) {
      auto ev = read(deadline);
      if (ev.state == wire_state::timeout)
        return std::nullopt;
      if (ev.state != wire_state::frame)
        return ev;
      v_.note("while idle: " + describe(ev.f));
      keep_unasked(std::move(ev.f));
    }
    return std::nullopt;
  }

  /// Takes the oldest unasked frame kept, if any.
  std::optional<msg::frame> take_unasked() {
    if (unasked_.empty())
      return std::nullopt;
    auto f = std::move(unasked_.front());
    unasked_.erase(unasked_.begin());
    return f;
  }

private:
  result<msg::frame> next_unasked(clock_type::time_point deadline) {
    if (auto f = take_unasked())
      return std::move(*f);
    auto ev = read(deadline);
    if (ev.state != wire_state::frame)
      return lost(ev);
    return std::move(ev.f);
  }

  /// The next frame other than a heartbeat, sending ours on time.
  wire_event read(clock_type::time_point deadline) {
    for (int n = 0; n < 1000000; ++n) {
      if (clock_type::now() >= next_beat_) {
        sock_->send_frame(msg::encode_heartbeat());
        next_beat_ = after_s(o_.heartbeat_s);
      }
      auto ev = sock_->read_frame(std::min(deadline, next_beat_));
      if (ev.state == wire_state::timeout && clock_type::now() < deadline)
        continue;
      if (ev.state == wire_state::frame) {
        auto k = msg::kind_of(ev.f);
        if (k && *k == msg::frame_kind::heartbeat)
          continue;
      }
      return ev;
    }
    return {wire_state::broken, {}, "too many reads"};
  }

  void keep_unasked(msg::frame f) {
    if (unasked_.size() < 64)
      unasked_.push_back(std::move(f));
  }

  static error lost(const wire_event& ev) {
    if (ev.state == wire_state::timeout)
      return {errc::timeout, "no answer in time"};
    return {errc::disconnected, "connection " + ev.detail};
  }

  const options& o_;
  verdict& v_;
  std::unique_ptr<peer_socket> sock_;
  uint32_t next_id_ = 1;
  clock_type::time_point next_beat_ = clock_type::now();
  std::vector<msg::frame> unasked_;
};

/// Keeps a welcomed session alive on a thread of its own (heartbeats; what
/// arrives is noted) until destroyed. REQUIRES: nobody else touches the
/// session meanwhile, and it outlives this.
class keepalive {
public:
  explicit keepalive(session& s)
      : thread_([&s](std::stop_token stop) {
          for (int slices = 0; slices < 100000 && !stop.stop_requested();
               ++slices)
            if (s.idle_until(after_s(0.2)))
              return; // the connection ended
        }) {}

private:
  std::jthread thread_;
};

/// A welcomed session that has seen its round start, and the round's plan.
struct in_round {
  std::unique_ptr<session> s;
  msg::round_start round;
  std::optional<chunk_plan> plan;
  compression_config compression; ///< the Welcome's: what uploads carry
};

/// Connects and says Hello. Throws local_failure iff refused, or the
/// Welcome's client configs do not parse (the attack was not mounted).
in_round welcome(const options& o, verdict& v, const std::string& label,
                 clock_type::time_point deadline) {
  in_round r;
  r.s = std::make_unique<session>(o, v, label);
  auto w = r.s->hello(deadline);
  if (!w)
    throw local_failure{"Hello as " + o.client_id +
                        " was refused: " + to_string(w.err())};
  v.note(label + ": welcomed as client " + std::to_string(w->client_index) +
         " of " + std::to_string(w->num_clients));
  auto configs = parse_client_configs(w->client_configs);
  if (!configs)
    throw local_failure{"the Welcome's client configs do not parse: " +
                        to_string(configs.err())};
  r.compression = configs->compression;
  return r;
}

/// Waits until `deadline` for the next round on every one of `sessions`,
/// a slice at a time on each, so that all keep sending heartbeats. Throws
/// local_failure iff a round does not start on one of them.
void await_rounds(std::initializer_list<in_round*> sessions,
                  clock_type::time_point deadline) {
  for (auto* r : sessions) {
    for (int slices = 0;; ++slices) {
      for (auto* other : sessions) // heartbeats, frames kept for later
        if (other != r && other->s->idle_until(clock_type::now()))
          throw local_failure{"a connection ended before the round"};
      auto rs = r->s->await_round(std::min(deadline, after_s(0.2)));
      if (rs) {
        r->round = *rs;
        break;
      }
      if (rs.err().code != errc::timeout || clock_type::now() >= deadline ||
          slices > 100000)
        throw local_failure{"no round started: " + to_string(rs.err())};
    }
    auto plan = chunk_plan::make(r->round.model, r->round.chunk_bytes);
    if (!plan)
      throw local_failure{"no chunk plan: " + to_string(plan.err())};
    r->plan.emplace(std::move(*plan));
  }
}

/// Connects, says Hello and waits for a round to start. Throws
/// local_failure iff any of that fails (the attack was not mounted).
in_round join_round(const options& o, verdict& v, const std::string& label,
                    clock_type::time_point deadline) {
  auto r = welcome(o, v, label, deadline);
  await_rounds({&r}, deadline);
  v.note("round " + std::to_string(r.round.round) + " started: model version " +
         std::to_string(r.round.model_version) + ", " +
         std::to_string(r.plan->chunk_count()) + " chunks of " +
         std::to_string(r.round.chunk_bytes) + " bytes, window " +
         std::to_string(r.round.window));
  return r;
}

/// Holds round `r` open, not offering (heartbeats; frames kept for later),
/// until --until-file exists; at once without one. Returns false iff the
/// server closed the connection meanwhile (noted as unexpected). Throws
/// local_failure iff the file does not appear by `deadline`.
bool hold_until_file(const options& o, verdict& v, in_round& r,
                     clock_type::time_point deadline) {
  auto start = clock_type::now();
  for (int slices = 0; slices < 100000 && !o.until_file.empty(); ++slices) {
    if (std::filesystem::exists(o.until_file)) {
      v.note("held round " + std::to_string(r.round.round) + " open for " +
             fmt_s(seconds_since(start)));
      return true;
    }
    if (clock_type::now() >= deadline)
      throw local_failure{"--until-file did not appear in time"};
    if (auto ended = r.s->idle_until(after_s(0.1))) {
      v.expect(false, "the server closed the connection of a client that "
                      "only waited: " +
                          ended->detail);
      return false;
    }
  }
  return true;
}

/// An offer that matches the round's model exactly, as an honest client's
/// (its encoding the one the Welcome's compression config says).
msg::offer honest_offer(const options& o, const in_round& r) {
  const auto& z = r.compression;
  msg::offer x;
  x.encoding = static_cast<uint8_t>(z.up ? z.method : compression_method::none);
  x.round = r.round.round;
  x.client_id = o.client_id;
  x.sample_count = 1;
  x.manifest_digest = digest(r.round.model);
  x.total_bytes = r.plan->total_bytes();
  x.chunk_count = r.plan->chunk_count();
  return x;
}

/// Offers an update; returns the Accept. Throws local_failure iff refused.
msg::accept offer_update(const options& o, verdict& v, in_round& r,
                         clock_type::time_point deadline) {
  auto reply = r.s->ask(msg::encode(honest_offer(o, r)), deadline);
  if (!reply)
    throw local_failure{"the offer got no answer: " + to_string(reply.err())};
  auto a = msg::decode<msg::accept>(*reply);
  if (!a)
    throw local_failure{"the offer was refused: " + to_string(a.err())};
  v.note("offer accepted: stream " + std::to_string(a->stream_id) +
         ", window " + std::to_string(a->window));
  return *a;
}

/// The header of chunk `seq` of stream `stream`, placed as the plan says
/// (so only what the attack changes is wrong).
msg::chunk_header header_of(const in_round& r, uint64_t stream, uint64_t seq) {
  const auto& e = r.plan->extent(seq);
  return {stream, r.round.round, seq, e.tensor_index, e.tensor_offset};
}

/// Chunk `seq` of stream `stream` (header_of), every float32 element
/// `value`, and `poison` at the middle element if given.
msg::frame chunk_of(const in_round& r, uint64_t stream, uint64_t seq,
                    float value, std::optional<float> poison = std::nullopt) {
  const auto& e = r.plan->extent(seq);
  auto h = header_of(r, stream, seq);
  return msg::encode_chunk(h, e.bytes, [&](std::span<std::byte> dst) {
    auto n = dst.size() / sizeof(float);
    for (size_t i = 0; i < n; ++i) {
      float x = poison && i == n / 2 ? *poison : value;
      std::memcpy(dst.data() + i * sizeof x, &x, sizeof x);
    }
  });
}

void require_float32(const in_round& r) {
  for (const auto& t : r.round.model.tensors)
    if (t.type != dtype::float32)
      throw local_failure{"the model is not float32: " + t.name};
}

// -- compressed uploads (docs/protocol.md, "Compression") -------------------------

using payload_bytes = std::vector<std::byte>;

/// Throws local_failure unless the server takes uploads encoded by `m` (as
/// its Welcome says).
void require_upload_encoding(const in_round& r, compression_method m) {
  if (!r.compression.up || r.compression.method != m)
    throw local_failure{std::string{"the server takes uploads as "} +
                        r.compression.upload_encoding() + ", not " +
                        to_string(m)};
}

/// The number of float32 values chunk `seq` holds.
uint64_t values_in(const in_round& r, uint64_t seq) {
  return r.plan->extent(seq).bytes / sizeof(float);
}

/// What an honest client's chunk `seq` carries when its update moves every
/// value by `delta`: the delta, encoded as the Welcome's compression config
/// says. REQUIRES: r.compression.up.
payload_bytes encoded_delta(const in_round& r, uint64_t seq, float delta) {
  std::vector<float> values(values_in(r, seq), delta);
  payload_bytes out(encoded_bound(r.compression, values.size()));
  out.resize(encode(r.compression, values, out));
  return out;
}

/// `n` bytes from byte_source `seed`.
payload_bytes random_bytes(uint64_t seed, uint64_t n) {
  byte_source src{seed};
  payload_bytes out(n);
  for (auto& b : out)
    b = static_cast<std::byte>(src.next());
  return out;
}

void put_f32(payload_bytes& p, size_t at, float x) {
  std::memcpy(p.data() + at, &x, sizeof x);
}

/// Chunk `seq` of stream `stream` (header_of) carrying `payload`, its
/// checksum right: only the payload is what the attack made it.
msg::frame chunk_carrying(const in_round& r, uint64_t stream, uint64_t seq,
                          const payload_bytes& payload) {
  return msg::encode_chunk(header_of(r, stream, seq), payload.size(),
                           [&payload](std::span<std::byte> dst) {
                             std::memcpy(dst.data(), payload.data(),
                                         dst.size());
                           });
}

// -- pre-authentication attacks (or, with --registered, after a Welcome) --------

/// The bytes an attack sends, and the label of its connection.
struct payload {
  std::string label;
  msg::frame bytes;
};

payload craft(const options& o) {
  if (o.attack == "oversized_header") // a header, then a little of the body
    return {"oversized", header_announcing(o.frame_bytes, 1, 64, 0)};
  if (o.attack == "garbage") { // random bytes; flags are not 0
    byte_source src{0x5eed};
    msg::frame f(4096);
    for (auto& b : f)
      b = static_cast<char>(src.next());
    f[4] = static_cast<char>(f[4] | 1);
    return {"garbage", std::move(f)};
  }
  if (o.attack == "garbage_body") { // a valid header, then no Cap'n Proto
    return {"garbage_body", header_announcing(msg::frame_header_bytes + 512, 1,
                                              512, static_cast<char>(0xff))};
  }
  if (o.attack == "zero_request_id") // requests must carry an id
    return {"zero_id", msg::encode(msg::hello{o.client_id, o.token})};
  if (o.attack == "unknown_kind")
    return {"unknown_kind", frame_of_unknown_kind(7)};
  if (o.attack == "evaluation_first") // figures before proving who it is
    return {
        "evaluation_first",
        with_id(msg::encode(msg::evaluation{0, 1000, {{"accuracy", 1.0}}}), 1)};
  if (o.attack == "server_kind") // a frame only the server may send
    return {"server_kind", with_id(msg::encode(msg::accept{1, 4, 0, 0}), 7)};
  if (o.attack == "log_injection") // a forged log line, a terminal escape
    return {"log_injection",
            with_id(msg::encode(msg::hello{
                        "evil\n07:00:00.000 server: registered Client1 from "
                        "10.9.9.9\n\x1b[2J",
                        "t"}),
                    1)};
  if (o.attack == "secagg_keys") {     // a secure aggregation frame in a run
    msg::secagg_keys k{1, {}, {}, 10}; // without secure aggregation
    k.share_key.fill(1);
    k.mask_key.fill(2);
    return {"secagg_keys", with_id(msg::encode(k), 9)};
  }
  if (o.attack == "utf8_id") // not UTF-8: once crashed the report's JSON
    return {"utf8_id", with_id(msg::encode(msg::hello{"Client\xff"
                                                      "1",
                                                      "t"}),
                               1)};
  throw local_failure{"unknown attack " + o.attack};
}

void attack_send_once(const options& o, verdict& v) {
  auto deadline = after_s(o.timeout_s);
  auto p = craft(o);
  std::optional<in_round> r;
  std::unique_ptr<peer_socket> own;
  peer_socket* s = nullptr;
  if (o.registered) {
    r = join_round(o, v, p.label, deadline);
    s = &r->s->socket();
    while (auto f = r->s->take_unasked()) // already seen
      v.note("before the attack: " + describe(*f));
  } else {
    own = open_conn(o, v, p.label);
    s = own.get();
  }
  auto sent = s->send_all(p.bytes.data(), p.bytes.size());
  v.note("sent " + std::to_string(p.bytes.size()) + " bytes" +
         (sent ? "" : " (the server closed the connection before all)"));
  auto e = await_close(*s, std::min(deadline, after_s(5)),
                       o.registered ? o.heartbeat_s : 0);
  expect_refusal(v, e, o.expect, p.label);
}

/// Sends a valid Hello one byte at a time, slower than handshake_timeout_s
/// allows; the server must close the connection at that timeout, before
/// the Hello is complete.
void attack_slow_hello(const options& o, verdict& v) {
  auto s = open_conn(o, v, "slow_hello");
  auto hello = with_id(
      msg::encode(msg::hello{o.client_id.empty() ? "Slowpoke" : o.client_id,
                             std::string(256, 't')}),
      1);
  auto start = clock_type::now();
  auto deadline = after_s(std::min(o.timeout_s, o.handshake_s + 5));
  size_t sent = 0;
  ending e;
  bool ended = false;
  while (!ended && sent < hello.size() && clock_type::now() < deadline) {
    if (!s->send_all(hello.data() + sent, 1))
      break;
    ++sent;
    ended = await_close(*s, std::min(deadline, after_s(o.trickle_ms / 1e3)), e,
                        start);
  }
  if (!ended)
    await_close(*s, deadline, e, start);
  v.note("sent " + std::to_string(sent) + " of the Hello's " +
         std::to_string(hello.size()) + " bytes, one every " +
         std::to_string(o.trickle_ms) + " ms");
  expect_refusal(v, e, o.expect, "slow_hello");
  v.expect(sent < hello.size(), "the whole Hello went through");
  v.expect(e.seconds >= 0.8 * o.handshake_s && e.seconds <= o.handshake_s + 2.5,
           "closed after " + fmt_s(e.seconds) + ", handshake_timeout_s is " +
               fmt_s(o.handshake_s));
}

/// Returns the first flight of a TLS client (its ClientHello), made by
/// OpenSSL over memory buffers. Throws local_failure iff OpenSSL fails.
std::vector<char> tls_client_hello() {
  std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> ctx{
      SSL_CTX_new(TLS_client_method()), SSL_CTX_free};
  std::unique_ptr<SSL, decltype(&SSL_free)> ssl{
      ctx ? SSL_new(ctx.get()) : nullptr, SSL_free};
  if (!ssl)
    throw local_failure{"OpenSSL: no client session"};
  auto* out = BIO_new(BIO_s_mem());
  SSL_set_bio(ssl.get(), BIO_new(BIO_s_mem()), out); // the session owns both
  SSL_set_connect_state(ssl.get());
  SSL_do_handshake(ssl.get()); // wants to read: the ClientHello is out
  char* bytes = nullptr;
  auto n = BIO_get_mem_data(out, &bytes);
  if (n <= 0)
    throw local_failure{"OpenSSL wrote no ClientHello"};
  return {bytes, bytes + n};
}

/// Reads and drops bytes until the server closes the connection or
/// `deadline`. Returns true iff it closed; counts the bytes in `received`.
bool await_raw_close(peer_socket& s, clock_type::time_point deadline,
                     uint64_t& received) {
  std::vector<char> buf(4096);
  for (int reads = 0; reads < 100000; ++reads) {
    pollfd p{s.fd(), POLLIN, 0};
    if (::poll(&p, 1,
               static_cast<int>(ceil_ms(deadline - clock_type::now()))) == 0)
      return false;
    auto got = ::recv(s.fd(), buf.data(), buf.size(), MSG_DONTWAIT);
    if (got == 0 || (got < 0 && errno == ECONNRESET))
      return true;
    if (got > 0)
      received += static_cast<uint64_t>(got);
  }
  return false;
}

/// Sends a real TLS ClientHello one byte every trickle_ms to a TLS server:
/// it must close the connection at handshake_timeout_s, before the
/// handshake is done, and (not yet secure) without a frame.
void attack_slow_tls(const options& o, verdict& v) {
  auto hello = tls_client_hello();
  auto s = open_conn(o, v, "slow_tls");
  auto start = clock_type::now();
  auto deadline = after_s(std::min(o.timeout_s, o.handshake_s + 5));
  size_t sent = 0;
  uint64_t received = 0;
  bool closed = false;
  while (!closed && sent < hello.size() && clock_type::now() < deadline) {
    if (!s->send_all(hello.data() + sent, 1))
      break;
    ++sent;
    closed = await_raw_close(
        *s, std::min(deadline, after_s(o.trickle_ms / 1e3)), received);
  }
  if (!closed)
    closed = await_raw_close(*s, deadline, received);
  auto seconds = seconds_since(start);
  v.note("sent " + std::to_string(sent) + " of the ClientHello's " +
         std::to_string(hello.size()) + " bytes, one every " +
         std::to_string(o.trickle_ms) + " ms; received " +
         std::to_string(received) + " bytes; " +
         (closed ? "closed by the server" : "still open") + " after " +
         fmt_s(seconds));
  v.expect(closed, "the server did not close the connection");
  v.expect(sent < hello.size(), "the whole ClientHello went through");
  v.expect(received == 0, "the server answered a handshake never finished");
  v.expect(seconds >= 0.8 * o.handshake_s && seconds <= o.handshake_s + 2.5,
           "closed after " + fmt_s(seconds) + ", handshake_timeout_s is " +
               fmt_s(o.handshake_s));
}

/// One connection of the idle flood.
struct idle_conn {
  std::unique_ptr<peer_socket> sock;
  std::string label;
  clock_type::time_point opened;
};

/// What the i-th connection sends: nothing, a part of a header, or a
/// header and part of a body (half-open frames).
std::string start_idle(peer_socket& s, uint32_t i) {
  auto hello = with_id(msg::encode(msg::hello{"Idle", "t"}), 1);
  if (i % 3 == 1) {
    s.send_all(hello.data(), 10);
    return "partial_header";
  }
  if (i % 3 == 2) {
    s.send_all(hello.data(), msg::frame_header_bytes + 8);
    return "partial_body";
  }
  return "idle";
}

/// Waits for every connection to end (or `deadline`).
std::vector<ending> await_all_closed(const std::vector<idle_conn>& conns,
                                     clock_type::time_point deadline) {
  std::vector<ending> ends(conns.size());
  std::vector<bool> ended(conns.size(), false);
  for (int polls = 0; polls < 100000 && clock_type::now() < deadline; ++polls) {
    std::vector<pollfd> fds;
    for (size_t i = 0; i < conns.size(); ++i)
      if (!ended[i])
        fds.push_back({conns[i].sock->fd(), POLLIN, 0});
    if (fds.empty())
      break;
    ::poll(fds.data(), fds.size(), 50);
    for (size_t i = 0; i < conns.size(); ++i)
      if (!ended[i])
        ended[i] = take_arrived(*conns[i].sock, ends[i], conns[i].opened);
  }
  for (size_t i = 0; i < conns.size(); ++i)
    if (!ended[i])
      ends[i].seconds = seconds_since(conns[i].opened);
  return ends;
}

/// Opens `held` (max_unauthenticated) connections that never finish a
/// Hello, then `extra` more. Each one past the bound must make the oldest
/// connection not yet welcomed give way: closed at once with
/// too_many_requests. The others must be closed at handshake_timeout_s with
/// a timeout refusal. Prints `ended LABEL ADDRESS CODE` for each.
void attack_idle_flood(const options& o, verdict& v) {
  std::vector<idle_conn> conns;
  for (uint32_t i = 0; i < o.held + o.extra; ++i) {
    if (i == o.held) // let the server count the held ones first
      std::this_thread::sleep_for(milliseconds{300});
    idle_conn c{std::make_unique<peer_socket>(o.port), "", clock_type::now()};
    c.label = i < o.held ? start_idle(*c.sock, i) : "extra";
    v.note("conn " + c.label + " " + c.sock->address());
    conns.push_back(std::move(c));
    std::this_thread::sleep_for(milliseconds{20}); // accepted in this order
  }
  auto ends = await_all_closed(
      conns, after_s(std::min(o.timeout_s, o.handshake_s + 4)));
  size_t evicted = 0;
  for (size_t i = 0; i < conns.size(); ++i) {
    auto label = conns[i].label + " " + conns[i].sock->address();
    auto& e = ends[i];
    auto code = e.refusal ? std::string{to_string(e.refusal->code)} : "none";
    v.note("ended " + label + " " + code);
    bool gave_way = code == "too_many_requests";
    if (gave_way) {
      v.expect(evicted == i, label + " gave way, but an older one did not");
      evicted += 1;
    }
    expect_refusal(v, e, gave_way ? code : o.expect, label);
    auto [lo, hi] = gave_way
                        ? std::pair{0.0, 0.8 * o.handshake_s}
                        : std::pair{0.8 * o.handshake_s, o.handshake_s + 2.5};
    v.expect(e.seconds >= lo && e.seconds <= hi,
             label + " closed after " + fmt_s(e.seconds) +
                 ", handshake_timeout_s is " + fmt_s(o.handshake_s));
  }
  v.note(std::to_string(evicted) + " of " + std::to_string(conns.size()) +
         " gave way (the oldest), the others timed out");
  v.expect(evicted >= o.extra, "fewer gave way than there were extra ones");
}

// -- registered attacks -------------------------------------------------------------

/// Sends 3 x window + 1 valid fetches in one write. The server must answer
/// at most `window` of them, refuse with too_many_requests, and close.
void attack_fetch_flood(const options& o, verdict& v) {
  auto deadline = after_s(o.timeout_s);
  auto r = join_round(o, v, "fetch_flood", deadline);
  auto window = std::max(1u, r.round.window);
  auto n = 3 * window + 1;
  msg::frame burst;
  std::map<uint32_t, uint64_t> asked; // request id -> chunk
  for (uint32_t i = 0; i < n; ++i) {
    auto seq = i % r.plan->chunk_count();
    auto id = r.s->next_id();
    auto f = with_id(
        msg::encode(msg::fetch{r.round.round, r.round.model_version, seq}), id);
    burst.insert(burst.end(), f.begin(), f.end());
    asked[id] = seq;
  }
  r.s->socket().send_all(burst.data(), burst.size());
  v.note("sent " + std::to_string(n) + " fetches in one write of " +
         std::to_string(burst.size()) + " bytes");
  auto e = await_close(r.s->socket(), std::min(deadline, after_s(10)),
                       o.heartbeat_s);
  uint32_t answered = 0;
  for (const auto& f : e.non_errors) {
    auto c = msg::decode_chunk(f, r.plan->chunk_bytes());
    if (!c)
      continue;
    ++answered;
    auto it = asked.find(msg::request_id(f));
    v.expect(it != asked.end() && it->second == c->header.sequence,
             "a chunk that answers no fetch of the burst");
  }
  v.note(std::to_string(answered) + " fetches answered with a valid chunk");
  expect_refusal(v, e, o.expect, "fetch_flood");
  v.expect(answered <= window, std::to_string(answered) +
                                   " fetches answered, window is " +
                                   std::to_string(window));
}

/// Offers an update, then asks for 3 x window + 1 credits of its own
/// stream in one write (frames small enough to arrive in one read, before
/// any is answered). The server must answer at most `window` of them,
/// refuse with too_many_requests, and close.
void attack_credit_flood(const options& o, verdict& v) {
  auto deadline = after_s(o.timeout_s);
  auto r = join_round(o, v, "credit_flood", deadline);
  auto own = offer_update(o, v, r, deadline);
  auto window = std::max(1u, own.window);
  msg::frame burst;
  for (uint32_t i = 0; i < 3 * window + 1; ++i) {
    auto f =
        with_id(msg::encode(msg::credit{own.stream_id, i}), r.s->next_id());
    burst.insert(burst.end(), f.begin(), f.end());
  }
  r.s->socket().send_all(burst.data(), burst.size());
  v.note("sent " + std::to_string(3 * window + 1) + " credits of stream " +
         std::to_string(own.stream_id) + " in one write of " +
         std::to_string(burst.size()) + " bytes");
  auto e = await_close(r.s->socket(), std::min(deadline, after_s(10)),
                       o.heartbeat_s);
  expect_refusal(v, e, o.expect, "credit_flood");
  v.expect(e.non_errors.size() <= window, std::to_string(e.non_errors.size()) +
                                              " credits answered, window is " +
                                              std::to_string(window));
}

/// Checks that a frame for another client's stream was refused with
/// `code`, the connection closed, and nothing of that stream came back.
void judge_hijack(const options& o, verdict& v, const ending& e,
                  const std::string& label) {
  expect_refusal(v, e, o.expect, label);
  for (const auto& f : e.non_errors) {
    auto k = msg::kind_of(f);
    v.expect(!k || (*k != msg::frame_kind::credit &&
                    *k != msg::frame_kind::stream_closed),
             label + ": the server answered for another client's stream: " +
                 describe(f));
  }
}

/// Sends `f` as the next request on `s`, then reads (sending heartbeats)
/// until the server closes the connection, `deadline`, or 5 s.
ending send_then_await_close(const options& o, session& s, msg::frame f,
                             clock_type::time_point deadline) {
  s.socket().send_frame(with_id(std::move(f), s.next_id()));
  return await_close(s.socket(), std::min(deadline, after_s(5)), o.heartbeat_s);
}

/// Says Hello again as the attacker (the server closed its last
/// connection), sends `f`, and judges the answer. Returns false iff the
/// Hello was refused (the attempt was then not made).
bool hijack_again(const options& o, verdict& v, const std::string& label,
                  msg::frame f, clock_type::time_point deadline) {
  session s{o, v, label};
  auto w = s.hello(deadline);
  if (!w) {
    v.note(label + ": Hello again was refused (" + to_string(w.err()) +
           "); not mounted");
    return false;
  }
  judge_hijack(o, v, send_then_await_close(o, s, std::move(f), deadline),
               label);
  return true;
}

/// An accomplice (a second identity) offers an update and holds its stream
/// open. Then the attacker sends the chunk that stream expects next (right
/// round, sequence 0, in the window, on the plan, checksummed: only the
/// sender is wrong), and over new connections the next chunk, the end and a
/// credit of an honest client's stream T (stream ids are small integers in
/// the order of the offers, so T is guessed). In window mode the honest
/// streams are open and waiting: the accomplice never delivers. Each must be
/// refused not_authorized, and nothing of the stream may come back.
void attack_hijack_stream(const options& o, verdict& v) {
  if (o.accomplice_id.empty())
    throw local_failure{"hijack_stream needs --accomplice-id and "
                        "--accomplice-token"};
  auto deadline = after_s(o.timeout_s);
  auto ao = o;
  ao.client_id = o.accomplice_id;
  ao.token = o.accomplice_token;
  auto a = welcome(ao, v, "accomplice", deadline);
  auto r = welcome(o, v, "hijack_chunk", deadline);
  await_rounds({&a, &r}, deadline);
  require_float32(a);
  auto victim = offer_update(ao, v, a, deadline);
  keepalive alive{*a.s};
  if (auto ended = r.s->idle_until(after_s(o.delay_s)))
    throw local_failure{"the connection ended before the attack: " +
                        ended->detail};
  r.s->socket().send_frame(
      with_id(chunk_of(r, victim.stream_id, 0, 1000.0f), r.s->next_id()));
  v.note("sent chunk 0 of the accomplice's stream " +
         std::to_string(victim.stream_id));
  judge_hijack(
      o, v,
      await_close(r.s->socket(), std::min(deadline, after_s(5)), o.heartbeat_s),
      "hijack_chunk");
  r.s.reset(); // closed: each attempt has a connection of its own
  auto honest = o.target_stream.value_or(victim.stream_id == 1 ? 2 : 1);
  auto next = std::min<uint64_t>(victim.window, r.plan->chunk_count() - 1);
  v.note("an honest client's stream, guessed: " + std::to_string(honest));
  if (!hijack_again(o, v, "hijack_honest_chunk",
                    chunk_of(r, honest, next, 1000.0f), deadline))
    return;
  if (!hijack_again(
          o, v, "hijack_end",
          msg::encode(msg::end_of_stream{honest, r.plan->chunk_count()}),
          deadline))
    return;
  hijack_again(o, v, "hijack_credit", msg::encode(msg::credit{honest, 0}),
               deadline);
}

/// Uploads every chunk of stream `stream` as an honest client would (at
/// most `window` unanswered), `make(seq)` making chunk seq, then its end.
/// Stops at the first refusal, and then reads on until the server closes
/// the connection. Notes where the refusal came.
ending upload(const options& o, verdict& v, in_round& r, uint64_t stream,
              uint32_t window, const std::function<msg::frame(uint64_t)>& make,
              clock_type::time_point deadline) {
  ending out;
  auto since = clock_type::now();
  auto count = r.plan->chunk_count();
  uint64_t sent = 0, answered = 0;
  auto refused_or_lost = [&](wire_event& ev, const std::string& at) {
    if (ev.state == wire_state::frame && refusal_of(ev.f)) {
      out.refusal = refusal_of(ev.f);
      out.frames.push_back(describe(ev.f) + ", in answer to " + at);
      await_close(r.s->socket(),
                  std::min(deadline, after_s(close_after_refusal_s)), out,
                  since, o.heartbeat_s);
      return true;
    }
    if (ev.state == wire_state::frame)
      return false;
    out.closed = ev.state == wire_state::closed;
    out.closed_how = ev.state == wire_state::timeout ? "still open" : ev.detail;
    out.seconds = seconds_since(since);
    return true;
  };
  while (answered < count) {
    for (; sent < count && sent - answered < window; ++sent)
      r.s->socket().send_frame(with_id(make(sent), r.s->next_id()));
    auto ev = r.s->next_reply(deadline);
    if (refused_or_lost(ev, "chunk " + std::to_string(answered)))
      return out;
    ++answered; // a credit
  }
  r.s->socket().send_frame(
      with_id(msg::encode(msg::end_of_stream{stream, count}), r.s->next_id()));
  auto ev = r.s->next_reply(deadline);
  if (refused_or_lost(ev, "the end of the stream"))
    return out;
  v.note("the server took the whole update: " + describe(ev.f));
  out.non_errors.push_back(std::move(ev.f));
  await_close(r.s->socket(), std::min(deadline, after_s(5)), out, since,
              o.heartbeat_s);
  return out;
}

/// Joins a round, holds it until --until-file exists (if given), offers,
/// uploads the chunks `make(r, stream)` returns a maker of, and expects the
/// refusal --expect names (the update not taken whole).
template <class Make>
void upload_poisoned(const options& o, verdict& v, const std::string& label,
                     Make&& make) {
  auto deadline = after_s(o.timeout_s);
  auto r = join_round(o, v, label, deadline);
  require_float32(r);
  if (!hold_until_file(o, v, r, deadline))
    return;
  auto own = offer_update(o, v, r, deadline);
  auto chunk = make(r, own.stream_id);
  auto e = upload(o, v, r, own.stream_id, std::max(1u, own.window), chunk,
                  std::min(deadline, after_s(15)));
  for (const auto& f : e.non_errors) {
    auto k = msg::kind_of(f);
    v.expect(!k || *k != msg::frame_kind::stream_closed,
             "the " + label + " was taken whole (stream closed)");
  }
  expect_refusal(v, e, o.expect, label);
}

/// Returns the chunk an upload spoils (finite_chunks, or the last one), and
/// notes what stream `stream` carries: `chunks`, but that one `spoiled`.
uint64_t spoiled_chunk(const options& o, verdict& v, const in_round& r,
                       uint64_t stream, const std::string& chunks,
                       const std::string& spoiled) {
  auto at = std::min<uint64_t>(o.finite_chunks, r.plan->chunk_count() - 1);
  v.note("uploading stream " + std::to_string(stream) + ": " + chunks +
         ", chunk " + std::to_string(at) + " " + spoiled);
  return at;
}

/// Offers an update and uploads it whole as an honest client would:
/// chunks of 1.0 (within the update bound), but for one NaN in chunk
/// finite_chunks, then the end.
/// The whole update must be refused (poisoned_update, at that chunk or at
/// the end) and the connection closed; the driver checks that the global
/// model holds none of it.
void attack_nan_update(const options& o, verdict& v) {
  upload_poisoned(o, v, "nan_update", [&](const in_round& r, uint64_t sid) {
    auto poisoned = spoiled_chunk(o, v, r, sid, "chunks of 1.0", "with a NaN");
    return [&r, sid, poisoned](uint64_t seq) {
      if (seq != poisoned)
        return chunk_of(r, sid, seq, 1.0f);
      return chunk_of(r, sid, seq, 1.0f,
                      std::numeric_limits<float>::quiet_NaN());
    };
  });
}

/// Offers update 11, sends --finite-chunks chunks of 1.0 (each credited),
/// then offers update 22, as a restarted process that trained again would:
/// the new offer must be refused (not_in_round) and the first update
/// rejected. What it folded stays where it went (each chunk passed every
/// check); the driver checks that the honest clients uploaded once.
void attack_update_switch(const options& o, verdict& v) {
  auto deadline = after_s(o.timeout_s);
  auto r = join_round(o, v, "update_switch", deadline);
  require_float32(r);
  auto first = honest_offer(o, r);
  first.update_id = 11;
  auto reply = r.s->ask(msg::encode(first), deadline);
  if (!reply)
    throw local_failure{"the offer got no answer: " + to_string(reply.err())};
  auto a = msg::decode<msg::accept>(*reply);
  if (!a)
    throw local_failure{"the offer was refused: " + to_string(a.err())};
  auto n = std::min<uint64_t>(o.finite_chunks, r.plan->chunk_count() - 1);
  for (uint64_t seq = 0; seq < n; ++seq) {
    auto c = r.s->ask(chunk_of(r, a->stream_id, seq, 1.0f), deadline);
    if (!c || refusal_of(*c)) {
      v.expect(false, "chunk " + std::to_string(seq) + " was not credited");
      return;
    }
  }
  v.note("update 11: " + std::to_string(n) +
         " chunks of 1.0 credited; offering update 22");
  auto second = first;
  second.update_id = 22;
  auto answer = r.s->ask(msg::encode(second), deadline);
  auto refused = answer ? refusal_of(*answer) : std::nullopt;
  v.expect(refused && refused->code == errc::not_in_round,
           "update 22 was not refused as not_in_round");
  if (refused)
    v.note("update 22 refused: " + to_string(*refused));
}

/// Uploads an update of finite values as large as float32 holds (3e38):
/// folded, the round's sum would overflow to infinity and take the
/// published model, then every honest update, with it. It must be refused
/// as poisoned_update.
void attack_huge_update(const options& o, verdict& v) {
  upload_poisoned(o, v, "huge_update", [&](const in_round& r, uint64_t sid) {
    v.note("uploading stream " + std::to_string(sid) +
           ": every value 3e38 (finite)");
    return [&r, sid](uint64_t seq) { return chunk_of(r, sid, seq, 3e38f); };
  });
}

/// Uploads an update of 1e30 everywhere: finite, and within what the
/// round's sum holds (FLT_MAX / (num_clients + 1)), so only the default
/// bound on the update's distance (max_update_ratio x the global model's
/// norm) keeps it out. It must be refused as poisoned_update.
void attack_big_update(const options& o, verdict& v) {
  upload_poisoned(o, v, "big_update", [&](const in_round& r, uint64_t sid) {
    v.note("uploading stream " + std::to_string(sid) +
           ": every value 1e30 (finite, within the sum's bound)");
    return [&r, sid](uint64_t seq) { return chunk_of(r, sid, seq, 1e30f); };
  });
}

/// Uploads to a server that takes uploads compressed by `m` what an honest
/// client would for an update of +1.0 everywhere (encoded_delta), but
/// `spoil(r, seq, payload)` changes the payload of every chunk from
/// finite_chunks on (`spoiled` says how, for the notes); expects the
/// refusal --expect names (upload_poisoned).
template <class Spoil>
void upload_spoiled(const options& o, verdict& v, const std::string& label,
                    compression_method m, const std::string& spoiled,
                    Spoil spoil) {
  upload_poisoned(o, v, label, [&](const in_round& r, uint64_t sid) {
    require_upload_encoding(r, m);
    auto from = spoiled_chunk(o, v, r, sid,
                              std::string{to_string(m)} + " deltas of 1.0",
                              "and on " + spoiled);
    return [&r, sid, from, spoil](uint64_t seq) {
      auto p = encoded_delta(r, seq, 1.0f);
      if (seq >= from)
        spoil(r, seq, p);
      return chunk_carrying(r, sid, seq, p);
    };
  });
}

/// int8 uploads whose first block's scale is NaN: the whole update must be
/// refused (poisoned_update, as for a NaN value), the connection closed.
void attack_int8_nan_scale(const options& o, verdict& v) {
  upload_spoiled(o, v, "int8_nan_scale", compression_method::int8,
                 "with the first block's scale NaN",
                 [](const in_round&, uint64_t, payload_bytes& p) {
                   put_f32(p, 0, std::numeric_limits<float>::quiet_NaN());
                 });
}

/// int8 uploads whose first block's scale is 1e35 (finite; its values
/// decode to up to 1.3e37): the whole update must be refused
/// (poisoned_update, by the update bound), the connection closed.
void attack_int8_huge_scale(const options& o, verdict& v) {
  upload_spoiled(o, v, "int8_huge_scale", compression_method::int8,
                 "with the first block's scale 1e35",
                 [](const in_round&, uint64_t, payload_bytes& p) {
                   put_f32(p, 0, 1e35f);
                 });
}

/// int8 chunks one byte short (a fixed-size encoding of the wrong size):
/// refused (out_of_range), the connection closed.
void attack_short_chunk(const options& o, verdict& v) {
  upload_spoiled(
      o, v, "short_chunk", compression_method::int8, "one byte short",
      [](const in_round&, uint64_t, payload_bytes& p) { p.pop_back(); });
}

/// zfp chunks of random bytes, from half of zfp's bound for the chunk's
/// values to all of it: they may decode to garbage, huge or not finite, or
/// not at all. The server must refuse the update at some chunk with a
/// typed refusal (--expect: out_of_range|poisoned_update) and close the
/// connection, not crash.
void attack_zfp_garbage(const options& o, verdict& v) {
  upload_spoiled(o, v, "zfp_garbage", compression_method::zfp,
                 "random bytes within zfp's bound",
                 [](const in_round& r, uint64_t seq, payload_bytes& p) {
                   auto bound = encoded_bound(r.compression, values_in(r, seq));
                   auto size =
                       bound - byte_source{seq}.next() * (bound / 2) / 256;
                   p = random_bytes(0x9a7ba9e + seq, size);
                 });
}

/// zfp chunks of random bytes, one more than zfp's bound for the chunk's
/// values: refused (out_of_range), the connection closed.
void attack_zfp_over_bound(const options& o, verdict& v) {
  upload_spoiled(o, v, "zfp_over_bound", compression_method::zfp,
                 "random bytes, one more than zfp's bound",
                 [](const in_round& r, uint64_t seq, payload_bytes& p) {
                   p = random_bytes(
                       0x0b0 + seq,
                       encoded_bound(r.compression, values_in(r, seq)) + 1);
                 });
}

/// Offers an update as an honest client would, but naming --encoding, not
/// the encoding the server takes (client_configs.comm_configs.compression).
/// It must be refused (manifest_mismatch) and the connection closed.
void attack_wrong_encoding(const options& o, verdict& v) {
  auto deadline = after_s(o.timeout_s);
  auto r = join_round(o, v, "wrong_encoding", deadline);
  auto x = honest_offer(o, r);
  if (x.encoding == o.encoding)
    throw local_failure{"the server takes encoding " +
                        std::to_string(o.encoding) + " (--encoding)"};
  v.note("offering an update encoded as " + std::to_string(o.encoding) +
         "; the server takes " + std::to_string(x.encoding) + " (" +
         r.compression.upload_encoding() + ")");
  x.encoding = o.encoding;
  expect_refusal(v, send_then_await_close(o, *r.s, msg::encode(x), deadline),
                 o.expect, "wrong_encoding");
}

/// Offers an update, then offers it again every 300 ms without sending a
/// chunk: a repeated offer is not progress, so the server must reject the
/// upload for its silence (the refusal --expect names) after
/// idle_timeout_s + reconnect_grace_s, not keep the round open.
void attack_reoffer_keepalive(const options& o, verdict& v) {
  auto deadline = after_s(o.timeout_s);
  auto r = join_round(o, v, "reoffer_keepalive", deadline);
  auto start = clock_type::now();
  for (int offers = 0; offers < 1000 && clock_type::now() < deadline;
       ++offers) {
    auto reply = r.s->ask(msg::encode(honest_offer(o, r)), deadline);
    if (!reply) {
      v.note("after " + std::to_string(offers) +
             " offers: " + to_string(reply.err()));
      v.expect(false, "the connection ended with no refusal of the upload");
      return;
    }
    // The rejection comes unasked; if it came before this reply (the round
    // finalizing as the offer went out), it is the answer, not the reply.
    std::optional<error> first;
    while (auto f = r.s->take_unasked())
      if (auto e = refusal_of(*f); e && !first)
        first = *e;
    if (!first)
      first = refusal_of(*reply);
    if (auto e = first) {
      v.note("after " + std::to_string(offers) + " offers and " +
             fmt_s(std::chrono::duration<double>(clock_type::now() - start)
                       .count()) +
             ": " + to_string(*e));
      std::string code = to_string(e->code);
      v.expect(code == o.expect, "refused with " + code + ", not " + o.expect);
      return;
    }
    auto ended = r.s->idle_until(after_s(0.3));
    while (auto f = r.s->take_unasked()) // the rejection comes unasked
      if (auto e = refusal_of(*f)) {
        std::string code = to_string(e->code);
        v.note("after " + std::to_string(offers + 1) +
               " offers: " + to_string(*e));
        v.expect(code == o.expect,
                 "refused with " + code + ", not " + o.expect);
        return;
      }
    if (ended) {
      v.note("the connection ended: " + ended->detail);
      v.expect(false, "the connection ended with no refusal of the upload");
      return;
    }
  }
  v.expect(false, "the upload was still open after " + fmt_s(o.timeout_s) +
                      " of offers without chunks");
}

/// Says Hello as its own (registered) id over new connections, one after
/// another, each taking the session over from the one before (as a client
/// back from a lost connection may). The server must close every
/// connection taken over, with not_authorized, and refuse the Hello past
/// 8 takeovers in 10 s with the refusal --expect names: one session per
/// client, and no connection churn without bound.
void attack_takeover_flood(const options& o, verdict& v) {
  auto deadline = after_s(o.timeout_s);
  std::vector<std::unique_ptr<session>> sessions;
  std::optional<error> refused;
  for (int i = 0; i < 20 && !refused; ++i) {
    auto s = std::make_unique<session>(o, v, "taken_" + std::to_string(i));
    auto w = s->hello(std::min(deadline, after_s(5)));
    if (w)
      sessions.push_back(std::move(s));
    else
      refused = w.err();
  }
  v.note(std::to_string(sessions.size()) + " Hellos welcomed; then " +
         (refused ? to_string(*refused) : std::string{"no refusal"}));
  v.expect(refused && to_string(refused->code) == o.expect,
           "20 Hellos in a row were welcomed, or refused with another code");
  auto wait_until = std::min(deadline, after_s(close_after_refusal_s + 3));
  size_t closed = 0;
  for (size_t i = 0; i + 1 < sessions.size(); ++i) {
    ending e;
    await_close(sessions[i]->socket(), wait_until, e, clock_type::now(),
                o.heartbeat_s);
    if (e.closed && e.refusal && e.refusal->code == errc::not_authorized)
      ++closed;
    else
      v.note("taken_" + std::to_string(i) + ": " +
             (e.closed ? "closed, " : "still open, ") +
             (e.refusal ? to_string(*e.refusal) : std::string{"no refusal"}));
  }
  v.note(std::to_string(closed) + " of " + std::to_string(sessions.size() - 1) +
         " connections taken over were closed with not_authorized");
  v.expect(sessions.size() > 1 && closed + 1 == sessions.size(),
           "connections taken over were left open");
}

/// Asks, one request at a time, for what a welcomed client cannot have
/// (an offer for round 77: wrong_round, which leaves the connection open)
/// 200 times. Past max_refusals the server must close the connection with
/// too_many_requests (the refusal --expect names).
void attack_refusal_flood(const options& o, verdict& v) {
  auto deadline = after_s(o.timeout_s);
  auto r = welcome(o, v, "refusal_flood", deadline);
  msg::offer x;
  x.round = 77;
  x.client_id = o.client_id;
  for (int i = 0; i < 200; ++i) {
    auto reply = r.s->ask(msg::encode(x), deadline);
    if (!reply) {
      v.note("after " + std::to_string(i) +
             " requests: " + to_string(reply.err()));
      v.expect(false, "the connection ended without a refusal");
      return;
    }
    auto e = refusal_of(*reply);
    if (e && e->code != errc::wrong_round) {
      std::string code = to_string(e->code);
      v.note("request " + std::to_string(i + 1) + ": " + to_string(*e));
      v.expect(code == o.expect, "refused with " + code + ", not " + o.expect);
      auto end = await_close(r.s->socket(), std::min(deadline, after_s(5)));
      v.expect(end.closed, "refused, but the connection stayed open");
      return;
    }
  }
  v.expect(false, "200 refused requests and the connection is still open");
}

/// A registered client's evaluations, each one request: of a model the
/// server does not serve (wrong_round, the connection stays open), of the
/// initial model (accepted, once), the same again (bad_sequence, stays
/// open), then wrong rounds until the refusal limit closes the connection
/// (the refusal --expect names).
void attack_evaluation_abuse(const options& o, verdict& v) {
  auto deadline = after_s(o.timeout_s);
  auto r = welcome(o, v, "evaluation_abuse", deadline);
  auto ask = [&](uint32_t round) {
    return r.s->ask(
        msg::encode(msg::evaluation{round, 1 << 20, {{"accuracy", 0.01}}}),
        deadline);
  };
  auto code_of = [](const result<msg::frame>& reply) -> std::string {
    if (!reply)
      return "closed (" + to_string(reply.err()) + ")";
    auto e = refusal_of(*reply);
    return e ? to_string(e->code) : "accepted";
  };
  auto first = code_of(ask(77));
  auto accepted = code_of(ask(0));
  auto again = code_of(ask(0));
  v.note("evaluations: round 77 " + first + ", round 0 " + accepted +
         ", round 0 again " + again);
  v.expect(first == "wrong_round", "round 77 was " + first);
  v.expect(accepted == "accepted",
           "the initial model's evaluation was " + accepted);
  v.expect(again == "bad_sequence", "a second one was " + again);
  for (int i = 0; i < 200; ++i) {
    auto reply = ask(77);
    auto code = code_of(reply);
    if (code == "wrong_round")
      continue;
    v.note("evaluation " + std::to_string(i + 4) + ": " + code);
    v.expect(code == o.expect, "refused with " + code + ", not " + o.expect);
    auto end = await_close(r.s->socket(), std::min(deadline, after_s(5)));
    v.expect(end.closed, "refused, but the connection stayed open");
    return;
  }
  v.expect(false, "200 refused evaluations and the connection is still open");
}

/// In every round it is asked to: offers an update, then sends nothing but
/// heartbeats. Ends at Done or when the server closes the connection; the
/// driver checks that the server abandoned the upload and the run went on.
void attack_offer_silent(const options& o, verdict& v) {
  auto deadline = after_s(o.timeout_s);
  auto r = join_round(o, v, "offer_silent", deadline);
  uint32_t offers = 0;
  for (int rounds = 0; rounds < 1000; ++rounds) {
    auto reply = r.s->ask(msg::encode(honest_offer(o, r)), deadline);
    if (reply) {
      auto a = msg::decode<msg::accept>(*reply);
      v.note("round " + std::to_string(r.round.round) + ": offer " +
             (a ? "accepted: stream " + std::to_string(a->stream_id)
                : "refused: " + to_string(a.err())) +
             "; silent from now on");
      offers += a ? 1 : 0;
    }
    auto next = r.s->await_round(deadline);
    if (!next) {
      v.note("the session ended: " + to_string(next.err()) + " after " +
             std::to_string(offers) + " accepted offers");
      v.expect(next.err().code != errc::timeout,
               "still waiting after " + fmt_s(o.timeout_s) +
                   ": no round started and the connection was not closed "
                   "(the silent upload was not abandoned)");
      break;
    }
    r.round = *next;
    r.plan.emplace(*chunk_plan::make(next->model, next->chunk_bytes));
  }
  v.expect(offers > 0, "no offer was accepted: the attack was not mounted");
}

/// Not an attack but a test device: joins a round, never offers (so the
/// round stays open while other attacks run), sends heartbeats, and leaves
/// once --until-file exists. The server then drops it after
/// reconnect_grace_s and the round goes on with min_clients.
void attack_hold_round(const options& o, verdict& v) {
  if (o.until_file.empty())
    throw local_failure{"hold_round needs --until-file"};
  auto deadline = after_s(o.timeout_s);
  auto r = join_round(o, v, "hold_round", deadline);
  if (hold_until_file(o, v, r, deadline))
    v.note("leaving");
}

/// Not an attack but a test device: says Hello `count` times, each on a new
/// connection, one after another, and expects every one answered (a
/// Welcome or a refusal) within handshake_s + 2 s: the fedcaf port serves
/// while something else (the live view) is under attack.
void attack_hellos(const options& o, verdict& v) {
  auto deadline = after_s(o.timeout_s);
  uint32_t answered = 0;
  for (uint32_t i = 0; i < o.count && clock_type::now() < deadline; ++i) {
    session s{o, v, "hello" + std::to_string(i)};
    auto w = s.hello(std::min(deadline, after_s(o.handshake_s + 2)));
    bool ok = w || (w.err().code != errc::timeout &&
                    w.err().code != errc::disconnected);
    v.expect(ok, "Hello " + std::to_string(i) + " unanswered: " +
                     (w ? std::string{"welcome"} : to_string(w.err())));
    answered += ok ? 1 : 0;
  }
  v.note("answered " + std::to_string(answered) + " of " +
         std::to_string(o.count) + " Hellos");
  v.expect(answered == o.count, "not every Hello was answered");
}

/// Joins every round it is asked to and never offers, sending heartbeats,
/// until the run ends (Done or the connection closed). The driver checks
/// that each round ended by its deadline without it.
void attack_never_offer(const options& o, verdict& v) {
  auto deadline = after_s(o.timeout_s);
  auto r = join_round(o, v, "never_offer", deadline);
  uint32_t rounds = 1;
  for (int i = 0; i < 1000; ++i) {
    auto next = r.s->await_round(deadline);
    if (!next) {
      v.note("the session ended: " + to_string(next.err()) + " after " +
             std::to_string(rounds) + " rounds joined, none offered");
      v.expect(next.err().code != errc::timeout, "still waiting after " +
                                                     fmt_s(o.timeout_s) +
                                                     ": the run did not end");
      return;
    }
    ++rounds;
    v.note("round " + std::to_string(next->round) + " started; not offering");
  }
}

/// Joins a round and fetches its chunk 0 again and again, one every
/// --drip-s seconds, never any other: a window-mode relay's download, which
/// waits for its slowest child still fetching, must not wait for it past
/// the idle timeout (fetch_pacing: only progress counts). The driver
/// checks that the relay's honest children finished the round.
void attack_pace_stall(const options& o, verdict& v) {
  auto deadline = after_s(o.timeout_s);
  auto r = join_round(o, v, "pace_stall", deadline);
  uint32_t answered = 0;
  while (clock_type::now() < deadline) {
    auto reply = r.s->ask(
        msg::encode(msg::fetch{r.round.round, r.round.model_version, 0}),
        deadline);
    if (!reply) {
      v.note("the session ended: " + to_string(reply.err()));
      break;
    }
    if (refusal_of(*reply))
      break; // the round is over for it
    ++answered;
    if (auto ended = r.s->idle_until(after_s(o.drip_s))) {
      v.note("ended: " + ended->detail);
      break;
    }
  }
  v.note(std::to_string(answered) + " fetches of chunk 0 answered");
}

/// Fetches the model's chunks in order, one every --drip-s seconds, then
/// all of them again and again (`loop`, as fast as answered) or only new
/// ones (`!loop`, a drip that keeps "making progress" under the idle
/// timeout). Against a window-mode relay: the loop fetches chunks gone
/// from its cache, which the relay would fetch again from its parent
/// without end; the drip holds its siblings back. Stops at the first
/// refusal (too_many_requests past the relay's refetch budget, or the
/// round over) or the end of the model (a drip).
void fetch_chunks(const options& o, verdict& v, bool loop) {
  auto deadline = after_s(o.timeout_s);
  auto r = join_round(o, v, loop ? "refetch_loop" : "drip_new", deadline);
  auto count = r.plan->chunk_count();
  uint64_t answered = 0;
  for (uint64_t i = 0; clock_type::now() < deadline && i < 100 * count; ++i) {
    if (!loop && i >= count)
      break;
    auto reply = r.s->ask(msg::encode(msg::fetch{
                              r.round.round, r.round.model_version, i % count}),
                          deadline);
    if (!reply) {
      v.note("the session ended: " + to_string(reply.err()));
      break;
    }
    if (auto e = refusal_of(*reply)) {
      v.note("refused after " + std::to_string(answered) +
             " fetches: " + to_string(*e));
      break;
    }
    ++answered;
    double pause = loop && i >= count ? 0 : o.drip_s;
    if (pause > 0)
      if (auto ended = r.s->idle_until(after_s(pause))) {
        v.note("ended: " + ended->detail);
        break;
      }
  }
  v.note(std::to_string(answered) + " fetches answered (" +
         std::to_string(count) + " chunks in the model)");
}

void attack_refetch_loop(const options& o, verdict& v) {
  fetch_chunks(o, v, true);
}

void attack_drip_new(const options& o, verdict& v) {
  fetch_chunks(o, v, false);
}

/// Offers an update, then sends one chunk every --drip-s seconds (just
/// under the server's idle timeout), each after the last one's credit, as
/// an honest but slow client would. The server must cut it off (--expect:
/// timeout, for the round deadline or the minimum rate) and close the
/// connection; the driver checks that the round ended by its deadline and
/// the model holds none of it.
void attack_slow_drip(const options& o, verdict& v) {
  auto deadline = after_s(o.timeout_s);
  auto r = join_round(o, v, "slow_drip", deadline);
  require_float32(r);
  auto own = offer_update(o, v, r, deadline);
  auto started = clock_type::now();
  v.note("dripping stream " + std::to_string(own.stream_id) +
         ": one chunk every " + fmt_s(o.drip_s));
  ending out;
  auto lost = [&out](const wire_event& ev) {
    out.closed = ev.state == wire_state::closed;
    out.closed_how = ev.detail;
  };
  for (uint64_t seq = 0; seq < r.plan->chunk_count(); ++seq) {
    if (auto ended = r.s->idle_until(after_s(o.drip_s))) {
      lost(*ended);
      break;
    }
    r.s->socket().send_frame(
        with_id(chunk_of(r, own.stream_id, seq, 1.0f), r.s->next_id()));
    auto ev = r.s->next_reply(deadline);
    if (ev.state != wire_state::frame) {
      lost(ev);
      break;
    }
    if (auto e = refusal_of(ev.f)) {
      out.refusal = e;
      out.frames.push_back(describe(ev.f));
      await_close(r.s->socket(), after_s(close_after_refusal_s), out, started,
                  o.heartbeat_s);
      break;
    }
    v.note("chunk " + std::to_string(seq) + " credited after " +
           fmt_s(seconds_since(started)));
  }
  out.seconds = seconds_since(started);
  while (auto f = r.s->take_unasked())
    if (auto e = refusal_of(*f); e && !out.refusal) {
      out.refusal = e;
      out.frames.push_back(describe(*f));
    }
  expect_refusal(v, out, o.expect, "slow_drip");
}

// -- online token guessing -----------------------------------------------------

/// Says Hello as `id` with `token` on a new connection from o.source;
/// returns the server's refusal, or nullopt iff it gave none.
std::optional<error> hello_answer(const options& o, const std::string& id,
                                  const std::string& token,
                                  clock_type::time_point deadline) {
  peer_socket s{o.port, o.source};
  s.send_frame(with_id(msg::encode(msg::hello{id, token}), 1));
  return await_close(s, std::min(deadline, after_s(5))).refusal;
}

/// The reason of a Hello's refusal "<id> from <address>: <reason>".
std::string reason_of(const error& e) {
  auto from = e.message.find(" from ");
  auto colon = e.message.find(": ", from == std::string::npos ? 0 : from);
  return colon == std::string::npos ? e.message : e.message.substr(colon + 2);
}

/// Online token guessing from --source: first a Hello for an id that does
/// not exist and one with a wrong token for --id, whose answers must be
/// the same (code and reason); then --attempts more wrong tokens for --id,
/// each on a new connection, as fast as the server answers. Only the first
/// few may be heard (not_authorized); the rest must be refused unheard
/// (too_many_requests) during the back-off. Prints the counts and rate.
void attack_token_guess(const options& o, verdict& v) {
  auto deadline = after_s(o.timeout_s);
  auto unknown = hello_answer(o, "Nobody", "guess-a", deadline);
  auto wrong = hello_answer(o, o.client_id, "guess-b", deadline);
  if (!unknown || !wrong)
    return v.expect(false, "a failed Hello got no error frame");
  v.note(std::string{"unknown id: "} + to_string(unknown->code) + ": " +
         reason_of(*unknown) + "; wrong token: " + to_string(wrong->code) +
         ": " + reason_of(*wrong));
  v.expect(unknown->code == errc::not_authorized &&
               wrong->code == errc::not_authorized &&
               reason_of(*unknown) == reason_of(*wrong),
           "an unknown id and a wrong token got different answers");
  std::map<std::string, uint32_t> answers;
  auto started = clock_type::now();
  uint32_t sent = 0;
  for (; sent < o.attempts && clock_type::now() < deadline; ++sent) {
    auto e =
        hello_answer(o, o.client_id, "guess-" + std::to_string(sent), deadline);
    ++answers[e ? to_string(e->code) : std::string{"none"}];
  }
  auto seconds = seconds_since(started);
  std::string counts;
  for (const auto& [code, n] : answers)
    counts += " " + code + " " + std::to_string(n);
  v.note(std::to_string(sent) + " guesses in " + fmt_s(seconds) + " (" +
         std::to_string(static_cast<int>(sent / std::max(seconds, 1e-3))) +
         " a second):" + counts);
  // 5 failures a burst (the two above among the first), then back-offs of
  // 1, 2, 4 ... s: the bursts that can have begun within `seconds`.
  uint32_t bursts = 1;
  for (double end = 1; end <= seconds; end = 2 * end + 1)
    ++bursts;
  auto heard = answers["not_authorized"];
  v.note(std::to_string(heard) + " heard, at most " +
         std::to_string(5 * bursts - 2) + " allowed in " + fmt_s(seconds));
  v.expect(heard <= 5 * bursts - 2,
           std::to_string(heard) + " guesses were heard");
  v.expect(answers["too_many_requests"] + heard == sent,
           "some guesses got neither not_authorized nor too_many_requests");
}

/// The state of the server's end of connection `s` (its socket in
/// /proc/net/tcp: local port `server_port`, remote `s`'s port): "01"
/// ESTABLISHED (the server never closed it), "04" FIN_WAIT1 or later (it
/// did), "" not found (gone).
std::string server_side_state(uint16_t server_port, const peer_socket& s) {
  std::ifstream in{"/proc/net/tcp"};
  std::string line;
  char local[64], remote[64], state[8];
  while (std::getline(in, line)) {
    unsigned slot = 0;
    if (std::sscanf(line.c_str(), " %u: %63s %63s %7s", &slot, local, remote,
                    state) != 4)
      continue;
    auto port_of = [](const char* a) {
      auto colon = std::strchr(a, ':');
      return colon ? static_cast<uint16_t>(std::strtoul(colon + 1, nullptr, 16))
                   : uint16_t{0};
    };
    if (port_of(local) == server_port && port_of(remote) == s.local_port())
      return state;
  }
  return "";
}

/// Registered: fetches `window` chunks in one write after shrinking its
/// receive buffer, then never reads (heartbeats only, so that the stall,
/// not silence, is what the server sees). The server must refuse it for
/// not reading (the peer read nothing) after connection_timeout_s and
/// close the connection within close_grace (2 s) of that: its socket must
/// leave ESTABLISHED within --hold-s seconds. With --count N, N
/// connections one after another (each Hello takes the session over from
/// the last, which is held open, unread), each watched for --hold-s.
void attack_stall_read(const options& o, verdict& v) {
  auto deadline = after_s(o.timeout_s);
  std::vector<in_round> held;
  auto count = std::max(1u, std::min(o.count, 64u));
  for (uint32_t c = 0; c < count; ++c) {
    auto label = "stall_read#" + std::to_string(c + 1);
    held.push_back(join_round(o, v, label, deadline));
    auto& r = held.back();
    int small = 4096;
    ::setsockopt(r.s->socket().fd(), SOL_SOCKET, SO_RCVBUF, &small,
                 sizeof small);
    auto window = std::max(1u, r.round.window);
    msg::frame burst;
    auto fetch = [&r](uint32_t i) {
      return with_id(
          msg::encode(msg::fetch{r.round.round, r.round.model_version,
                                 i % r.plan->chunk_count()}),
          r.s->next_id());
    };
    for (uint32_t i = 0; i < window; ++i) {
      auto f = fetch(i);
      burst.insert(burst.end(), f.begin(), f.end());
    }
    r.s->socket().send_all(burst.data(), burst.size());
    v.note(label + ": sent " + std::to_string(window) + " fetches of " +
           std::to_string(r.round.chunk_bytes) + "-byte chunks; reading none");
    if (o.overflow > 0) { // once the first chunks wait unread: refused now
      std::this_thread::sleep_for(std::chrono::seconds{1});
      for (uint32_t i = 0; i < std::min(o.overflow, 64u); ++i)
        r.s->socket().send_frame(fetch(window + i));
      v.note(label + ": then " + std::to_string(o.overflow) +
             " fetches past the window");
    }
    auto started = clock_type::now();
    std::string state = "01";
    double closed_after = -1;
    for (int slice = 0; slice < 100000 && seconds_since(started) < o.hold_s &&
                        closed_after < 0;
         ++slice) {
      r.s->socket().send_frame(msg::encode_heartbeat());
      std::this_thread::sleep_for(std::chrono::milliseconds{
          static_cast<int64_t>(o.heartbeat_s * 1000)});
      state = server_side_state(o.port, r.s->socket());
      if (state != "01")
        closed_after = seconds_since(started);
    }
    v.note(label + (closed_after < 0
                        ? ": the server's socket is still ESTABLISHED after " +
                              fmt_s(seconds_since(started))
                        : ": the server closed its socket after " +
                              fmt_s(closed_after)));
    v.expect(closed_after >= 0,
             label +
                 ": the server never closed the connection of a peer "
                 "that stopped reading (held " +
                 fmt_s(o.hold_s) + ")");
  }
  uint32_t open = 0;
  for (const auto& r : held)
    open += server_side_state(o.port, r.s->socket()) == "01" ? 1 : 0;
  v.note(std::to_string(open) + " of " + std::to_string(held.size()) +
         " connections still ESTABLISHED on the server's side");
  if (!o.until_file.empty()) { // the driver measures the server meanwhile
    std::ofstream{o.until_file + ".ready"} << open << "\n";
    for (int i = 0; i < 600 && !std::filesystem::exists(o.until_file); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds{100});
  }
}

int run(const options& o) {
  verdict v{o.attack + (o.registered ? "(registered)" : "")};
  using attack_fn = void (*)(const options&, verdict&);
  const std::map<std::string, attack_fn> attacks{
      {"oversized_header", attack_send_once},
      {"garbage", attack_send_once},
      {"garbage_body", attack_send_once},
      {"zero_request_id", attack_send_once},
      {"unknown_kind", attack_send_once},
      {"server_kind", attack_send_once},
      {"evaluation_first", attack_send_once},
      {"evaluation_abuse", attack_evaluation_abuse},
      {"log_injection", attack_send_once},
      {"utf8_id", attack_send_once},
      {"secagg_keys", attack_send_once},
      {"slow_hello", attack_slow_hello},
      {"slow_tls", attack_slow_tls},
      {"idle_flood", attack_idle_flood},
      {"fetch_flood", attack_fetch_flood},
      {"credit_flood", attack_credit_flood},
      {"hijack_stream", attack_hijack_stream},
      {"nan_update", attack_nan_update},
      {"update_switch", attack_update_switch},
      {"huge_update", attack_huge_update},
      {"big_update", attack_big_update},
      {"int8_nan_scale", attack_int8_nan_scale},
      {"int8_huge_scale", attack_int8_huge_scale},
      {"short_chunk", attack_short_chunk},
      {"zfp_garbage", attack_zfp_garbage},
      {"zfp_over_bound", attack_zfp_over_bound},
      {"wrong_encoding", attack_wrong_encoding},
      {"reoffer_keepalive", attack_reoffer_keepalive},
      {"takeover_flood", attack_takeover_flood},
      {"refusal_flood", attack_refusal_flood},
      {"offer_silent", attack_offer_silent},
      {"hold_round", attack_hold_round},
      {"hellos", attack_hellos},
      {"never_offer", attack_never_offer},
      {"pace_stall", attack_pace_stall},
      {"refetch_loop", attack_refetch_loop},
      {"drip_new", attack_drip_new},
      {"slow_drip", attack_slow_drip},
      {"token_guess", attack_token_guess},
      {"stall_read", attack_stall_read},
  };
  auto it = attacks.find(o.attack);
  if (it == attacks.end()) {
    usage();
    return 2;
  }
  try {
    it->second(o, v);
  } catch (const local_failure& f) {
    v.note("verdict: not mounted: " + f.what);
    return 2;
  }
  return v.finish();
}

} // namespace

int main(int argc, char** argv) {
  auto o = parse_options(argc, argv);
  if (!o) {
    usage();
    return 2;
  }
  return run(*o);
}
