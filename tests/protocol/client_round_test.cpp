// One round of a client driven through its steps with a dummy trainer, as
// the client actor drives it, each reply answered with the requests that
// come next: the model downloaded chunk by chunk into the trainer, the
// offer of the trained update, the upload of its chunks under the server's
// credits, and the round's record in the report with the times passed in.
// Also: the round's stage, where a reconnected round resumes (what goes a
// second time counted as resent), sitting out, the update sent again, and
// what a client does with a round announced.

#include <doctest/doctest.h>

#include <cstring>
#include <vector>

#include "fedcaf/dummy_trainer.hpp"
#include "protocol/client_round.hpp"
#include "tests/protocol/small_model.hpp"

using namespace fedcaf;
using std::chrono::seconds;

namespace {

using testing::small_model;

struct fixture {
  manifest layout = small_model();
  std::vector<float> global = std::vector<float>(53);
  run_report report;
  client_configs configs;
  client_reporter reporter{&report, "C7", nullptr};
  client_model model{"C7",
                     [this](const client_configs&, const msg::welcome&) {
                       return make_dummy_trainer(layout, 1.0f, 50);
                     },
                     configs, msg::welcome{0, 2, "", {}}};
  client_secagg_flow secagg;
  chunk_plan plan = *chunk_plan::make(layout, 64);
  client_reporter::time_point t0{seconds{100}};

  fixture() {
    for (size_t i = 0; i < global.size(); ++i)
      global[i] = static_cast<float>(i);
  }

  msg::round_start announced() const {
    msg::round_start rs;
    rs.round = 1;
    rs.model_version = 1;
    rs.model = layout;
    rs.chunk_bytes = 64;
    rs.window = 2;
    return rs;
  }

  msg::frame chunk(uint64_t seq) const {
    const auto& e = plan.extent(seq);
    msg::chunk_header h{0, 1, seq, e.tensor_index, e.tensor_offset};
    return msg::encode_chunk(h, e.bytes, [this, &e](std::span<std::byte> d) {
      std::memcpy(d.data(),
                  reinterpret_cast<const std::byte*>(global.data()) +
                      e.model_offset,
                  d.size());
    });
  }
};

} // namespace

TEST_CASE("a round whose layout the trainer does not have fails to start") {
  fixture x;
  auto rs = x.announced();
  rs.model.tensors.pop_back();
  auto r = client_round::start(rs, x.model, x.reporter, x.secagg, x.t0);
  CHECK_FALSE(r);
}

// -- the round's steps: what the client actor sends next ----------------------

namespace {

using kind = client_round::request_kind;
using stage = client_round::stage;
using transfer = client_round::transfer;

/// The kinds and sequence numbers of `s`'s requests.
std::vector<std::pair<kind, uint64_t>> asked(const client_round::step& s) {
  std::vector<std::pair<kind, uint64_t>> out;
  for (const auto& r : s.requests)
    out.emplace_back(r.to, r.seq);
  return out;
}

msg::frame credit(uint64_t seq) {
  return msg::encode(msg::credit{5, seq});
}

/// Answers the fetches of `s` and those that follow until the model has
/// arrived (at `now`); returns the last step.
client_round::step download_all(fixture& x, client_round& r,
                                client_round::step s,
                                client_reporter::time_point now) {
  while (!s.train && !s.requests.empty()) {
    client_round::step next;
    for (const auto& req : s.requests) {
      REQUIRE(req.to == kind::fetch);
      auto got = r.on_reply(kind::fetch, req.seq, x.chunk(req.seq), now, 0);
      REQUIRE(got);
      auto more = std::move(*got);
      for (auto& q : more.requests)
        next.requests.push_back(std::move(q));
      next.watch = more.watch;
      next.train = more.train;
      next.evaluation = std::move(more.evaluation);
    }
    s = std::move(next);
  }
  return s;
}

/// Starts round `rs`, downloads and trains: the round is offering.
client_round offering(fixture& x, const msg::round_start& rs) {
  auto r = client_round::start(rs, x.model, x.reporter, x.secagg, x.t0);
  REQUIRE(r);
  auto arrived = download_all(x, *r, r->begin(), x.t0);
  REQUIRE(arrived.train);
  auto offered = r->train_and_offer(x.t0);
  REQUIRE(offered);
  REQUIRE(asked(*offered) == decltype(asked(*offered)){{kind::offer, 0}});
  return std::move(*r);
}

} // namespace

TEST_CASE("a round downloads, trains, offers and uploads the update, each "
          "reply answered with the requests that come next") {
  fixture x;
  auto r =
      client_round::start(x.announced(), x.model, x.reporter, x.secagg, x.t0);
  REQUIRE(r);
  auto first = r->begin();
  CHECK(first.stale); // a new round: older replies are void
  CHECK(first.watch == transfer::started);
  using asks = std::vector<std::pair<kind, uint64_t>>;
  CHECK(asked(first) == asks{{kind::fetch, 0}, {kind::fetch, 1}}); // window 2
  CHECK(first.requests[0].what == std::string{"fetch"});

  auto s = r->on_reply(kind::fetch, 0, x.chunk(0), x.t0, 0);
  REQUIRE(s);
  CHECK(s->watch == transfer::moved);
  CHECK(asked(*s) == asks{{kind::fetch, 2}});
  REQUIRE(r->on_reply(kind::fetch, 1, x.chunk(1), x.t0, 0));
  CHECK(x.report.peak_in_flight == 2); // the round's window
  s = r->on_reply(kind::fetch, 2, x.chunk(2), x.t0, 0);
  REQUIRE(s);
  CHECK(s->requests.empty()); // chunk 3 is in flight
  CHECK_FALSE(s->train);
  s = r->on_reply(kind::fetch, 3, x.chunk(3), x.t0 + seconds{1}, 0);
  REQUIRE(s);
  CHECK(s->watch == transfer::ended);
  CHECK(s->train);
  CHECK(s->requests.empty());
  CHECK_FALSE(s->evaluation); // federated evaluation is off
  CHECK(r->current_stage() == stage::downloading);
  CHECK(x.report.bytes_received == 212);

  s = r->train_and_offer(x.t0 + seconds{2});
  REQUIRE(s);
  REQUIRE(asked(*s) == asks{{kind::offer, 0}});
  auto offer = msg::decode<msg::offer>(s->requests[0].frame);
  REQUIRE(offer);
  CHECK(offer->round == 1);
  CHECK(offer->client_id == "C7");
  CHECK(offer->sample_count == 50);
  CHECK(offer->total_bytes == 212);
  CHECK(offer->chunk_count == 4);
  CHECK(offer->manifest_digest == digest(x.layout));
  CHECK(offer->encoding == 0);
  CHECK(r->current_stage() == stage::offering);
  CHECK(r->upload_open());

  s = r->on_reply(kind::offer, 0, msg::encode(msg::accept{5, 4, 0, 0}), x.t0,
                  0);
  REQUIRE(s);
  CHECK(s->watch == transfer::started);
  CHECK(asked(*s) == asks{{kind::chunk, 0}, {kind::chunk, 0}}); // window 2
  CHECK(r->current_stage() == stage::uploading);
  std::vector<float> sent(53);
  auto take = [&x, &sent](const client_round::step& step) {
    for (const auto& req : step.requests) {
      if (req.to != kind::chunk)
        continue;
      auto c = msg::decode_chunk(req.frame, 64);
      REQUIRE(c);
      const auto& ext = x.plan.extent(c->header.sequence);
      std::memcpy(reinterpret_cast<std::byte*>(sent.data()) + ext.model_offset,
                  c->bytes.data(), c->bytes.size());
    }
  };
  take(*s);

  s = r->on_reply(kind::chunk, 0, credit(0), x.t0, 0);
  REQUIRE(s);
  CHECK(s->watch == transfer::moved);
  CHECK(asked(*s) == asks{{kind::chunk, 0}});
  take(*s);
  s = r->on_reply(kind::chunk, 0, credit(1), x.t0, 0);
  REQUIRE(s);
  take(*s);
  s = r->on_reply(kind::chunk, 0, credit(2), x.t0, 0);
  REQUIRE(s);
  CHECK(s->requests.empty());
  s = r->on_reply(kind::chunk, 0, credit(3), x.t0, 0);
  REQUIRE(s);
  for (size_t i = 0; i < sent.size(); ++i)
    CHECK(sent[i] == x.global[i] + 1.0f); // the dummy trainer adds 1
  REQUIRE(asked(*s) == asks{{kind::end, 0}});
  auto end = msg::decode<msg::end_of_stream>(s->requests[0].frame);
  REQUIRE(end);
  CHECK(end->stream_id == 5);
  CHECK(r->current_stage() == stage::closing);
  CHECK_FALSE(s->upload_over);

  s = r->on_reply(kind::end, 0, msg::encode(msg::stream_closed{5, 212}),
                  x.t0 + seconds{5}, 1234.5);
  REQUIRE(s);
  CHECK(s->watch == transfer::ended);
  CHECK(s->upload_over);
  CHECK(s->requests.empty());
  CHECK(r->current_stage() == stage::over);
  CHECK_FALSE(r->upload_open());
  REQUIRE(x.report.rounds.size() == 1);
  const auto& rec = x.report.rounds[0];
  CHECK(rec.round == 1);
  CHECK(rec.bytes_down == 212);
  CHECK(rec.bytes_up == 212);
  CHECK(rec.download_seconds == doctest::Approx(1));
  CHECK(rec.upload_seconds == doctest::Approx(3));
  CHECK(rec.wall_seconds == doctest::Approx(5));
  CHECK(rec.ended_unix_s == 1234.5);
  CHECK(x.report.bytes_sent == 212);
  CHECK(x.report.bytes_resent == 0);
}

TEST_CASE("a resumed upload asks for the credits owed, then sends on") {
  fixture x;
  auto r = offering(x, x.announced());
  // The server's stream had chunks 0 and 1; chunk 1's credit is owed.
  auto s =
      r.on_reply(kind::offer, 0, msg::encode(msg::accept{5, 4, 2, 1}), x.t0, 0);
  REQUIRE(s);
  using asks = std::vector<std::pair<kind, uint64_t>>;
  CHECK(asked(*s) == asks{{kind::credit, 0}, {kind::chunk, 0}});
  auto owed = msg::decode<msg::credit>(s->requests[0].frame);
  REQUIRE(owed);
  CHECK(owed->sequence == 1);
  auto c = msg::decode_chunk(s->requests[1].frame, 64);
  REQUIRE(c);
  CHECK(c->header.sequence == 2);
}

TEST_CASE("a reconnected round resumes where it stopped") {
  using asks = std::vector<std::pair<kind, uint64_t>>;
  SUBCASE("a download fetches again what was in flight") {
    fixture x;
    auto r =
        client_round::start(x.announced(), x.model, x.reporter, x.secagg, x.t0);
    REQUIRE(r);
    r->begin(); // chunks 0 and 1 in flight
    REQUIRE(r->on_reply(kind::fetch, 0, x.chunk(0), x.t0, 0));
    auto s = r->resume(); // chunks 1 and 2 were lost with the connection
    CHECK(s.watch == transfer::started);
    CHECK_FALSE(s.stale);
    CHECK(asked(s) == asks{{kind::fetch, 1}, {kind::fetch, 2}});
    CHECK(x.report.bytes_resent == 128);
  }
  SUBCASE("an open upload offers again") {
    fixture x;
    auto r = offering(x, x.announced());
    CHECK(asked(r.resume()) == asks{{kind::offer, 0}});
    REQUIRE(r.on_reply(kind::offer, 0, msg::encode(msg::accept{5, 4, 0, 0}),
                       x.t0, 0));
    auto s = r.resume();
    CHECK(asked(s) == asks{{kind::offer, 0}});
    CHECK(s.watch == transfer::unchanged);
    CHECK(r.current_stage() == stage::offering);
  }
  SUBCASE("a round that is over asks nothing") {
    fixture x;
    auto r = offering(x, x.announced());
    auto s =
        r.on_reply(kind::offer, 0,
                   msg::encode(error{errc::not_in_round, "full"}), x.t0, 0);
    REQUIRE(s);
    CHECK(s->upload_over); // sat out
    CHECK(r.current_stage() == stage::over);
    CHECK(r.resume().requests.empty());
  }
}

TEST_CASE("the update goes again when the server collects again") {
  fixture x;
  auto r = offering(x, x.announced());
  REQUIRE(r.on_reply(kind::offer, 0, msg::encode(msg::accept{5, 4, 0, 0}), x.t0,
                     0));
  REQUIRE(r.on_reply(kind::chunk, 0, credit(0), x.t0, 0));
  // The server forgot the round's uploads: answers to what went are void.
  auto reset =
      r.on_reply(kind::chunk, 0,
                 msg::encode(error{errc::stream_reset, "restarted"}), x.t0, 0);
  REQUIRE(reset);
  CHECK(reset->stale);
  CHECK(reset->requests.empty());
  auto s = r.send_again();
  CHECK(s.stale);
  using asks = std::vector<std::pair<kind, uint64_t>>;
  CHECK(asked(s) == asks{{kind::offer, 0}});
  CHECK(r.current_stage() == stage::offering);
  CHECK(x.report.bytes_resent == 64);
}

TEST_CASE("a round that only evaluates answers with the evaluation") {
  fixture x;
  auto rs = x.announced();
  rs.round = 3;
  rs.evaluate_only = true;
  auto r = client_round::start(rs, x.model, x.reporter, x.secagg, x.t0);
  REQUIRE(r);
  auto s = download_all(x, *r, r->begin(), x.t0);
  CHECK_FALSE(s.train);
  CHECK(s.requests.empty());
  CHECK(s.watch == transfer::ended);
  REQUIRE(s.evaluation); // without test data: no figures, but an answer
  CHECK(s.evaluation->round == 2);
  CHECK(s.evaluation->metrics.empty());
  CHECK(r->current_stage() == stage::over);
  CHECK_FALSE(s.upload_over);
}

TEST_CASE("a SecAgg+ round sends its keys before the offer") {
  fixture x;
  auto rs = x.announced();
  rs.secure_aggregation = true;
  auto r = client_round::start(rs, x.model, x.reporter, x.secagg, x.t0);
  REQUIRE(r);
  REQUIRE(download_all(x, *r, r->begin(), x.t0).train);
  auto s = r->train_and_offer(x.t0);
  REQUIRE(s);
  REQUIRE(s->requests.size() == 1);
  CHECK(s->requests[0].to == kind::secagg);
  CHECK(s->requests[0].what == std::string{"secure aggregation keys"});
  CHECK(r->current_stage() == stage::downloading);
  // The server leaves this client out of the round.
  s = r->on_reply(kind::secagg, 0,
                  msg::encode(error{errc::not_in_round, "too few"}), x.t0, 0);
  REQUIRE(s);
  CHECK(s->upload_over);
  CHECK(s->requests.empty());
  CHECK(r->current_stage() == stage::over);
}

TEST_CASE("a round announced is started, waits, goes again or is ignored") {
  using answer = client_round::answer;
  fixture x;
  std::optional<client_round> none;
  auto rs = x.announced();
  auto next = rs;
  next.round = 2;
  next.model_version = 2;
  auto resend = rs;
  resend.resend = true;
  CHECK(client_round::answer_announcement(none, rs, false) == answer::start);

  std::optional<client_round> current{
      std::move(*client_round::start(rs, x.model, x.reporter, x.secagg, x.t0))};
  CHECK(client_round::answer_announcement(current, rs, false) ==
        answer::ignore);
  CHECK(client_round::answer_announcement(current, resend, false) ==
        answer::ignore); // still downloading
  CHECK(client_round::answer_announcement(current, resend, true) ==
        answer::send_again);
  CHECK(client_round::answer_announcement(current, next, false) ==
        answer::start);

  fixture y;
  std::optional<client_round> open{offering(y, rs)};
  CHECK(client_round::answer_announcement(open, next, false) == answer::wait);
  CHECK(client_round::answer_announcement(open, next, true) == answer::start);
  CHECK(client_round::answer_announcement(open, resend, false) ==
        answer::send_again);
  CHECK(client_round::answer_announcement(open, rs, false) == answer::ignore);
  auto next_resend = next;
  next_resend.resend = true;
  CHECK(client_round::answer_announcement(open, next_resend, false) ==
        answer::start);
}

TEST_CASE("an evaluation goes to the server only with well-formed figures") {
  CHECK(client_round::fit_to_send({1, 10, {{"accuracy", 0.5}}}, "C7"));
  CHECK_FALSE(client_round::fit_to_send({1, 10, {{"bad name!", 0.5}}}, "C7"));
  CHECK_FALSE(
      client_round::fit_to_send({1, 10, {{"loss", 1}, {"loss", 2}}}, "C7"));
}

namespace {

/// A window-mode relay's trainer as client_round sees it: the dummy
/// trainer's model, its download let no further than `limit` bytes.
class paced_trainer final : public trainer, public relay_hooks {
public:
  paced_trainer(std::unique_ptr<trainer> inner, uint64_t* limit)
      : inner_(std::move(inner)), limit_(limit) {}
  const manifest& layout() const override { return inner_->layout(); }
  model_view parameters() override { return inner_->parameters(); }
  result<train_metrics> train() override { return inner_->train(); }
  uint64_t sample_count() const override { return 1; }
  bool may_fetch(uint64_t offset, uint64_t) override {
    return offset < *limit_;
  }

private:
  std::unique_ptr<trainer> inner_;
  uint64_t* limit_;
};

} // namespace

TEST_CASE("a download its trainer paces waits for room without counting as "
          "a stalled link, and model bytes are fetched again chunk by chunk") {
  fixture x;
  uint64_t limit = 64; // chunk 0 only (64-byte chunks)
  client_model paced{"R1",
                     [&](const client_configs&, const msg::welcome&)
                         -> result<std::unique_ptr<trainer>> {
                       auto dummy = make_dummy_trainer(x.layout, 1.0f, 50);
                       if (!dummy)
                         return dummy.err();
                       return std::unique_ptr<trainer>{
                           new paced_trainer{std::move(*dummy), &limit}};
                     },
                     x.configs, msg::welcome{0, 2, "", {}}};
  auto r =
      client_round::start(x.announced(), paced, x.reporter, x.secagg, x.t0);
  REQUIRE(r);
  auto first = r->begin();
  CHECK(asked(first) == decltype(asked(first)){{kind::fetch, 0}});
  CHECK_FALSE(r->waits_on_update()); // a fetch is out
  auto got = r->on_reply(kind::fetch, 0, x.chunk(0), x.t0, 0);
  REQUIRE(got);
  CHECK(got->requests.empty()); // held back: no room
  CHECK(r->waits_on_update());  // not the server's silence
  limit = x.plan.total_bytes();
  auto more = r->more_ready();
  REQUIRE(more);
  CHECK(asked(*more) ==
        decltype(asked(*more)){{kind::fetch, 1}, {kind::fetch, 2}});
  auto done = download_all(x, *r, std::move(*more), x.t0);
  CHECK(done.train);

  // Bytes 100..160 again: chunks 1 and 2 (64-byte chunks) are fetched, and
  // each answer gives the bytes it holds of that range.
  auto again = r->refetch_requests(100, 60);
  REQUIRE(again.size() == 2);
  CHECK(again[0].first == 1);
  CHECK(again[1].first == 2);
  auto req = msg::decode<msg::fetch>(again[0].second);
  REQUIRE(req);
  CHECK(req->sequence == 1);
  CHECK(req->model_version == 1);
  std::vector<std::byte> out(60);
  REQUIRE(r->refetched(1, x.chunk(1), 100, out));
  REQUIRE(r->refetched(2, x.chunk(2), 100, out));
  CHECK(std::memcmp(out.data(),
                    reinterpret_cast<const std::byte*>(x.global.data()) + 100,
                    out.size()) == 0);
  CHECK_FALSE(r->refetched(1, x.chunk(2), 100, out)); // not chunk 1
  CHECK_FALSE(
      r->refetched(1, msg::encode(error{errc::wrong_round, "gone"}), 100, out));
}
