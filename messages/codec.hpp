#pragma once
// Plain C++ values for every frame of the wire format (messages/fedcaf.capnp)
// and the codecs that turn them into frames and back. Generated Cap'n Proto
// names never leave messages/. Decoders never throw: a frame that is
// truncated, of another version, of the wrong kind or inconsistent becomes an
// error value. Thread-safety: free functions over values; safe anywhere.

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "fedcaf/error.hpp"
#include "fedcaf/manifest.hpp"
#include "fedcaf/shard.hpp"

namespace fedcaf::msg {

/// One encoded message exactly as it travels on the wire: an 8-byte envelope
/// (request id, flags; little-endian u32 each), then a single-segment Cap'n
/// Proto message in the standard stream framing (docs/protocol.md). In one
/// process CAF carries it as a built-in type (a moved vector: no copy).
using frame = std::vector<char>;

/// Bytes of the envelope before the Cap'n Proto message.
constexpr size_t envelope_bytes = 8;
/// Bytes a reader needs to know a frame's size: envelope and segment table.
constexpr size_t frame_header_bytes = 16;

/// Returns the request id in `f`'s envelope (0: unsolicited).
/// REQUIRES: f.size() >= envelope_bytes.
uint32_t request_id(const frame& f);
/// Sets the request id in `f`'s envelope. REQUIRES: f.size() >=
/// envelope_bytes.
void set_request_id(frame& f, uint32_t id);

/// The kinds of frame. Peers may send the server only hello, fetch, offer,
/// chunk, end_of_stream, credit, evaluation, secagg_keys, secagg_shares,
/// secagg_receipt, secagg_unmask, goodbye and heartbeat.
enum class frame_kind : uint8_t {
  hello,
  welcome,
  round_start,
  offer,
  accept,
  chunk,
  credit,
  fetch,
  end_of_stream,
  stream_closed,
  done,
  error,
  heartbeat,
  round_over,
  evaluation,
  secagg_keys,
  secagg_roster,
  secagg_shares,
  secagg_unmask,
  secagg_receipt,
  goodbye,
};

/// Returns the kind of `f` without decoding its body, or an error iff it is
/// malformed or of another protocol version.
result<frame_kind> kind_of(const frame& f);

/// Returns the name of kind `k` as refusals and log lines say it ("end of
/// stream"); "unknown" iff `k` is none of frame_kind.
const char* frame_kind_name(frame_kind k);

/// Returns the error an error frame carries; nothing iff `f` is not an
/// error frame.
std::optional<error> error_in(const frame& f);

/// The protocol version this build speaks.
uint16_t protocol_version();

/// Evaluation of a global model.
struct metrics {
  uint32_t round = 0;
  double test_accuracy = 0;
  double test_loss = 0;
  bool evaluated = false;
};

/// Figures a client reports by name (Offer.metrics, Evaluation.metrics).
/// Decoders refuse more than max_named_values, a name that is empty, over
/// 64 bytes, outside [A-Za-z0-9_./-] or repeated, and a value not within
/// +-max_figure_magnitude (so that sums weighted by samples stay finite).
using named_values = std::vector<std::pair<std::string, double>>;
constexpr size_t max_named_values = 32;
constexpr double max_figure_magnitude = 1e12;

/// An offer's training loss as a round counts it: decoders only require it
/// finite, and a round sums its clients' losses (weighted), so each counts
/// within +-max_figure_magnitude.
inline double bounded_loss(double loss) {
  return std::clamp(loss, -max_figure_magnitude, max_figure_magnitude);
}

/// Returns ok iff `values` may be sent (the rules above).
result<void> check_named_values(const named_values& values, const char* what);

/// A client's evaluation of the global model of `round` on its own data.
struct evaluation {
  uint32_t round = 0; ///< the round that published the model; 0: initial
  uint64_t sample_count = 0;
  named_values metrics{};
};

/// The most samples an Evaluation may claim.
constexpr uint64_t max_evaluation_samples = uint64_t{1} << 40;

/// decode<hello> refuses a client id that check_client_id
/// (fedcaf/client_id.hpp) refuses (malformed_frame).
struct hello {
  std::string client_id;
  std::string token;
  /// Which rank of a sharded client this connection is (ranks 1: none).
  shard_spec shard{};
};

/// What every client must obey, typed in Welcome (docs/protocol.md).
struct client_terms {
  uint32_t heartbeat_ms = 0;
  uint32_t connection_timeout_ms = 0;
  uint32_t idle_timeout_ms = 0;
  uint32_t reconnect_grace_ms = 0;
  uint64_t max_message_bytes = 0;
  bool federated_evaluation = false;
  bool declare_update_norm = false;
  double update_clip_norm = 0;
  uint8_t upload_encoding = 0; ///< compression_method as a number
  uint8_t download_encoding = 0;
  double zfp_tolerance = 0;
  /// The server folds a relay's sum given on its exact grid.
  bool grid_sums = false;
  /// ... and reads chunk_header::float_sums in such an upload.
  bool chunk_float_sums = false;

  friend bool operator==(const client_terms&, const client_terms&) = default;
};

struct welcome {
  uint32_t client_index = 0;
  uint32_t num_clients = 0;
  std::string client_configs; ///< YAML text: the trainer's own settings
  client_terms terms;
  /// The server still held this client's session (see Welcome.resumed).
  bool resumed = false;
};

struct round_start {
  uint32_t round = 0;
  uint64_t model_version = 0;
  manifest model;
  uint64_t chunk_bytes = 0;
  uint32_t window = 0;
  metrics previous;
  bool resend = false; ///< collect the round's updates again: re-offer
  /// Only evaluate the model and answer with an evaluation (no training).
  bool evaluate_only = false;
  /// The update goes masked: the SecAgg+ phases before and after it.
  bool secure_aggregation = false;
};

struct offer {
  uint32_t round = 0;
  std::string client_id;
  uint64_t sample_count = 0;
  uint64_t manifest_digest = 0;
  uint64_t total_bytes = 0;
  uint64_t chunk_count = 0;
  double train_loss = 0;
  double train_seconds = 0;
  double dp_epsilon = 0;  ///< DP-SGD: spent on the client's data; 0: none
  named_values metrics{}; ///< the client's own training figures
  /// What the chunks carry: compression_method as a number (0: none).
  uint8_t encoding = 0;
  double update_norm = 0; ///< ||x - g|| when the server asks for it
  /// A relay's partial sum: the chunks carry sum w_i x_i, sample_count
  /// is sum w_i.
  bool partial_sum = false;
  /// Drawn per trained update (0: not told): a repeat resumes, another
  /// number is another update.
  uint64_t update_id = 0;
  /// A partial sum given as int32 sums on the server's exact grid.
  bool grid_sums = false;
};

struct accept {
  uint64_t stream_id = 0;
  uint32_t window = 0;
  uint64_t next_sequence = 0;        ///< resumed stream: next chunk to send
  uint64_t first_unacknowledged = 0; ///< resumed stream: first credit owed
};

/// The fields of a chunk other than its bytes.
struct chunk_header {
  uint64_t stream_id = 0; ///< 0 for downloads
  uint32_t round = 0;
  uint64_t sequence = 0;
  uint32_t tensor_index = 0;
  uint64_t byte_offset = 0;
  /// In a gridSums upload: float32 sums, not int32 on the grid.
  bool float_sums = false;
};

/// A decoded chunk. `bytes` points into the frame it was decoded from and is
/// valid while that frame lives; the checksum has been verified.
struct chunk_view {
  chunk_header header;
  std::span<const std::byte> bytes;
  uint64_t checksum = 0; ///< of `bytes`, verified by decode_chunk
};

struct credit {
  uint64_t stream_id = 0;
  uint64_t sequence = 0;
};

struct fetch {
  uint32_t round = 0;
  uint64_t model_version = 0;
  uint64_t sequence = 0;
};

struct end_of_stream {
  uint64_t stream_id = 0;
  uint64_t chunk_count = 0;
};

struct stream_closed {
  uint64_t stream_id = 0;
  uint64_t bytes_received = 0;
};

/// The server published `round`'s model.
struct round_over {
  uint32_t round = 0;
};

/// Why a client leaves (Goodbye.reason).
enum class goodbye_reason : uint8_t {
  interrupted,
  terminated,
  user_exception,
  wrong_model,
  other
};

/// "interrupted", "terminated", "an exception in its own code", "a wrong
/// model" or "other".
const char* to_string(goodbye_reason r);
/// Its enumerator's name ("user_exception", ...): a reason token of the
/// operator's counters.
const char* name_of(goodbye_reason r);

/// Client to server, one-way: it leaves the run, and why. Decoders refuse
/// a detail past max_goodbye_detail bytes or holding a NUL.
struct goodbye {
  goodbye_reason reason = goodbye_reason::other;
  std::string detail;
};
constexpr size_t max_goodbye_detail = 512;

/// The goodbye of a client that gives up on error `e`: a wrong model for a
/// layout or dtype the server's model does not match, other otherwise; the
/// detail is `e` ("manifest_mismatch: ...").
goodbye goodbye_for(const error& e);

/// "<reason>" or "<reason>: <detail>", each control character of the
/// peer's detail shown as '?' (for one log line).
std::string said_why(const goodbye& g);

struct done {
  uint32_t rounds = 0;
  metrics final;
  std::string reason; ///< empty on success
};

/// Secure aggregation (SecAgg+). Decoders refuse a key, share value or
/// sealed share of another length, more than max_secagg_neighbours entries
/// in any list, an x of 0, a roster whose neighbours are not sorted by
/// index or whose parameters are out of range.
using key_bytes = std::array<uint8_t, 32>;
/// The sender's one-share public key, nonce, 73-byte payload, tag.
constexpr size_t sealed_share_bytes = 133;
constexpr size_t max_secagg_neighbours = 255;

/// Client to server: its public keys for the round, and its sample count.
struct secagg_keys {
  uint32_t round = 0;
  key_bytes share_key{};
  key_bytes mask_key{};
  uint64_t sample_count = 0;
  key_bytes self_seed_commitment{}; ///< SHA-256 of its self-mask seed
};

struct secagg_peer {
  uint32_t index = 0;
  std::string client_id;
  key_bytes share_key{};
  key_bytes mask_key{};
};

/// Server to client, answering secagg_keys: its place, weight, the round's
/// parameters and its neighbours.
struct secagg_roster {
  uint32_t round = 0;
  uint32_t index = 0;
  double weight = 0; ///< normalized, in [0, 1]
  uint32_t threshold = 0;
  double clipping_range = 0;
  uint32_t quantization_bits = 0;
  std::vector<secagg_peer> neighbours; ///< sorted by index
};

struct sealed_share {
  uint32_t peer = 0; ///< to the server: recipient; from it: sender
  std::vector<uint8_t> sealed;
};

/// Sealed shares: a client's for its neighbours, or those relayed to it.
struct secagg_shares {
  uint32_t round = 0;
  std::vector<sealed_share> shares;
};

/// Client to server: the neighbours whose share did not open for it;
/// server to client: the neighbours not to mask against.
struct share_secret {
  uint32_t peer = 0; ///< the disputed share's recipient
  key_bytes secret{};
};

/// Server to client instead, `disputed`: the neighbours that said its
/// share did not open; client to server then, `share_secrets`: the secrets
/// that open those shares (a second receipt).
struct secagg_receipt {
  uint32_t round = 0;
  std::vector<uint32_t> unopened;
  std::vector<uint32_t> excluded;
  std::vector<uint32_t> disputed;
  std::vector<share_secret> share_secrets;
};

struct revealed_share {
  uint32_t owner = 0;
  uint8_t x = 0;
  key_bytes y{};
};

/// Server to client: which shares to reveal; client to server: them.
struct secagg_unmask {
  uint32_t round = 0;
  std::vector<uint32_t> in_sum;
  std::vector<uint32_t> dropped;
  std::vector<revealed_share> self_seed_shares;
  std::vector<revealed_share> mask_key_shares;
};

frame encode(const secagg_keys& x);
frame encode(const secagg_roster& x);
frame encode(const secagg_shares& x);
frame encode(const secagg_unmask& x);
frame encode(const secagg_receipt& x);
frame encode(const hello& x);
frame encode(const welcome& x);
frame encode(const round_start& x);
frame encode(const offer& x);
frame encode(const accept& x);
frame encode(const credit& x);
frame encode(const fetch& x);
frame encode(const end_of_stream& x);
frame encode(const stream_closed& x);
frame encode(const done& x);
frame encode(const round_over& x);
frame encode(const goodbye& x);
frame encode(const evaluation& x);
/// Returns a heartbeat frame.
frame encode_heartbeat();
/// Encodes a refusal; the peer's decode<T> of it returns this error.
frame encode(const error& x);

/// Writes a chunk frame of `payload_bytes` bytes; `fill` writes the payload
/// straight into the frame (no staging copy), then the checksum is computed.
frame encode_chunk(const chunk_header& header, size_t payload_bytes,
                   const std::function<void(std::span<std::byte>)>& fill);

/// Takes one piece of a chunk's payload (see encode_chunk_gathered).
using chunk_append = std::function<void(std::span<const std::byte>)>;

/// As encode_chunk, the same bytes on the wire, the payload appended
/// rather than written over zeroes: `gather` calls append(piece) with the
/// payload's bytes front to back (payload_bytes in all; what it leaves out
/// is zero, what it gives beyond is dropped), so each byte is written once
/// (a model's bytes go out in one copy, with no zero-filling pass before
/// it). `then`, if set, may change the payload in place before the
/// checksum is taken.
frame encode_chunk_gathered(
    const chunk_header& header, size_t payload_bytes,
    const std::function<void(const chunk_append&)>& gather,
    const std::function<void(std::span<std::byte>)>& then = {});

/// Decodes a frame that must hold a T. Returns the peer's error iff the frame
/// is an error frame, and an error iff it is malformed, of another protocol
/// version, or of another kind. T is any of the types above but chunk_view.
template <class T> result<T> decode(const frame& f);

/// Decodes a chunk frame and verifies its checksum. Returns an error iff the
/// frame is malformed, not a chunk, larger than `max_chunk_bytes`, or its
/// checksum does not match. REQUIRES: f outlives the returned view.
result<chunk_view> decode_chunk(const frame& f, uint64_t max_chunk_bytes);

/// Returns the XXH3-64 checksum that chunk frames carry.
uint64_t checksum(std::span<const std::byte> bytes);

} // namespace fedcaf::msg
