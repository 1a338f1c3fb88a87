// A server gateway's admission driven by hand, frames built with the
// codec and the time passed in: what passes before the welcome, the
// in-flight limits per kind, the fetches passed on two at a time until
// written, repeated Hellos and refusals counted, the deadlines and the
// texts of the refusals.

#include <doctest/doctest.h>

#include "protocol/connection_admission.hpp"

using namespace fedcaf;
using std::chrono::milliseconds;
using kind = msg::frame_kind;
using action = connection_admission::verdict::action;
using tick_action = connection_admission::tick_verdict::action;

namespace {

const connection_admission::time_point t0 =
    connection_admission::time_point{} + std::chrono::hours{1};

const char* const peer = "10.0.0.7:40000";

/// `f` with request id `id`.
msg::frame with_id(msg::frame f, uint32_t id = 1) {
  msg::set_request_id(f, id);
  return f;
}

msg::frame hello(const std::string& id = "alice") {
  return with_id(msg::encode(msg::hello{id, ""}));
}

msg::frame fetch() {
  return with_id(msg::encode(msg::fetch{1, 1, 0}));
}
msg::frame offer() {
  return with_id(msg::encode(msg::offer{}));
}
msg::frame credit() {
  return with_id(msg::encode(msg::credit{1, 0}));
}

/// Admits `f` at `now` (default t0).
connection_admission::verdict admit(connection_admission& a, msg::frame f,
                                    connection_admission::time_point now = t0) {
  return a.admit(f, now);
}

/// The refusal's message, or "" iff `v` is none.
std::string refusal(const connection_admission::verdict& v) {
  return v.what == action::refuse ? v.refusal.message : std::string{};
}

/// A connection whose peer "alice" is welcomed at t0.
connection_admission welcomed(gateway_limits limits = {}) {
  connection_admission a{limits, peer, t0};
  REQUIRE(admit(a, hello()).what == action::ask);
  a.answered(kind::hello);
  REQUIRE(a.welcome(t0));
  return a;
}

/// The link of a connection on which everything moved at `t`.
link_activity active_at(connection_admission::time_point t) {
  return {t, t, false, true};
}

} // namespace

TEST_CASE("connection admission: before the welcome only heartbeats and one "
          "Hello pass") {
  connection_admission a{{}, peer, t0};
  CHECK(a.current() == connection_admission::stage::awaiting_hello);
  CHECK(admit(a, msg::encode_heartbeat()).what == action::ignore);
  auto v = admit(a, fetch());
  CHECK(v.refusal.code == errc::not_authenticated);
  CHECK(refusal(v) == "a fetch frame before the peer was welcomed");
  v = admit(a, hello());
  CHECK(v.what == action::ask);
  CHECK(v.kind == kind::hello);
  CHECK(a.current() == connection_admission::stage::hello_pending);
  CHECK(a.client_id() == "alice");
  v = admit(a, hello());
  CHECK(v.refusal.code == errc::not_authenticated);
  CHECK(refusal(v) == "a hello frame before the peer was welcomed");
  CHECK(admit(a, with_id(msg::encode(msg::end_of_stream{}))).refusal.message ==
        "a end of stream frame before the peer was welcomed");
}

TEST_CASE("connection admission: a frame without a request id, an "
          "undecodable one or a malformed Hello is refused") {
  connection_admission a{{}, peer, t0};
  auto v = admit(a, msg::encode(msg::hello{"alice", ""}));
  CHECK(v.refusal.code == errc::malformed_frame);
  CHECK(refusal(v) == "a hello frame without a request id");
  CHECK(admit(a, msg::frame(24, '\1')).what == action::refuse);
  v = admit(a, hello("")); // client ids are 1 to 128 printable bytes
  CHECK(v.refusal.code == errc::malformed_frame);
  CHECK(a.current() == connection_admission::stage::awaiting_hello);
}

TEST_CASE("connection admission: the first welcome counts, a repeated one "
          "does not") {
  connection_admission a{{}, peer, t0};
  REQUIRE(admit(a, hello()).what == action::ask);
  a.answered(kind::hello);
  CHECK(a.welcome(t0));
  CHECK(a.welcomed());
  REQUIRE(admit(a, hello()).what == action::ask);
  a.answered(kind::hello);
  CHECK_FALSE(a.welcome(t0));
  CHECK(a.welcomed());
}

TEST_CASE("connection admission: fetches pass two at a time, each counted "
          "until written, within the window") {
  auto a = welcomed();
  for (int i = 0; i < 4; ++i)
    CHECK(admit(a, fetch()).kind == kind::fetch);
  auto v = admit(a, fetch());
  CHECK(v.refusal.code == errc::too_many_requests);
  CHECK(refusal(v) == "more than window (4) fetches in flight");
  CHECK(a.next_fetch());
  CHECK(a.next_fetch());
  CHECK_FALSE(a.next_fetch()); // two chunks made ahead at most
  a.answered(kind::fetch);
  a.reply_queued(kind::fetch, 1);
  CHECK_FALSE(a.next_fetch()); // its reply is not written yet
  a.written(1);
  CHECK(a.next_fetch());                        // the third
  CHECK(admit(a, fetch()).what == action::ask); // 2 queued, 2 made
  CHECK(refusal(admit(a, fetch())) == "more than window (4) fetches in flight");
  a.answered(kind::fetch);
  a.reply_queued(kind::fetch, 2);
  a.written(2);
  CHECK(a.next_fetch()); // the fourth
  CHECK_FALSE(a.next_fetch());
}

TEST_CASE("connection admission: a fetch's reply is only counted as a fetch") {
  auto a = welcomed();
  CHECK(admit(a, fetch()).what == action::ask);
  CHECK(a.next_fetch());
  a.answered(kind::fetch);
  a.reply_queued(kind::offer, 1); // not a fetch: not counted
  for (int i = 0; i < 2; ++i)
    CHECK(admit(a, fetch()).what == action::ask);
  CHECK(a.next_fetch());
  CHECK(a.next_fetch());
}

TEST_CASE("connection admission: queued fetches wait while not welcomed") {
  auto a = welcomed();
  CHECK(admit(a, fetch()).what == action::ask);
  a.start_closing(t0);
  CHECK_FALSE(a.next_fetch());
}

TEST_CASE("connection admission: chunks and credits within the window") {
  gateway_limits limits;
  limits.window = 2;
  auto a = welcomed(limits);
  CHECK(admit(a, credit()).kind == kind::credit);
  CHECK(admit(a, credit()).kind == kind::credit);
  auto v = admit(a, credit());
  CHECK(v.refusal.code == errc::too_many_requests);
  CHECK(refusal(v) == "more than window (2) chunks in flight");
  a.answered(kind::credit);
  CHECK(admit(a, credit()).what == action::ask);
}

TEST_CASE("connection admission: two offers, ends, evaluations or secAgg "
          "requests in flight") {
  auto a = welcomed();
  CHECK(admit(a, offer()).kind == kind::offer);
  CHECK(admit(a, with_id(msg::encode(msg::evaluation{}))).kind ==
        kind::evaluation);
  CHECK(refusal(admit(a, offer())) ==
        "more than 2 offers, ends or evaluations in flight");
  CHECK(refusal(admit(a, with_id(msg::encode(msg::secagg_keys{})))) ==
        "more than 2 secure aggregation requests, offers, ends or "
        "evaluations in flight");
  a.answered(kind::offer);
  CHECK(admit(a, with_id(msg::encode(msg::secagg_keys{}))).kind ==
        kind::secagg_keys);
}

TEST_CASE("connection admission: a Hello again, only under the same id and "
          "with no request open") {
  auto a = welcomed();
  REQUIRE(admit(a, offer()).what == action::ask);
  auto v = admit(a, hello());
  CHECK(v.refusal.code == errc::too_many_requests);
  CHECK(refusal(v) == "Hello while a request is open");
  a.answered(kind::offer);
  v = admit(a, hello("mallory"));
  CHECK(v.refusal.code == errc::not_authorized);
  CHECK(refusal(v) == "welcomed as alice, it said Hello as mallory");
  CHECK(admit(a, hello()).kind == kind::hello);
  CHECK(a.welcomed());
}

TEST_CASE("connection admission: a frame not for the server is refused") {
  auto a = welcomed();
  auto v = admit(a, with_id(msg::encode(msg::round_over{3})));
  CHECK(v.refusal.code == errc::unexpected_message);
  CHECK(refusal(v) == "a round over frame is not for the server");
}

TEST_CASE("connection admission: refusals and repeated Hellos are limited "
          "together") {
  auto a = welcomed();
  for (uint32_t i = 0; i < max_refusals - 1; ++i)
    CHECK_FALSE(a.count_refusal(t0));
  CHECK(admit(a, hello()).what == action::ask); // the 64th
  a.answered(kind::hello);
  auto v = admit(a, hello());
  CHECK(v.refusal.code == errc::too_many_requests);
  CHECK(refusal(v) ==
        "more than 64 refused requests or repeated Hellos in 10 s");
  auto e = a.count_refusal(t0);
  REQUIRE(e);
  CHECK(e->message == refusal(v));
  // A new period starts afresh.
  CHECK_FALSE(a.count_refusal(t0 + refusal_period + milliseconds{1}));
}

TEST_CASE("connection admission: the handshake deadline, by what is missing") {
  gateway_limits limits;
  connection_admission a{limits, peer, t0};
  auto at = t0 + limits.handshake_timeout;
  CHECK(a.tick(at, active_at(at)).what == tick_action::none);
  at += milliseconds{1};
  auto t = a.tick(at, {at, at, false, false});
  CHECK(t.what == tick_action::refuse);
  CHECK(t.refusal.code == errc::timeout);
  CHECK(t.refusal.message ==
        "no TLS handshake within handshake_timeout_s (10000 ms)");
  CHECK(a.tick(at, active_at(at)).refusal.message ==
        "no Hello within handshake_timeout_s (10000 ms)");
  REQUIRE(admit(a, hello()).what == action::ask); // pending: the same
  CHECK(a.tick(at, active_at(at)).what == tick_action::refuse);
}

TEST_CASE("connection admission: silence, output that does not move, and "
          "the heartbeat") {
  gateway_limits limits;
  auto a = welcomed(limits);
  auto late = t0 + limits.connection_timeout + milliseconds{1};
  auto t = a.tick(late, {t0, late, false, true});
  CHECK(t.refusal.code == errc::timeout);
  CHECK(t.refusal.message ==
        "nothing arrived for 30000 ms (connection_timeout_s)");
  t = a.tick(late, {late, t0, true, true});
  CHECK(t.refusal.message ==
        "the peer read nothing for 30000 ms (connection_timeout_s)");
  CHECK(a.tick(late, {late, t0, false, true}).what != tick_action::refuse);

  auto b = welcomed(limits);
  auto beat = t0 + limits.heartbeat;
  CHECK(b.tick(beat - milliseconds{1}, active_at(beat)).what ==
        tick_action::none);
  CHECK(b.tick(beat, active_at(beat)).what == tick_action::heartbeat);
  CHECK(b.tick(beat, active_at(beat)).what == tick_action::none);
  CHECK(b.tick(beat + limits.heartbeat, active_at(beat)).what ==
        tick_action::heartbeat);
}

TEST_CASE("connection admission: closing ignores frames and closes after the "
          "grace") {
  auto a = welcomed();
  a.start_closing(t0);
  CHECK(a.closing());
  CHECK(admit(a, offer()).what == action::ignore);
  CHECK(admit(a, msg::frame(24, '\1')).what == action::ignore);
  CHECK(a.tick(t0 + close_grace, active_at(t0)).what == tick_action::none);
  CHECK(a.tick(t0 + close_grace + milliseconds{1}, active_at(t0)).what ==
        tick_action::close);
}

TEST_CASE("connection admission: only a connection not yet welcomed gives "
          "way") {
  connection_admission a{{}, peer, t0};
  auto e = a.evict();
  REQUIRE(e);
  CHECK(e->code == errc::too_many_requests);
  CHECK(e->message == "not welcomed yet when more than max_unauthenticated "
                      "(64) newer connections arrived: the oldest gives way");
  REQUIRE(admit(a, hello()).what == action::ask);
  CHECK(a.evict());
  CHECK_FALSE(welcomed().evict());
}

TEST_CASE("connection admission: the texts of refusals name the client once "
          "welcomed, and the peer") {
  connection_admission a{{}, peer, t0};
  error e{errc::timeout, "late"};
  CHECK(a.refusal(e).message == "late (peer 10.0.0.7:40000)");
  CHECK(a.refusal(e).code == errc::timeout);
  auto b = welcomed();
  CHECK(b.refusal(e).message == "alice: late (peer 10.0.0.7:40000)");
  CHECK(b.refused_line({errc::wrong_round, "stale"}) ==
        "refused: wrong_round: alice: stale (peer 10.0.0.7:40000)");
  CHECK(connection_admission::tls_only().code == errc::not_authorized);
  CHECK(connection_admission::tls_only().message.starts_with(
      "it accepts TLS only: set comm_configs.grpc_configs.use_ssl: true"));
}

TEST_CASE("connection admission: which server-side refusals end the "
          "connection") {
  for (auto c :
       {errc::malformed_frame, errc::unsupported_version,
        errc::unexpected_message, errc::bad_checksum, errc::out_of_range,
        errc::manifest_mismatch, errc::not_authorized, errc::poisoned_update})
    CHECK(ends_connection(c));
  for (auto c : {errc::bad_sequence, errc::wrong_round, errc::unknown_stream,
                 errc::not_in_round, errc::stream_reset, errc::timeout,
                 errc::unknown_client, errc::too_many_requests})
    CHECK_FALSE(ends_connection(c));
}
