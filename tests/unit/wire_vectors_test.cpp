// One frame of every kind, as this build's codec writes it, against the test
// vectors in docs/wire-vectors.txt (what an implementation of the wire can
// check its encoder and decoder against). FEDCAF_WRITE_VECTORS=PATH writes
// the file instead (after a deliberate change of the wire).

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <doctest/doctest.h>

#include "fedcaf/manifest.hpp"
#include "messages/codec.hpp"
#include "protocol/departure.hpp"

using namespace fedcaf;
using namespace fedcaf::msg;

namespace {

key_bytes key_of(uint8_t first) {
  key_bytes k{};
  for (size_t i = 0; i < k.size(); ++i)
    k[i] = static_cast<uint8_t>(first + i);
  return k;
}

/// (name: what it holds, frame) for every frame kind, request ids set.
std::vector<std::pair<std::string, frame>> examples() {
  manifest m{{make_tensor_info("w", dtype::float32, {2, 3}),
              make_tensor_info("n", dtype::float32, {})}};
  m.tensors[1].held = dtype::int64; // a carried integer tensor
  std::vector<std::pair<std::string, frame>> out;
  auto add = [&out](std::string name, uint32_t id, frame f) {
    set_request_id(f, id);
    out.emplace_back(std::move(name), std::move(f));
  };
  add("hello {clientId Client1, token secret}, request id 1", 1,
      encode(hello{"Client1", "secret"}));
  add("hello {clientId Client1, token secret, shardRank 1, shardRanks 2, "
      "slices [w rows [1, 2)]} (a rank of a sharded client), request id 1",
      1, encode(hello{"Client1", "secret", shard_spec{1, 2, {{"w", 1, 2}}}}));
  add("welcome {clientIndex 0, numClients 2, clientConfigs 'train_configs: "
      "{}', heartbeatMs 5000, connectionTimeoutMs 30000, idleTimeoutMs "
      "60000, reconnectGraceMs 30000, maxMessageBytes 16777216, "
      "federatedEvaluation true, declareUpdateNorm false, updateClipNorm 0, "
      "uploadEncoding 3 (int8), downloadEncoding 0, zfpTolerance 0}, "
      "request id 1",
      1,
      encode(welcome{
          0,
          2,
          "train_configs: {}",
          {5000, 30000, 60000, 30000, 16 << 20, true, false, 0, 3, 0, 0}}));
  add("roundStart {round 1, modelVersion 0, manifest [w: F32 [2, 3], n: "
      "carried I64 as F32 []], chunkBytes 64, window 4, previous {round 0}}",
      0, encode(round_start{1, 0, m, 64, 4, {}}));
  add("offer {round 1, clientId Client1, sampleCount 100, manifestDigest "
      "digest(manifest), totalBytes 28, chunkCount 1, trainLoss 0.5, "
      "trainSeconds 2, dpEpsilon 0, metrics [loss 0.5], encoding 0, "
      "updateNorm 0, partialSum false, updateId 77}, request id 5",
      5,
      encode(offer{1,
                   "Client1",
                   100,
                   digest(m),
                   28,
                   1,
                   0.5,
                   2,
                   0,
                   {{"loss", 0.5}},
                   0,
                   0,
                   false,
                   77}));
  add("accept {streamId 9, window 4, nextSequence 0, firstUnacknowledged 0}, "
      "request id 5",
      5, encode(accept{9, 4, 0, 0}));
  add("chunk {streamId 9, round 1, sequence 0, tensorIndex 0, tensorOffset "
      "0, checksum XXH3-64 of bytes, bytes 01 02 03 04}, request id 6",
      6, encode_chunk({9, 1, 0, 0, 0}, 4, [](std::span<std::byte> p) {
        for (size_t i = 0; i < p.size(); ++i)
          p[i] = static_cast<std::byte>(i + 1);
      }));
  add("credit {streamId 9, sequence 0}, request id 6", 6, encode(credit{9, 0}));
  add("fetch {round 1, modelVersion 0, sequence 0}, request id 7", 7,
      encode(fetch{1, 0, 0}));
  add("endOfStream {streamId 9, chunkCount 1}, request id 8", 8,
      encode(end_of_stream{9, 1}));
  add("streamClosed {streamId 9, bytesReceived 4}, request id 8", 8,
      encode(stream_closed{9, 4}));
  add("done {rounds 3, final {round 3, testAccuracy 0.875, testLoss 0.25, "
      "evaluated true}, reason ''}",
      0, encode(done{3, {3, 0.875, 0.25, true}, ""}));
  add("error {code 10 (manifest_mismatch), message 'digest differs'}, "
      "request id 5",
      5, encode(error{errc::manifest_mismatch, "digest differs"}));
  add("heartbeat {}", 0, encode_heartbeat());
  add("roundOver {round 1}", 0, encode(round_over{1}));
  add("evaluation {round 1, sampleCount 500, metrics [accuracy 0.75]}, "
      "request id 9",
      9, encode(evaluation{1, 500, {{"accuracy", 0.75}}}));
  add("secAggKeys {round 1, shareKey 01..20, maskKey 41..60, sampleCount "
      "100, selfSeedCommitment 81..a0}, request id 10",
      10,
      encode(secagg_keys{1, key_of(0x01), key_of(0x41), 100, key_of(0x81)}));
  add("secAggRoster {round 1, index 0, weight 0.5, threshold 2, "
      "clippingRange 8, quantizationBits 22, neighbours [{index 1, clientId "
      "Client2, shareKey 02..21, maskKey 42..61}]}, request id 10",
      10,
      encode(secagg_roster{
          1, 0, 0.5, 2, 8.0, 22, {{1, "Client2", key_of(2), key_of(0x42)}}}));
  add("secAggShares {round 1, shares [{peer 1, sealed 133 bytes 00..84}]}, "
      "request id 11",
      11, [] {
        sealed_share s{1, std::vector<uint8_t>(sealed_share_bytes)};
        for (size_t i = 0; i < s.sealed.size(); ++i)
          s.sealed[i] = static_cast<uint8_t>(i);
        return encode(secagg_shares{1, {s}});
      }());
  add("secAggReceipt {round 1, unopened [], excluded [2]}, request id 12", 12,
      encode(secagg_receipt{1, {}, {2}, {}, {}}));
  add("secAggReceipt {round 1, disputed [0, 2]} (a dispute), request id 12", 12,
      encode(secagg_receipt{1, {}, {}, {0, 2}, {}}));
  add("secAggReceipt {round 1, shareSecrets [{peer 0, secret 05..24}]} (its "
      "answer), request id 14",
      14, encode(secagg_receipt{1, {}, {}, {}, {{0, key_of(5)}}}));
  add("goodbye {reason terminated, detail SIGTERM}, request id 15", 15,
      encode(goodbye{goodbye_reason::terminated, "SIGTERM"}));
  add("secAggUnmask {round 1, inSum [0, 1], dropped [2], selfSeedShares "
      "[{owner 1, x 1, y 03..22}], maskKeyShares [{owner 2, x 1, y "
      "04..23}]}, request id 13",
      13,
      encode(secagg_unmask{
          1, {0, 1}, {2}, {{1, 1, key_of(3)}}, {{2, 1, key_of(4)}}}));
  return out;
}

std::string hex_lines(const frame& f) {
  std::string out;
  char b[4];
  for (size_t i = 0; i < f.size(); ++i) {
    std::snprintf(b, sizeof b, "%02x", static_cast<unsigned char>(f[i]));
    out += b;
    out += (i % 8 == 7 || i + 1 == f.size()) ? "\n" : " ";
  }
  return out;
}

std::string vectors_text() {
  std::string out =
      "# fedcaf wire test vectors: one frame of every kind as fedcaf writes\n"
      "# it (docs/protocol.md, \"Framing\"): envelope, segment table, one\n"
      "# segment. Each entry: a line '## <kind and fields>', then the bytes,\n"
      "# 8 per line, in hex. Checked by tests/unit/wire_vectors_test.cpp.\n";
  for (const auto& [name, f] : examples())
    out += "\n## " + name + " (" + std::to_string(f.size()) + " bytes)\n" +
           hex_lines(f);
  return out;
}

} // namespace

TEST_CASE("every frame kind encodes to its test vector in "
          "docs/wire-vectors.txt, and decodes back") {
  auto text = vectors_text();
  if (const char* path = std::getenv("FEDCAF_WRITE_VECTORS")) {
    std::ofstream{path} << text;
    return;
  }
  std::ifstream in{std::string{FEDCAF_SOURCE_DIR} + "/docs/wire-vectors.txt"};
  REQUIRE(in);
  std::stringstream file;
  file << in.rdbuf();
  CHECK(file.str() == text);
  // Each decodes as its kind (the vectors are frames a receiver accepts).
  auto all = examples();
  REQUIRE(all.size() == 24);
  CHECK(decode<hello>(all[0].second));
  auto rank = decode<hello>(all[1].second);
  REQUIRE(rank);
  CHECK(rank->shard == shard_spec{1, 2, {{"w", 1, 2}}});
  CHECK(decode<welcome>(all[2].second)->terms.upload_encoding == 3);
  CHECK(decode<round_start>(all[3].second)->model.tensors[1].held ==
        dtype::int64);
  CHECK(decode<offer>(all[4].second));
  CHECK(decode_chunk(all[6].second, 64)->bytes.size() == 4);
  CHECK(decode<secagg_receipt>(all[20].second)->disputed.size() == 2);
  auto answer = decode<secagg_receipt>(all[21].second);
  REQUIRE(answer);
  REQUIRE(answer->share_secrets.size() == 1);
  CHECK(answer->share_secrets[0].secret == key_of(5));
  auto bye = decode<goodbye>(all[22].second);
  REQUIRE(bye);
  CHECK(bye->reason == goodbye_reason::terminated);
  CHECK(bye->detail == "SIGTERM");
  CHECK(decode<secagg_unmask>(all[23].second)->dropped.size() == 1);
}

TEST_CASE("a client's goodbye says why: a wrong model, its error, the first "
          "reason the program noted") {
  auto wrong = goodbye_for({errc::manifest_mismatch, "tensor 'w' is [3]"});
  CHECK(wrong.reason == goodbye_reason::wrong_model);
  CHECK(std::string{name_of(wrong.reason)} == "wrong_model");
  CHECK(said_why(wrong) ==
        "a wrong model: manifest_mismatch: tensor 'w' is [3]");
  auto other = goodbye_for({errc::io_error, "disk full\nreally"});
  CHECK(other.reason == goodbye_reason::other);
  CHECK(said_why(other) == "other: io_error: disk full?really");
  // A detail past the limit travels cut to it.
  auto long_one = goodbye_for({errc::internal, std::string(2000, 'x')});
  auto sent = decode<goodbye>(encode(long_one));
  REQUIRE(sent);
  CHECK(sent->detail.size() == max_goodbye_detail);

  departure d;
  CHECK_FALSE(d.noted());
  d.note({goodbye_reason::terminated, "SIGTERM"});
  d.note({goodbye_reason::interrupted, "SIGINT"}); // the first stands
  REQUIRE(d.noted());
  CHECK(d.noted()->reason == goodbye_reason::terminated);
}
