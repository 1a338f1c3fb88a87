// The terms of a round's transfers: the announcement of the model served,
// chunks served from it (or from a model a client pinned), their encoding,
// the refusals of fetches for other versions or past the plan, and the
// checks on an offer's sender and encoding.

#include <doctest/doctest.h>

#include <cstring>
#include <memory>

#include "protocol/model_exchange.hpp"

using namespace fedcaf;

namespace {

/// A model of two float32 tensors (1000 and 300 values), value i = seed + i.
snapshot_ptr model(uint64_t version, float seed) {
  auto s = std::make_shared<model_snapshot>();
  s->layout.tensors = {make_tensor_info("w", dtype::float32, {1000}),
                       make_tensor_info("b", dtype::float32, {300})};
  s->version = version;
  s->bytes = byte_buffer::uninitialized(s->layout.total_bytes());
  auto* f = reinterpret_cast<float*>(s->bytes.data());
  for (size_t i = 0; i < 1300; ++i)
    f[i] = seed + static_cast<float>(i);
  return s;
}

exchange_terms terms(uint64_t chunk_bytes = 1024) {
  exchange_terms t;
  t.chunk_bytes = chunk_bytes;
  t.window = 3;
  return t;
}

/// An exchange whose terms ask for int8 uploads.
model_exchange int8_uploads() {
  auto t = terms();
  t.compression.method = compression_method::int8;
  t.compression.up = true;
  return model_exchange{model(3, 0), t};
}

msg::offer offer_of(const std::string& id, uint8_t encoding) {
  msg::offer o;
  o.client_id = id;
  o.encoding = encoding;
  return o;
}

} // namespace

TEST_CASE("model exchange: the announcement describes the model served") {
  auto t = terms();
  t.secure_aggregation = true;
  model_exchange x{model(3, 0), t};
  auto rs = x.announce(7, msg::metrics{6, 0.5, 1.25, true}, true);
  CHECK(rs.round == 7);
  CHECK(rs.model_version == 3);
  CHECK(rs.model == x.model()->layout);
  CHECK(rs.chunk_bytes == 1024);
  CHECK(rs.window == 3);
  CHECK(rs.previous.round == 6);
  CHECK(rs.resend);
  CHECK_FALSE(rs.evaluate_only);
  CHECK(rs.secure_aggregation);
  CHECK(x.model_bytes() == 5200);
}

TEST_CASE("model exchange: a fetch gets its chunk's bytes of the model") {
  model_exchange x{model(3, 0), terms()};
  auto c = x.serve(msg::fetch{7, 3, 1}, nullptr);
  REQUIRE(c);
  CHECK(c->wire_bytes == 1024);
  CHECK(c->model_bytes == 1024);
  auto v = msg::decode_chunk(c->frame, 1024);
  REQUIRE(v);
  CHECK(v->header.round == 7);
  CHECK(v->header.sequence == 1);
  REQUIRE(v->bytes.size() == 1024);
  float first = 0;
  std::memcpy(&first, v->bytes.data(), 4);
  CHECK(first == 256.0f); // chunk 1 starts at value 256
}

TEST_CASE("model exchange: fetches of another version or past the plan are "
          "refused") {
  model_exchange x{model(3, 0), terms()};
  auto old = x.serve(msg::fetch{7, 2, 0}, nullptr);
  REQUIRE_FALSE(old);
  CHECK(old.err().code == errc::wrong_round);
  CHECK(old.err().message == "model version 2 is not served; current is 3");
  auto past = x.serve(msg::fetch{7, 3, 99}, nullptr);
  REQUIRE_FALSE(past);
  CHECK(past.err().code == errc::out_of_range);
  CHECK(past.err().message.find("chunk 99 of ") == 0);
}

TEST_CASE("model exchange: a pinned model is served after a newer one is "
          "installed") {
  auto v3 = model(3, 0);
  model_exchange x{v3, terms()};
  x.install(model(4, 1000));
  CHECK(x.model()->version == 4);
  CHECK_FALSE(x.serve(msg::fetch{7, 3, 0}, nullptr));
  auto c = x.serve(msg::fetch{7, 3, 0}, v3);
  REQUIRE(c);
  auto v = msg::decode_chunk(c->frame, 1024);
  REQUIRE(v);
  float first = -1;
  std::memcpy(&first, v->bytes.data(), 4);
  CHECK(first == 0.0f);
}

TEST_CASE("model exchange: downloads encoded as fp16 cost half the bytes") {
  auto t = terms();
  t.compression.method = compression_method::fp16;
  t.compression.down = true;
  model_exchange x{model(3, 0), t};
  auto c = x.serve(msg::fetch{1, 3, 0}, nullptr);
  REQUIRE(c);
  CHECK(c->model_bytes == 1024);
  CHECK(c->wire_bytes == 512);
}

TEST_CASE("model exchange: an offer must come from its sender, in the "
          "encoding the terms ask for") {
  auto x = int8_uploads();
  auto as = x.check_offer("A", offer_of("B", 3));
  REQUIRE_FALSE(as);
  CHECK(as.err().code == errc::not_authorized);
  CHECK(as.err().message == "A offered an update as B");
  auto plain = x.check_offer("A", offer_of("A", 0));
  REQUIRE_FALSE(plain);
  CHECK(plain.err().code == errc::manifest_mismatch);
  CHECK(plain.err().message ==
        "A offered an update encoded as none; this server takes int8 "
        "(client_configs.comm_configs.compression)");
  auto odd = x.check_offer("A", offer_of("A", 77));
  REQUIRE_FALSE(odd);
  CHECK(odd.err().message.find("encoded as 77;") != std::string::npos);
  CHECK(x.check_offer("A", offer_of("A", 3)));
  model_exchange none{model(3, 0), terms()};
  CHECK(none.check_offer("A", offer_of("A", 0)));
}

TEST_CASE("model exchange: a relay's partial sum comes whole, under "
          "compressed uploads too") {
  auto x = int8_uploads();
  auto sum = offer_of("R", 0);
  sum.partial_sum = true;
  CHECK(x.check_offer("R", sum));
  auto encoded = offer_of("R", 3);
  encoded.partial_sum = true;
  auto refused = x.check_offer("R", encoded);
  REQUIRE_FALSE(refused);
  CHECK(refused.err().code == errc::manifest_mismatch);
  CHECK(refused.err().message.find("this server takes none for a partial "
                                   "sum (a relay's, sent whole)") !=
        std::string::npos);
}
