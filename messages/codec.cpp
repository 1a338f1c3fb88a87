// The one adapter around Cap'n Proto: every kj::Exception is caught here and
// becomes an error value.

#include <endian.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <iterator>
#include <optional>
#include <set>
#include <string_view>
#include <utility>

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/exception.h>
#include <xxh_x86dispatch.h>

#include "codec.hpp"
#include "fedcaf.capnp.h"
#include "fedcaf/client_id.hpp"

namespace fedcaf::msg {

namespace {

using capnp::word;

constexpr size_t header_bytes = 8; // segment table of a one-segment message
constexpr size_t prefix_bytes = envelope_bytes + header_bytes;

/// A message builder whose one segment is the frame itself, behind the
/// envelope and the segment table, so the encoded message needs no copy.
/// A message that outgrows it takes overflow segments from the heap; finish()
/// then returns nothing and build() starts again with room for all of it.
class frame_builder final : public capnp::MessageBuilder {
public:
  explicit frame_builder(size_t capacity_words)
      : out_(prefix_bytes + capacity_words * sizeof(word)) {}

  /// Room for `capacity_words`, of which only the first `zeroed_words` are
  /// in the frame (zero): the rest is reserved, for a payload the caller
  /// appends (append_payload) rather than zero-fills and overwrites.
  frame_builder(size_t capacity_words, size_t zeroed_words) {
    out_.reserve(prefix_bytes + capacity_words * sizeof(word));
    out_.resize(prefix_bytes + zeroed_words * sizeof(word));
    capacity_words_ = capacity_words;
  }

  /// Appends the payload of a Data field that initBytes just allocated at
  /// `at`, the last thing in the segment: `gather` calls append(piece) with
  /// its bytes front to back. Returns false, appending nothing, iff the
  /// field does not begin within the zeroed words (then build again with
  /// the zero-filled constructor). REQUIRES: the reserving constructor.
  bool append_payload(const std::byte* at, size_t bytes,
                      const std::function<void(const chunk_append&)>& gather) {
    auto* begin = reinterpret_cast<const char*>(at);
    if (begin < out_.data() + prefix_bytes || begin > out_.data() + out_.size())
      return false;
    out_.resize(static_cast<size_t>(begin - out_.data())); // its words unused
    auto end = out_.size() + bytes;
    gather([this, end](std::span<const std::byte> piece) {
      auto* p = reinterpret_cast<const char*>(piece.data());
      auto n = std::min(piece.size(), end - out_.size());
      out_.insert(out_.end(), p, p + n); // within the reserved capacity
    });
    // Whatever gather did not write, and the padding to a word, is zero.
    out_.resize(prefix_bytes + (end - prefix_bytes + sizeof(word) - 1) /
                                   sizeof(word) * sizeof(word));
    return true;
  }

  kj::ArrayPtr<word> allocateSegment(uint32_t minimum_words) override {
    auto capacity = capacity_words_ > 0
                        ? capacity_words_
                        : (out_.size() - prefix_bytes) / sizeof(word);
    if (!first_taken_ && minimum_words <= capacity) {
      first_taken_ = true;
      return {first(), capacity};
    }
    first_taken_ = true;
    auto words = std::max<size_t>(minimum_words, 1024);
    auto segment = kj::heapArray<word>(words);
    std::memset(segment.begin(), 0, words * sizeof(word));
    auto result = segment.asPtr();
    overflow_.add(kj::mv(segment));
    return result;
  }

  /// Returns the frame iff the message fit in one segment.
  std::optional<frame> finish() {
    auto segments = getSegmentsForOutput();
    if (segments.size() != 1 || segments[0].begin() != first())
      return std::nullopt;
    uint32_t table[2] = {0, static_cast<uint32_t>(segments[0].size())};
    std::memcpy(out_.data() + envelope_bytes, table, sizeof table);
    if (capacity_words_ > 0 &&
        out_.size() != prefix_bytes + segments[0].size() * sizeof(word))
      return std::nullopt; // the payload was not appended where it lies
    out_.resize(prefix_bytes + segments[0].size() * sizeof(word));
    return std::move(out_);
  }

  /// The words of every segment used so far.
  size_t used_words() {
    size_t n = 0;
    for (auto segment : getSegmentsForOutput())
      n += segment.size();
    return n;
  }

private:
  word* first() { return reinterpret_cast<word*>(out_.data() + prefix_bytes); }

  frame out_;
  size_t capacity_words_ = 0; ///< reserving constructor: the segment's room
  bool first_taken_ = false;
  kj::Vector<kj::Array<word>> overflow_;
};

/// Builds a frame: `fill` sets the body of a Frame builder. The frame is
/// always one segment (the wire accepts no other); a size estimate that was
/// too small costs one more build.
template <class Fill> frame build(size_t capacity_words, Fill&& fill) {
  for (;;) {
    frame_builder builder{capacity_words};
    auto root = builder.initRoot<wire::Frame>();
    root.setVersion(wire::PROTOCOL_VERSION);
    fill(root.initBody());
    if (auto f = builder.finish())
      return std::move(*f);
    capacity_words = std::max(builder.used_words(), capacity_words * 2);
  }
}

/// `s` whole, as Cap'n Proto text (a NUL inside is kept, for the reader
/// to refuse, rather than cutting the text there).
capnp::Text::Reader text(const std::string& s) {
  return {s.data(), s.size()};
}

size_t text_words(const std::string& s) {
  return s.size() / sizeof(word) + 2;
}

wire::DType to_wire(dtype t) {
  return static_cast<wire::DType>(static_cast<uint16_t>(t));
}

result<dtype> from_wire(wire::DType t) {
  auto raw = static_cast<uint16_t>(t);
  FEDCAF_REQUIRE(raw <= static_cast<uint16_t>(dtype::boolean),
                 errc::unsupported_dtype, raw);
  return static_cast<dtype>(raw);
}

void put(wire::Metrics::Builder out, const metrics& x) {
  out.setRound(x.round);
  out.setTestAccuracy(x.test_accuracy);
  out.setTestLoss(x.test_loss);
  out.setEvaluated(x.evaluated);
}

metrics get(wire::Metrics::Reader in) {
  return {in.getRound(), in.getTestAccuracy(), in.getTestLoss(),
          in.getEvaluated()};
}

void put(wire::Manifest::Builder out, const manifest& m) {
  auto tensors = out.initTensors(static_cast<uint32_t>(m.tensors.size()));
  for (uint32_t i = 0; i < m.tensors.size(); ++i) {
    const auto& t = m.tensors[i];
    auto b = tensors[i];
    b.setName(t.name);
    b.setDtype(to_wire(t.type));
    auto shape = b.initShape(static_cast<uint32_t>(t.shape.size()));
    for (uint32_t d = 0; d < t.shape.size(); ++d)
      shape.set(d, t.shape[d]);
    b.setByteSize(t.byte_size);
    if (t.held) {
      b.setCarried(true);
      b.setHeld(to_wire(*t.held));
    }
  }
}

size_t manifest_words(const manifest& m) {
  size_t words = 4;
  for (const auto& t : m.tensors)
    words += 7 + text_words(t.name) + t.shape.size();
  return words;
}

result<manifest> get(wire::Manifest::Reader in) {
  manifest m;
  auto count = in.getTensors().size();
  if (count > max_model_tensors) // before a tensor is copied out
    return error{errc::malformed_frame, "a manifest of " +
                                            std::to_string(count) +
                                            " tensors, more than " +
                                            std::to_string(max_model_tensors)};
  m.tensors.reserve(count);
  for (auto t : in.getTensors()) {
    auto type = from_wire(t.getDtype());
    if (!type)
      return type.err();
    std::vector<uint64_t> shape;
    for (auto d : t.getShape())
      shape.push_back(d);
    std::optional<dtype> held;
    if (t.getCarried()) {
      auto h = from_wire(t.getHeld());
      if (!h)
        return h.err();
      held = *h;
    }
    m.tensors.push_back(
        {t.getName().cStr(), *type, std::move(shape), t.getByteSize(), held});
  }
  if (auto ok = validate(m); !ok)
    return ok.err();
  return m;
}

/// Opens a frame for reading: checks size, alignment and version, then runs
/// `read` on the body. Every Cap'n Proto exception becomes an error.
template <class T, class Read>
result<T> read_frame(const frame& f, uint64_t limit_words, Read&& read,
                     bool error_body_fails = true) {
  if (f.size() < prefix_bytes || f.size() % sizeof(word) != 0)
    return error{errc::malformed_frame,
                 "frame of " + std::to_string(f.size()) +
                     " bytes is not a whole number of words"};
  // std::allocator hands out memory aligned for any scalar, so a frame that
  // is not word-aligned did not come from a vector of its own.
  if (reinterpret_cast<uintptr_t>(f.data()) % alignof(word) != 0)
    return error{errc::malformed_frame, "frame is not word-aligned"};
  kj::ArrayPtr<const word> words{
      reinterpret_cast<const word*>(f.data() + envelope_bytes),
      (f.size() - envelope_bytes) / sizeof(word)};
  try {
    capnp::ReaderOptions options;
    options.traversalLimitInWords = limit_words;
    capnp::FlatArrayMessageReader reader{words, options};
    auto root = reader.getRoot<wire::Frame>();
    if (root.getVersion() != wire::PROTOCOL_VERSION)
      return error{errc::unsupported_version,
                   "frame version " + std::to_string(root.getVersion()) +
                       ", this build speaks " +
                       std::to_string(wire::PROTOCOL_VERSION)};
    auto body = root.getBody();
    if (error_body_fails && body.isError()) {
      auto e = body.getError();
      return error{static_cast<errc>(e.getCode()), e.getMessage().cStr()};
    }
    return read(body);
  } catch (const kj::Exception& e) {
    return error{errc::malformed_frame, e.getDescription().cStr()};
  }
}

/// A peer's text as a string; an error iff it holds a NUL byte (which
/// would cut it short where C strings are used: "Client1\0junk" must not
/// pass as Client1).
result<std::string> peer_text(capnp::Text::Reader t, const char* what) {
  std::string out{t.begin(), t.size()};
  if (out.find('\0') != std::string::npos)
    return error{errc::malformed_frame,
                 std::string{what} + " holds a NUL byte"};
  return out;
}

/// An error iff figure `x` of an offer is not finite, or negative where
/// `non_negative`.
result<void> check_figure(double x, const char* what, bool non_negative) {
  if (!std::isfinite(x) || (non_negative && x < 0))
    return error{errc::malformed_frame,
                 std::string{"offer: "} + what + " is " + std::to_string(x)};
  return {};
}

size_t named_words(const named_values& values) {
  size_t words = 1;
  for (const auto& [name, value] : values)
    words += 3 + text_words(name);
  return words;
}

void put(capnp::List<wire::NamedValue>::Builder out,
         const named_values& values) {
  for (size_t i = 0; i < values.size(); ++i) {
    out[i].setName(text(values[i].first));
    out[i].setValue(values[i].second);
  }
}

result<named_values> get(capnp::List<wire::NamedValue>::Reader in,
                         const char* what) {
  if (in.size() > max_named_values)
    return error{errc::malformed_frame,
                 std::string{what} + ": " + std::to_string(in.size()) +
                     " figures, at most " + std::to_string(max_named_values)};
  named_values out;
  for (auto v : in)
    out.emplace_back(std::string{v.getName().begin(), v.getName().size()},
                     v.getValue());
  if (auto ok = check_named_values(out, what); !ok)
    return ok.err();
  return out;
}

error wrong_kind(const char* expected) {
  return {errc::unexpected_message,
          std::string{"expected a "} + expected + " frame"};
}

/// Decodes small frames (everything but chunks) under a fixed traversal limit.
template <class T, class Read>
result<T> read_small(const frame& f, Read&& read) {
  constexpr uint64_t small_limit_words = 8u << 20; // 64 MiB, for manifests
  return read_frame<T>(f, small_limit_words, std::forward<Read>(read));
}

} // namespace

uint32_t request_id(const frame& f) {
  uint32_t id = 0;
  std::memcpy(&id, f.data(), sizeof id);
  return le32toh(id);
}

void set_request_id(frame& f, uint32_t id) {
  id = htole32(id);
  std::memcpy(f.data(), &id, sizeof id);
}

result<frame_kind> kind_of(const frame& f) {
  return read_frame<frame_kind>(
      f, 64,
      [](auto body) -> result<frame_kind> {
        using which = wire::Frame::Body::Which;
        switch (body.which()) {
        case which::HELLO:
          return frame_kind::hello;
        case which::WELCOME:
          return frame_kind::welcome;
        case which::ROUND_START:
          return frame_kind::round_start;
        case which::OFFER:
          return frame_kind::offer;
        case which::ACCEPT:
          return frame_kind::accept;
        case which::CHUNK:
          return frame_kind::chunk;
        case which::CREDIT:
          return frame_kind::credit;
        case which::FETCH:
          return frame_kind::fetch;
        case which::END_OF_STREAM:
          return frame_kind::end_of_stream;
        case which::STREAM_CLOSED:
          return frame_kind::stream_closed;
        case which::DONE:
          return frame_kind::done;
        case which::ERROR:
          return frame_kind::error;
        case which::HEARTBEAT:
          return frame_kind::heartbeat;
        case which::ROUND_OVER:
          return frame_kind::round_over;
        case which::EVALUATION:
          return frame_kind::evaluation;
        case which::SEC_AGG_KEYS:
          return frame_kind::secagg_keys;
        case which::SEC_AGG_ROSTER:
          return frame_kind::secagg_roster;
        case which::SEC_AGG_SHARES:
          return frame_kind::secagg_shares;
        case which::SEC_AGG_UNMASK:
          return frame_kind::secagg_unmask;
        case which::SEC_AGG_RECEIPT:
          return frame_kind::secagg_receipt;
        case which::GOODBYE:
          return frame_kind::goodbye;
        }
        return error{errc::unexpected_message, "a frame of an unknown kind"};
      },
      false);
}

const char* frame_kind_name(frame_kind k) {
  switch (k) {
  case frame_kind::hello:
    return "hello";
  case frame_kind::welcome:
    return "welcome";
  case frame_kind::round_start:
    return "round start";
  case frame_kind::offer:
    return "offer";
  case frame_kind::accept:
    return "accept";
  case frame_kind::chunk:
    return "chunk";
  case frame_kind::credit:
    return "credit";
  case frame_kind::fetch:
    return "fetch";
  case frame_kind::end_of_stream:
    return "end of stream";
  case frame_kind::stream_closed:
    return "stream closed";
  case frame_kind::done:
    return "done";
  case frame_kind::error:
    return "error";
  case frame_kind::heartbeat:
    return "heartbeat";
  case frame_kind::round_over:
    return "round over";
  case frame_kind::evaluation:
    return "evaluation";
  case frame_kind::secagg_keys:
    return "secagg keys";
  case frame_kind::secagg_roster:
    return "secagg roster";
  case frame_kind::secagg_shares:
    return "secagg shares";
  case frame_kind::secagg_unmask:
    return "secagg unmask";
  case frame_kind::secagg_receipt:
    return "secagg receipt";
  case frame_kind::goodbye:
    return "goodbye";
  }
  return "unknown";
}

result<void> check_named_values(const named_values& values, const char* what) {
  auto bad = [&](const std::string& why) {
    return error{errc::malformed_frame, std::string{what} + ": " + why};
  };
  if (values.size() > max_named_values)
    return bad(std::to_string(values.size()) + " figures, at most " +
               std::to_string(max_named_values));
  std::set<std::string_view> seen;
  for (const auto& [name, value] : values) {
    bool allowed = !name.empty() && name.size() <= 64 &&
                   std::all_of(name.begin(), name.end(), [](char c) {
                     return std::isalnum(static_cast<unsigned char>(c)) ||
                            c == '_' || c == '.' || c == '/' || c == '-';
                   });
    if (!allowed)
      return bad("a figure's name must be 1 to 64 characters of "
                 "[A-Za-z0-9_./-]");
    if (!seen.insert(name).second)
      return bad("figure '" + name + "' appears twice");
    if (!(std::abs(value) <= max_figure_magnitude)) // NaN too
      return bad("figure '" + name + "' is " + std::to_string(value) +
                 ", outside [-1e12, 1e12]");
  }
  return {};
}

uint16_t protocol_version() {
  return wire::PROTOCOL_VERSION;
}

uint64_t checksum(std::span<const std::byte> bytes) {
  // The dispatching entry point runs the widest vector unit this CPU has
  // (AVX2 or AVX-512): about five times the speed of the baseline build.
  return XXH3_64bits_dispatch(bytes.data(), bytes.size());
}

// -- encoders -----------------------------------------------------------------

frame encode(const hello& x) {
  uint64_t words = 8 + text_words(x.client_id) + text_words(x.token);
  for (const auto& s : x.shard.slices)
    words += 4 + text_words(s.tensor);
  return build(words, [&](auto body) {
    auto b = body.initHello();
    b.setClientId(text(x.client_id));
    b.setToken(text(x.token));
    if (!x.shard.sharded())
      return;
    b.setShardRank(x.shard.rank);
    b.setShardRanks(x.shard.ranks);
    auto slices = b.initSlices(static_cast<unsigned>(x.shard.slices.size()));
    for (unsigned i = 0; i < x.shard.slices.size(); ++i) {
      const auto& s = x.shard.slices[i];
      slices[i].setTensor(text(s.tensor));
      slices[i].setBeginRow(s.begin_row);
      slices[i].setEndRow(s.end_row);
    }
  });
}

frame encode(const welcome& x) {
  return build(16 + text_words(x.client_configs), [&](auto body) {
    auto b = body.initWelcome();
    b.setClientIndex(x.client_index);
    b.setNumClients(x.num_clients);
    b.setClientConfigs(x.client_configs);
    const auto& t = x.terms;
    b.setHeartbeatMs(t.heartbeat_ms);
    b.setConnectionTimeoutMs(t.connection_timeout_ms);
    b.setIdleTimeoutMs(t.idle_timeout_ms);
    b.setReconnectGraceMs(t.reconnect_grace_ms);
    b.setMaxMessageBytes(t.max_message_bytes);
    b.setFederatedEvaluation(t.federated_evaluation);
    b.setDeclareUpdateNorm(t.declare_update_norm);
    b.setUpdateClipNorm(t.update_clip_norm);
    b.setUploadEncoding(t.upload_encoding);
    b.setDownloadEncoding(t.download_encoding);
    b.setZfpTolerance(t.zfp_tolerance);
    b.setGridSums(t.grid_sums);
    b.setChunkFloatSums(t.chunk_float_sums);
    b.setResumed(x.resumed);
  });
}

frame encode(const round_start& x) {
  return build(16 + manifest_words(x.model), [&](auto body) {
    auto b = body.initRoundStart();
    b.setRound(x.round);
    b.setModelVersion(x.model_version);
    put(b.initManifest(), x.model);
    b.setChunkBytes(x.chunk_bytes);
    b.setWindow(x.window);
    put(b.initPrevious(), x.previous);
    b.setResend(x.resend);
    b.setEvaluateOnly(x.evaluate_only);
    b.setSecureAggregation(x.secure_aggregation);
  });
}

frame encode(const offer& x) {
  return build(
      16 + text_words(x.client_id) + named_words(x.metrics), [&](auto body) {
        auto b = body.initOffer();
        b.setRound(x.round);
        b.setClientId(text(x.client_id));
        b.setSampleCount(x.sample_count);
        b.setManifestDigest(x.manifest_digest);
        b.setTotalBytes(x.total_bytes);
        b.setChunkCount(x.chunk_count);
        b.setTrainLoss(x.train_loss);
        b.setTrainSeconds(x.train_seconds);
        b.setDpEpsilon(x.dp_epsilon);
        b.setEncoding(x.encoding);
        b.setUpdateNorm(x.update_norm);
        b.setPartialSum(x.partial_sum);
        b.setUpdateId(x.update_id);
        b.setGridSums(x.grid_sums);
        put(b.initMetrics(static_cast<uint32_t>(x.metrics.size())), x.metrics);
      });
}

frame encode(const evaluation& x) {
  return build(8 + named_words(x.metrics), [&](auto body) {
    auto b = body.initEvaluation();
    b.setRound(x.round);
    b.setSampleCount(x.sample_count);
    put(b.initMetrics(static_cast<uint32_t>(x.metrics.size())), x.metrics);
  });
}

namespace {

capnp::Data::Reader data_of(std::span<const uint8_t> bytes) {
  return {bytes.data(), bytes.size()};
}

void put(capnp::List<wire::RevealedShare>::Builder list,
         const std::vector<revealed_share>& shares) {
  for (uint32_t i = 0; i < list.size(); ++i) {
    list[i].setOwner(shares[i].owner);
    list[i].setX(shares[i].x);
    list[i].setY(data_of(shares[i].y));
  }
}

} // namespace

frame encode(const secagg_keys& x) {
  return build(32, [&](auto body) {
    auto b = body.initSecAggKeys();
    b.setRound(x.round);
    b.setShareKey(data_of(x.share_key));
    b.setMaskKey(data_of(x.mask_key));
    b.setSampleCount(x.sample_count);
    b.setSelfSeedCommitment(data_of(x.self_seed_commitment));
  });
}

frame encode(const secagg_roster& x) {
  size_t words = 16;
  for (const auto& p : x.neighbours)
    words += 16 + p.client_id.size() / 8;
  return build(words, [&](auto body) {
    auto b = body.initSecAggRoster();
    b.setRound(x.round);
    b.setIndex(x.index);
    b.setWeight(x.weight);
    b.setThreshold(x.threshold);
    b.setClippingRange(x.clipping_range);
    b.setQuantizationBits(x.quantization_bits);
    auto list = b.initNeighbours(static_cast<uint32_t>(x.neighbours.size()));
    for (uint32_t i = 0; i < list.size(); ++i) {
      const auto& p = x.neighbours[i];
      list[i].setIndex(p.index);
      list[i].setClientId(text(p.client_id));
      list[i].setShareKey(data_of(p.share_key));
      list[i].setMaskKey(data_of(p.mask_key));
    }
  });
}

frame encode(const secagg_shares& x) {
  size_t words = 8;
  for (const auto& sh : x.shares)
    words += 4 + sh.sealed.size() / 8;
  return build(words, [&](auto body) {
    auto b = body.initSecAggShares();
    b.setRound(x.round);
    auto list = b.initShares(static_cast<uint32_t>(x.shares.size()));
    for (uint32_t i = 0; i < list.size(); ++i) {
      list[i].setPeer(x.shares[i].peer);
      list[i].setSealed(data_of(x.shares[i].sealed));
    }
  });
}

frame encode(const secagg_receipt& x) {
  auto words = 12 +
               (x.unopened.size() + x.excluded.size() + x.disputed.size()) / 2 +
               7 * x.share_secrets.size();
  return build(words, [&](auto body) {
    auto b = body.initSecAggReceipt();
    b.setRound(x.round);
    auto unopened = b.initUnopened(static_cast<uint32_t>(x.unopened.size()));
    for (uint32_t i = 0; i < unopened.size(); ++i)
      unopened.set(i, x.unopened[i]);
    auto excluded = b.initExcluded(static_cast<uint32_t>(x.excluded.size()));
    for (uint32_t i = 0; i < excluded.size(); ++i)
      excluded.set(i, x.excluded[i]);
    auto disputed = b.initDisputed(static_cast<uint32_t>(x.disputed.size()));
    for (uint32_t i = 0; i < disputed.size(); ++i)
      disputed.set(i, x.disputed[i]);
    auto secrets =
        b.initShareSecrets(static_cast<uint32_t>(x.share_secrets.size()));
    for (uint32_t i = 0; i < secrets.size(); ++i) {
      secrets[i].setPeer(x.share_secrets[i].peer);
      secrets[i].setSecret(data_of(x.share_secrets[i].secret));
    }
  });
}

frame encode(const secagg_unmask& x) {
  auto words = 16 + (x.in_sum.size() + x.dropped.size()) / 2 +
               8 * (x.self_seed_shares.size() + x.mask_key_shares.size());
  return build(words, [&](auto body) {
    auto b = body.initSecAggUnmask();
    b.setRound(x.round);
    auto in_sum = b.initInSum(static_cast<uint32_t>(x.in_sum.size()));
    for (uint32_t i = 0; i < in_sum.size(); ++i)
      in_sum.set(i, x.in_sum[i]);
    auto dropped = b.initDropped(static_cast<uint32_t>(x.dropped.size()));
    for (uint32_t i = 0; i < dropped.size(); ++i)
      dropped.set(i, x.dropped[i]);
    put(b.initSelfSeedShares(static_cast<uint32_t>(x.self_seed_shares.size())),
        x.self_seed_shares);
    put(b.initMaskKeyShares(static_cast<uint32_t>(x.mask_key_shares.size())),
        x.mask_key_shares);
  });
}

frame encode(const accept& x) {
  return build(12, [&](auto body) {
    auto b = body.initAccept();
    b.setStreamId(x.stream_id);
    b.setWindow(x.window);
    b.setNextSequence(x.next_sequence);
    b.setFirstUnacknowledged(x.first_unacknowledged);
  });
}

frame encode(const credit& x) {
  return build(8, [&](auto body) {
    auto b = body.initCredit();
    b.setStreamId(x.stream_id);
    b.setSequence(x.sequence);
  });
}

frame encode(const fetch& x) {
  return build(8, [&](auto body) {
    auto b = body.initFetch();
    b.setRound(x.round);
    b.setModelVersion(x.model_version);
    b.setSequence(x.sequence);
  });
}

frame encode(const end_of_stream& x) {
  return build(8, [&](auto body) {
    auto b = body.initEndOfStream();
    b.setStreamId(x.stream_id);
    b.setChunkCount(x.chunk_count);
  });
}

frame encode(const stream_closed& x) {
  return build(8, [&](auto body) {
    auto b = body.initStreamClosed();
    b.setStreamId(x.stream_id);
    b.setBytesReceived(x.bytes_received);
  });
}

frame encode(const done& x) {
  return build(16 + text_words(x.reason), [&](auto body) {
    auto b = body.initDone();
    b.setRounds(x.rounds);
    put(b.initFinal(), x.final);
    b.setReason(x.reason);
  });
}

frame encode(const round_over& x) {
  return build(4, [&](auto body) { body.initRoundOver().setRound(x.round); });
}

namespace {

/// Each goodbye reason's name (a token) and how a log line says it, in the
/// enum's order (a value past it, from a newer peer, reads as other).
constexpr std::pair<const char*, const char*> goodbye_words[] = {
    {"interrupted", "interrupted"},
    {"terminated", "terminated"},
    {"user_exception", "an exception in its own code"},
    {"wrong_model", "a wrong model"},
    {"other", "other"}};
static_assert(static_cast<size_t>(goodbye_reason::other) + 1 ==
              std::size(goodbye_words));

const std::pair<const char*, const char*>& words_of(goodbye_reason r) {
  auto i = static_cast<size_t>(r);
  return goodbye_words[std::min(i, std::size(goodbye_words) - 1)];
}

} // namespace

const char* name_of(goodbye_reason r) {
  return words_of(r).first;
}

const char* to_string(goodbye_reason r) {
  return words_of(r).second;
}

goodbye goodbye_for(const error& e) {
  auto wrong =
      e.code == errc::manifest_mismatch || e.code == errc::unsupported_dtype;
  return {wrong ? goodbye_reason::wrong_model : goodbye_reason::other,
          to_string(e)};
}

std::string said_why(const goodbye& g) {
  std::string out = to_string(g.reason);
  if (g.detail.empty())
    return out;
  out += ": ";
  for (char c : g.detail)
    out += static_cast<unsigned char>(c) < 0x20 || c == 0x7f ? '?' : c;
  return out;
}

frame encode(const goodbye& x) {
  auto detail = x.detail.substr(0, max_goodbye_detail);
  return build(6 + text_words(detail), [&](auto body) {
    auto b = body.initGoodbye();
    b.setReason(static_cast<wire::Goodbye::Reason>(x.reason));
    b.setDetail(detail);
  });
}

frame encode_heartbeat() {
  return build(4, [](auto body) { body.initHeartbeat(); });
}

frame encode(const error& x) {
  return build(8 + text_words(x.message), [&](auto body) {
    auto b = body.initError();
    b.setCode(static_cast<uint16_t>(x.code));
    b.setMessage(x.message);
  });
}

namespace {

/// Sets a Chunk's header fields and makes room for its `payload_bytes`;
/// returns that room.
std::span<std::byte> init_chunk(wire::Chunk::Builder b, const chunk_header& h,
                                size_t payload_bytes) {
  b.setStreamId(h.stream_id);
  b.setRound(h.round);
  b.setSequence(h.sequence);
  b.setTensorIndex(h.tensor_index);
  b.setTensorOffset(h.byte_offset);
  b.setFloatSums(h.float_sums);
  auto data = b.initBytes(static_cast<uint32_t>(payload_bytes));
  return {reinterpret_cast<std::byte*>(data.begin()), data.size()};
}

} // namespace

frame encode_chunk(const chunk_header& h, size_t payload_bytes,
                   const std::function<void(std::span<std::byte>)>& fill) {
  auto payload_words = (payload_bytes + sizeof(word) - 1) / sizeof(word);
  return build(16 + payload_words, [&](auto body) {
    auto b = body.initChunk();
    auto bytes = init_chunk(b, h, payload_bytes);
    fill(bytes);
    b.setChecksum(checksum(bytes));
  });
}

frame encode_chunk_gathered(
    const chunk_header& h, size_t payload_bytes,
    const std::function<void(const chunk_append&)>& gather,
    const std::function<void(std::span<std::byte>)>& then) {
  // The Chunk's words come before its bytes and take fewer than 32 words.
  constexpr size_t head_words = 32;
  auto payload_words = (payload_bytes + sizeof(word) - 1) / sizeof(word);
  frame_builder builder{head_words + payload_words, head_words};
  auto root = builder.initRoot<wire::Frame>();
  root.setVersion(wire::PROTOCOL_VERSION);
  auto b = root.initBody().initChunk();
  auto bytes = init_chunk(b, h, payload_bytes);
  if (builder.append_payload(bytes.data(), bytes.size(), gather)) {
    if (then)
      then(bytes);
    b.setChecksum(checksum(bytes));
    if (auto f = builder.finish())
      return std::move(*f);
  }
  // Not laid out as expected: the zero-filled way, gathered into place.
  return encode_chunk(h, payload_bytes, [&](std::span<std::byte> dst) {
    size_t at = 0;
    gather([&](std::span<const std::byte> piece) {
      auto n = std::min(piece.size(), dst.size() - at);
      std::memcpy(dst.data() + at, piece.data(), n);
      at += n;
    });
    if (then)
      then(dst);
  });
}

// -- decoders -----------------------------------------------------------------

template <> result<hello> decode<hello>(const frame& f) {
  return read_small<hello>(f, [](auto body) -> result<hello> {
    if (!body.isHello())
      return wrong_kind("hello");
    auto b = body.getHello();
    auto id = peer_text(b.getClientId(), "hello: client id");
    if (!id)
      return id.err();
    if (auto ok = check_client_id(*id); !ok)
      return error{errc::malformed_frame, "hello: " + ok.err().message};
    auto token = peer_text(b.getToken(), "hello: token");
    if (!token)
      return token.err();
    hello h{std::move(*id), std::move(*token)};
    auto ranks = b.getShardRanks();
    if (ranks <= 1 && b.getShardRank() == 0 && b.getSlices().size() == 0)
      return h;
    if (ranks <= 1 || b.getShardRank() >= ranks || ranks > max_shard_ranks)
      return error{errc::malformed_frame,
                   "hello: shard rank " + std::to_string(b.getShardRank()) +
                       " of " + std::to_string(ranks) + " (a rank of 2 to " +
                       std::to_string(max_shard_ranks) + " ranks, from 0)"};
    h.shard.rank = b.getShardRank();
    h.shard.ranks = ranks;
    auto slices = b.getSlices();
    if (slices.size() > max_model_tensors)
      return error{errc::malformed_frame, "hello: more shard slices than a "
                                          "model has tensors"};
    for (auto s : slices) {
      auto name = peer_text(s.getTensor(), "hello: shard slice tensor");
      if (!name)
        return name.err();
      h.shard.slices.push_back(
          {std::move(*name), s.getBeginRow(), s.getEndRow()});
    }
    return h;
  });
}

template <> result<welcome> decode<welcome>(const frame& f) {
  return read_small<welcome>(f, [](auto body) -> result<welcome> {
    if (!body.isWelcome())
      return wrong_kind("welcome");
    auto b = body.getWelcome();
    client_terms t{b.getHeartbeatMs(),       b.getConnectionTimeoutMs(),
                   b.getIdleTimeoutMs(),     b.getReconnectGraceMs(),
                   b.getMaxMessageBytes(),   b.getFederatedEvaluation(),
                   b.getDeclareUpdateNorm(), b.getUpdateClipNorm(),
                   b.getUploadEncoding(),    b.getDownloadEncoding(),
                   b.getZfpTolerance(),      b.getGridSums(),
                   b.getChunkFloatSums()};
    return welcome{b.getClientIndex(), b.getNumClients(),
                   b.getClientConfigs().cStr(), t, b.getResumed()};
  });
}

template <> result<round_start> decode<round_start>(const frame& f) {
  return read_small<round_start>(f, [](auto body) -> result<round_start> {
    if (!body.isRoundStart())
      return wrong_kind("round start");
    auto b = body.getRoundStart();
    auto m = get(b.getManifest());
    if (!m)
      return m.err();
    return round_start{
        b.getRound(),      b.getModelVersion(), std::move(*m),
        b.getChunkBytes(), b.getWindow(),       get(b.getPrevious()),
        b.getResend(),     b.getEvaluateOnly(), b.getSecureAggregation()};
  });
}

template <> result<offer> decode<offer>(const frame& f) {
  return read_small<offer>(f, [](auto body) -> result<offer> {
    if (!body.isOffer())
      return wrong_kind("offer");
    auto b = body.getOffer();
    auto id = peer_text(b.getClientId(), "offer: client id");
    if (!id)
      return id.err();
    for (auto ok : {check_figure(b.getTrainLoss(), "train loss", false),
                    check_figure(b.getTrainSeconds(), "train seconds", true),
                    check_figure(b.getDpEpsilon(), "DP epsilon", true),
                    check_figure(b.getUpdateNorm(), "update norm", true)})
      if (!ok)
        return ok.err();
    auto figures = get(b.getMetrics(), "offer");
    if (!figures)
      return figures.err();
    return offer{b.getRound(),          std::move(*id),      b.getSampleCount(),
                 b.getManifestDigest(), b.getTotalBytes(),   b.getChunkCount(),
                 b.getTrainLoss(),      b.getTrainSeconds(), b.getDpEpsilon(),
                 std::move(*figures),   b.getEncoding(),     b.getUpdateNorm(),
                 b.getPartialSum(),     b.getUpdateId(),     b.getGridSums()};
  });
}

template <> result<accept> decode<accept>(const frame& f) {
  return read_small<accept>(f, [](auto body) -> result<accept> {
    if (!body.isAccept())
      return wrong_kind("accept");
    auto b = body.getAccept();
    if (b.getFirstUnacknowledged() > b.getNextSequence())
      return error{errc::bad_sequence, "accept owes credits for chunks "
                                       "not sent"};
    return accept{b.getStreamId(), b.getWindow(), b.getNextSequence(),
                  b.getFirstUnacknowledged()};
  });
}

template <> result<credit> decode<credit>(const frame& f) {
  return read_small<credit>(f, [](auto body) -> result<credit> {
    if (!body.isCredit())
      return wrong_kind("credit");
    auto b = body.getCredit();
    return credit{b.getStreamId(), b.getSequence()};
  });
}

template <> result<fetch> decode<fetch>(const frame& f) {
  return read_small<fetch>(f, [](auto body) -> result<fetch> {
    if (!body.isFetch())
      return wrong_kind("fetch");
    auto b = body.getFetch();
    return fetch{b.getRound(), b.getModelVersion(), b.getSequence()};
  });
}

template <> result<end_of_stream> decode<end_of_stream>(const frame& f) {
  return read_small<end_of_stream>(f, [](auto body) -> result<end_of_stream> {
    if (!body.isEndOfStream())
      return wrong_kind("end of stream");
    auto b = body.getEndOfStream();
    return end_of_stream{b.getStreamId(), b.getChunkCount()};
  });
}

template <> result<stream_closed> decode<stream_closed>(const frame& f) {
  return read_small<stream_closed>(f, [](auto body) -> result<stream_closed> {
    if (!body.isStreamClosed())
      return wrong_kind("stream closed");
    auto b = body.getStreamClosed();
    return stream_closed{b.getStreamId(), b.getBytesReceived()};
  });
}

template <> result<round_over> decode<round_over>(const frame& f) {
  return read_small<round_over>(f, [](auto body) -> result<round_over> {
    if (!body.isRoundOver())
      return wrong_kind("round over");
    return round_over{body.getRoundOver().getRound()};
  });
}

template <> result<goodbye> decode<goodbye>(const frame& f) {
  return read_small<goodbye>(f, [](auto body) -> result<goodbye> {
    if (!body.isGoodbye())
      return wrong_kind("goodbye");
    auto b = body.getGoodbye();
    auto reason = static_cast<uint16_t>(b.getReason());
    if (reason > static_cast<uint16_t>(goodbye_reason::other))
      reason = static_cast<uint16_t>(goodbye_reason::other); // a newer one
    auto detail = peer_text(b.getDetail(), "goodbye: detail");
    if (!detail)
      return detail.err();
    if (detail->size() > max_goodbye_detail)
      return error{errc::malformed_frame,
                   "goodbye: a detail of " + std::to_string(detail->size()) +
                       " bytes, at most " + std::to_string(max_goodbye_detail)};
    return goodbye{static_cast<goodbye_reason>(reason), std::move(*detail)};
  });
}

template <> result<evaluation> decode<evaluation>(const frame& f) {
  return read_small<evaluation>(f, [](auto body) -> result<evaluation> {
    if (!body.isEvaluation())
      return wrong_kind("evaluation");
    auto b = body.getEvaluation();
    if (b.getSampleCount() > max_evaluation_samples)
      return error{errc::malformed_frame,
                   "evaluation: " + std::to_string(b.getSampleCount()) +
                       " samples, at most 2^40"};
    auto figures = get(b.getMetrics(), "evaluation");
    if (!figures)
      return figures.err();
    return evaluation{b.getRound(), b.getSampleCount(), std::move(*figures)};
  });
}

template <> result<done> decode<done>(const frame& f) {
  return read_small<done>(f, [](auto body) -> result<done> {
    if (!body.isDone())
      return wrong_kind("done");
    auto b = body.getDone();
    return done{b.getRounds(), get(b.getFinal()), b.getReason().cStr()};
  });
}

namespace {

/// A 32-byte key or share value, or an error naming `what`.
result<key_bytes> key_of(capnp::Data::Reader d, const std::string& what) {
  if (d.size() != 32)
    return error{errc::malformed_frame, what + ": " + std::to_string(d.size()) +
                                            " bytes, expected 32"};
  key_bytes k{};
  std::memcpy(k.data(), d.begin(), 32);
  return k;
}

/// An error iff a list of `n` entries is longer than a round's neighbours.
result<void> check_count(size_t n, const char* what) {
  if (n > max_secagg_neighbours)
    return error{errc::malformed_frame,
                 std::string{what} + ": " + std::to_string(n) +
                     " entries, at most " +
                     std::to_string(max_secagg_neighbours)};
  return {};
}

result<std::vector<uint32_t>> indices(capnp::List<uint32_t>::Reader list,
                                      const char* what) {
  if (auto ok = check_count(list.size(), what); !ok)
    return ok.err();
  std::vector<uint32_t> out;
  out.reserve(list.size());
  for (auto i : list)
    out.push_back(i);
  return out;
}

result<std::vector<revealed_share>>
revealed(capnp::List<wire::RevealedShare>::Reader list, const char* what) {
  if (auto ok = check_count(list.size(), what); !ok)
    return ok.err();
  std::vector<revealed_share> out;
  for (auto r : list) {
    if (r.getX() == 0)
      return error{errc::malformed_frame, std::string{what} + ": x is 0"};
    auto y = key_of(r.getY(), what);
    if (!y)
      return y.err();
    out.push_back({r.getOwner(), r.getX(), *y});
  }
  return out;
}

} // namespace

template <> result<secagg_keys> decode<secagg_keys>(const frame& f) {
  return read_small<secagg_keys>(f, [](auto body) -> result<secagg_keys> {
    if (!body.isSecAggKeys())
      return wrong_kind("secagg keys");
    auto b = body.getSecAggKeys();
    auto share = key_of(b.getShareKey(), "secagg keys: share key");
    if (!share)
      return share.err();
    auto mask = key_of(b.getMaskKey(), "secagg keys: mask key");
    if (!mask)
      return mask.err();
    auto commitment =
        key_of(b.getSelfSeedCommitment(), "secagg keys: self-seed commitment");
    if (!commitment)
      return commitment.err();
    return secagg_keys{b.getRound(), *share, *mask, b.getSampleCount(),
                       *commitment};
  });
}

template <> result<secagg_roster> decode<secagg_roster>(const frame& f) {
  return read_small<secagg_roster>(f, [](auto body) -> result<secagg_roster> {
    if (!body.isSecAggRoster())
      return wrong_kind("secagg roster");
    auto b = body.getSecAggRoster();
    auto bad = [](const std::string& why) {
      return error{errc::malformed_frame, "secagg roster: " + why};
    };
    if (!(b.getWeight() >= 0 && b.getWeight() <= 1))
      return bad("weight " + std::to_string(b.getWeight()));
    if (!(std::isfinite(b.getClippingRange()) && b.getClippingRange() > 0))
      return bad("clipping range " + std::to_string(b.getClippingRange()));
    if (b.getQuantizationBits() < 1 || b.getQuantizationBits() > 31)
      return bad(std::to_string(b.getQuantizationBits()) +
                 " quantization bits, expected 1 to 31");
    auto list = b.getNeighbours();
    if (auto ok = check_count(list.size(), "secagg roster"); !ok)
      return ok.err();
    if (b.getThreshold() < 1 || b.getThreshold() > list.size() + 1)
      return bad("threshold " + std::to_string(b.getThreshold()) + " of " +
                 std::to_string(list.size()) + " neighbours");
    secagg_roster r{b.getRound(),
                    b.getIndex(),
                    b.getWeight(),
                    b.getThreshold(),
                    b.getClippingRange(),
                    b.getQuantizationBits(),
                    {}};
    for (auto p : list) {
      if (!r.neighbours.empty() && p.getIndex() <= r.neighbours.back().index)
        return bad("neighbours not sorted by index");
      auto id = peer_text(p.getClientId(), "secagg roster: client id");
      auto share = key_of(p.getShareKey(), "secagg roster: share key");
      auto mask = key_of(p.getMaskKey(), "secagg roster: mask key");
      if (!id || !share || !mask)
        return !id ? id.err() : !share ? share.err() : mask.err();
      r.neighbours.push_back({p.getIndex(), std::move(*id), *share, *mask});
    }
    return r;
  });
}

template <> result<secagg_shares> decode<secagg_shares>(const frame& f) {
  return read_small<secagg_shares>(f, [](auto body) -> result<secagg_shares> {
    if (!body.isSecAggShares())
      return wrong_kind("secagg shares");
    auto b = body.getSecAggShares();
    auto list = b.getShares();
    if (auto ok = check_count(list.size(), "secagg shares"); !ok)
      return ok.err();
    secagg_shares out{b.getRound(), {}};
    for (auto sh : list) {
      auto d = sh.getSealed();
      if (d.size() != sealed_share_bytes)
        return error{errc::malformed_frame,
                     "secagg shares: a sealed share of " +
                         std::to_string(d.size()) + " bytes, expected " +
                         std::to_string(sealed_share_bytes)};
      out.shares.push_back({sh.getPeer(), {d.begin(), d.end()}});
    }
    return out;
  });
}

template <> result<secagg_receipt> decode<secagg_receipt>(const frame& f) {
  return read_small<secagg_receipt>(f, [](auto body) -> result<secagg_receipt> {
    if (!body.isSecAggReceipt())
      return wrong_kind("secagg receipt");
    auto b = body.getSecAggReceipt();
    auto unopened = indices(b.getUnopened(), "secagg receipt: unopened");
    auto excluded = indices(b.getExcluded(), "secagg receipt: excluded");
    auto disputed = indices(b.getDisputed(), "secagg receipt: disputed");
    if (!unopened || !excluded || !disputed)
      return !unopened   ? unopened.err()
             : !excluded ? excluded.err()
                         : disputed.err();
    auto list = b.getShareSecrets();
    if (auto ok = check_count(list.size(), "secagg receipt: share secrets");
        !ok)
      return ok.err();
    std::vector<share_secret> secrets;
    for (auto x : list) {
      auto secret = key_of(x.getSecret(), "secagg receipt: share secret");
      if (!secret)
        return secret.err();
      secrets.push_back({x.getPeer(), *secret});
    }
    return secagg_receipt{b.getRound(), std::move(*unopened),
                          std::move(*excluded), std::move(*disputed),
                          std::move(secrets)};
  });
}

template <> result<secagg_unmask> decode<secagg_unmask>(const frame& f) {
  return read_small<secagg_unmask>(f, [](auto body) -> result<secagg_unmask> {
    if (!body.isSecAggUnmask())
      return wrong_kind("secagg unmask");
    auto b = body.getSecAggUnmask();
    auto in_sum = indices(b.getInSum(), "secagg unmask: in sum");
    auto dropped = indices(b.getDropped(), "secagg unmask: dropped");
    auto self = revealed(b.getSelfSeedShares(), "secagg unmask: self seeds");
    auto keys = revealed(b.getMaskKeyShares(), "secagg unmask: mask keys");
    if (!in_sum || !dropped)
      return !in_sum ? in_sum.err() : dropped.err();
    if (!self || !keys)
      return !self ? self.err() : keys.err();
    return secagg_unmask{b.getRound(), std::move(*in_sum), std::move(*dropped),
                         std::move(*self), std::move(*keys)};
  });
}

result<chunk_view> decode_chunk(const frame& f, uint64_t max_chunk_bytes) {
  auto limit_words = max_chunk_bytes / sizeof(word) + 64;
  return read_frame<chunk_view>(
      f, limit_words, [&](auto body) -> result<chunk_view> {
        if (!body.isChunk())
          return wrong_kind("chunk");
        auto b = body.getChunk();
        auto data = b.getBytes();
        FEDCAF_REQUIRE(data.size() <= max_chunk_bytes, errc::out_of_range,
                       data.size(), max_chunk_bytes);
        auto bytes = std::span<const std::byte>{
            reinterpret_cast<const std::byte*>(data.begin()), data.size()};
        auto sum = checksum(bytes);
        FEDCAF_REQUIRE(sum == b.getChecksum(), errc::bad_checksum, sum,
                       b.getChecksum());
        chunk_header h{b.getStreamId(),     b.getRound(),
                       b.getSequence(),     b.getTensorIndex(),
                       b.getTensorOffset(), b.getFloatSums()};
        return chunk_view{h, bytes, sum};
      });
}

std::optional<error> error_in(const frame& f) {
  auto k = kind_of(f);
  if (!k || *k != frame_kind::error)
    return std::nullopt;
  auto e = decode<round_over>(f); // an error frame decodes to its error
  return e ? std::nullopt : std::optional<error>{e.err()};
}

} // namespace fedcaf::msg
