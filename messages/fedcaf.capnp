@0xea9609fafddd8937;
# The fedcaf wire format: every message between nodes is one Frame, sent as
# an 8-byte envelope (request id, flags) and this schema's Frame in Cap'n
# Proto's standard stream framing with exactly one segment (docs/protocol.md).
# Ordinals are append-only. Doc comments follow the field they describe.

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("fedcaf::wire");

const protocolVersion :UInt16 = 1;
# Bumped on any incompatible change; a frame with another version is refused.

enum DType {
  float32 @0;
  float16 @1;
  bfloat16 @2;
  float64 @3;
  int64 @4;
  int32 @5;
  uint8 @6;
  int16 @7;
  int8 @8;
  boolean @9;
}

struct TensorInfo {
  name @0 :Text;
  dtype @1 :DType;
  shape @2 :List(UInt64);
  byteSize @3 :UInt64;
  # Must equal the product of shape times the size of dtype.
  carried @4 :Bool;
  # True iff the model holds this tensor as `held`, an integer or bool
  # dtype, and it travels (and is averaged) as `dtype`, the model's floating
  # dtype: each value converted exactly; the receiving model rounds it back
  # (docs/protocol.md, "Integer and bool tensors").
  held @5 :DType;
}

struct Manifest {
  tensors @0 :List(TensorInfo);
  # In model order; chunks are cut from the concatenation of these tensors.
}

struct Metrics {
  round @0 :UInt32;
  # The round whose global model was evaluated; 0 for the initial model.
  testAccuracy @1 :Float64;
  testLoss @2 :Float64;
  evaluated @3 :Bool;
  # False when the server does not evaluate (no test set).
}

struct NamedValue {
  name @0 :Text;
  value @1 :Float64;
}

struct Evaluation {
  round @0 :UInt32;
  # The round whose published model was evaluated: the round a RoundStart
  # announced minus one (0: the initial model).
  sampleCount @1 :UInt64;
  # Samples evaluated; the server weights the figures by it (at most 2^40).
  metrics @2 :List(NamedValue);
  # As Offer.metrics; "accuracy" and "loss" are the figures the server
  # reports as the round's test_accuracy and test_loss when it does not
  # evaluate the model itself.
}

struct Hello {
  clientId @0 :Text;
  token @1 :Text;
  # Reserved for client authentication; empty when unused.
  shardRank @2 :UInt32;
  # A sharded client (one logical client of shardRanks ranks, each its own
  # connection under the same clientId): which rank this connection is.
  shardRanks @3 :UInt32;
  # 0 or 1: not sharded.
  slices @4 :List(ShardSlice);
  # The rows this rank holds; empty: the dim-0 chunk torch.chunk gives it.
}

struct ShardSlice {
  tensor @0 :Text;
  beginRow @1 :UInt64;
  endRow @2 :UInt64;
  # Rows [beginRow, endRow) of the tensor named `tensor` (dim 0).
}

struct Welcome {
  clientIndex @0 :UInt32;
  # The position of the client in the server's registry (0-based).
  numClients @1 :UInt32;
  clientConfigs @2 :Text;
  # The server's client_configs section (train and model configs) as YAML:
  # the trainer's own settings. What every client must obey is typed below
  # (the same values as in the YAML, where it has them).
  heartbeatMs @3 :UInt32;
  # Send a frame (a heartbeat if nothing else) at least this often.
  connectionTimeoutMs @4 :UInt32;
  # The server drops a connection on which nothing arrived for this long.
  idleTimeoutMs @5 :UInt32;
  # A transfer (fetch or upload) without a chunk or credit moving for this
  # long has stalled: the server cuts an upload idle this long.
  reconnectGraceMs @6 :UInt32;
  # A client whose connection is lost may come back (Hello, then resume)
  # within this long before it is dropped from the run.
  maxMessageBytes @7 :UInt64;
  # The largest frame the server takes (header included); larger: refused.
  federatedEvaluation @8 :Bool;
  # Evaluate the model of each roundStart after the first (and the
  # evaluateOnly one) on the client's own data and send an Evaluation.
  declareUpdateNorm @9 :Bool;
  # Offers must carry updateNorm, the update's L2 norm (norm_bound).
  updateClipNorm @10 :Float64;
  # DP-FedAvg: clip the update to this L2 norm before sending (0: none).
  uploadEncoding @11 :UInt8;
  # What upload chunks must carry, as Offer.encoding numbers it (0: none,
  # 1 fp16, 2 bf16, 3 int8, 4 zfp; see "Compression").
  downloadEncoding @12 :UInt8;
  # What download chunks carry (the same numbers).
  zfpTolerance @13 :Float64;
  # zfp's absolute error bound, where an encoding is zfp.
  resumed @14 :Bool;
  # True iff the server still held this client's session (a Hello after a
  # lost connection: the round in progress goes on). False on a first
  # registration, and on one after the server restarted (from a checkpoint
  # or anew): a round in progress on the client is void, and the server's
  # next RoundStart starts it again, even with the same round and version.
  gridSums @15 :Bool;
  # The server folds a relay's partial sum given as int32 on its exact grid
  # (Offer.gridSums): it sums on that grid (a mean, in any memory mode),
  # unmasked, folds chunks as they come (no norm_bound, no kept tensors),
  # over lossless downloads, and its chunk size is a multiple of 64
  # elements.
  chunkFloatSums @16 :Bool;
  # The server reads Chunk.floatSums in a gridSums offer: a relay whose sum
  # settles position by position (window and disk modes) sends the chunks
  # it could not give on the grid as float32 sums.
}

struct RoundStart {
  round @0 :UInt32;
  modelVersion @1 :UInt64;
  # Version of the global model the clients must fetch this round.
  manifest @2 :Manifest;
  chunkBytes @3 :UInt64;
  # Both ends derive the chunk plan from manifest and chunkBytes.
  window @4 :UInt32;
  # At most this many chunks unacknowledged per stream, both directions.
  previous @5 :Metrics;
  # Evaluation of the model being distributed.
  resend @6 :Bool;
  evaluateOnly @7 :Bool;
  secureAggregation @8 :Bool;
  # The update goes masked (SecAgg+): after training the client advertises
  # its keys (SecAggKeys), seals its shares for its neighbours
  # (SecAggShares), streams its masked, quantized weighted model as the
  # chunks of its offer, and reveals shares when asked (SecAggUnmask).
  # No training this time: evaluate the model on the client's own data and
  # answer with an Evaluation (the final model of a run with
  # federated_evaluation). Its round is the run's last round + 1.
  # The round's updates are collected again: a client that holds this
  # round's model already offers its update once more.
}

struct Offer {
  round @0 :UInt32;
  clientId @1 :Text;
  sampleCount @2 :UInt64;
  manifestDigest @3 :UInt64;
  totalBytes @4 :UInt64;
  chunkCount @5 :UInt64;
  trainLoss @6 :Float64;
  trainSeconds @7 :Float64;
  dpEpsilon @8 :Float64;
  metrics @9 :List(NamedValue);
  # The client's own training figures (at most 32; names of 1 to 64
  # characters of [A-Za-z0-9_./-], unique; values finite).
  # DP-SGD: epsilon the client has spent on its own samples so far
  # (record-level, at its train_configs.dp.delta); 0 without DP-SGD.
  encoding @10 :UInt8;
  # What the update's chunks carry: 0 the model's own bytes; else the
  # delta from the model the client received, encoded per chunk: 1 fp16,
  # 2 bf16, 3 int8 (blockwise absmax), 4 zfp (fixed accuracy). It must be
  # what the server's client_configs.comm_configs.compression says.
  updateNorm @11 :Float64;
  # ||x - g||, the L2 distance of the update from the model the client
  # received (finite, >= 0); what aggregator_kwargs.norm_bound scales by.
  # 0 unless the server's train_configs.declare_update_norm is set.
  partialSum @12 :Bool;
  # A relay's group (docs/design.md, "Trees of aggregators"): the chunks
  # carry sum_i w_i x_i over the updates the relay folded, and sampleCount
  # is their total weight sum_i w_i (each client 1 under equal weights,
  # its capped sample count under sample_size). Only a client id the server
  # lists in server_configs.relays may set it, and such a one must.
  updateId @13 :UInt64;
  # A number the client draws for each update it trains (not 0; 0: not
  # told). An offer repeated after a lost connection carries the same one
  # and resumes its stream (Accept.nextSequence). One that carries another
  # number is another update of the round (a restarted process trained
  # again): the server refuses it, not_in_round, and with it the stream it
  # would have replaced, unless that one was delivered whole: no update
  # is ever made of two updates' chunks.
  gridSums @14 :Bool;
  # A partialSum whose chunks carry, per element of a float32 model, the
  # int32 (little-endian) sum S of the group's updates on the server's
  # exact grid (docs/design.md, "Exact sums"): sum_i w_i x_i is
  # sampleCount g + u S. Only where the Welcome's gridSums was set. A chunk
  # flagged floatSums (where the Welcome's chunkFloatSums was set) carries
  # float32 sums instead.
}

struct Accept {
  streamId @0 :UInt64;
  window @1 :UInt32;
  # Initial credits granted to the stream.
  nextSequence @2 :UInt64;
  firstUnacknowledged @3 :UInt64;
  # A repeated offer (after a reconnect) resumes its stream: the next chunk
  # to send, and the first chunk whose credit is still owed. Both 0 for a
  # new stream.
}

struct Chunk {
  streamId @0 :UInt64;
  # 0 for a download of the global model.
  round @1 :UInt32;
  sequence @2 :UInt64;
  tensorIndex @3 :UInt32;
  # The tensor holding the first byte of this chunk.
  tensorOffset @4 :UInt64;
  # Offset of the first byte inside that tensor.
  checksum @5 :UInt64;
  # XXH3-64 of bytes.
  bytes @6 :Data;
  floatSums @7 :Bool;
  # In an upload whose Offer.gridSums is set, where the Welcome's
  # chunkFloatSums was: this chunk carries float32 sums sum_i w_i x_i (as a
  # partialSum without gridSums does), not int32 sums on the grid. Read
  # nowhere else.
}

struct Credit {
  streamId @0 :UInt64;
  sequence @1 :UInt64;
  # The chunk that was consumed; one credit returns with it.
}

struct Fetch {
  round @0 :UInt32;
  modelVersion @1 :UInt64;
  sequence @2 :UInt64;
}

struct EndOfStream {
  streamId @0 :UInt64;
  chunkCount @1 :UInt64;
}

struct StreamClosed {
  streamId @0 :UInt64;
  bytesReceived @1 :UInt64;
}

struct Done {
  rounds @0 :UInt32;
  final @1 :Metrics;
  reason @2 :Text;
  # Empty on success.
}

struct Error {
  code @0 :UInt16;
  # A fedcaf::errc value.
  message @1 :Text;
}

struct Heartbeat {
  # Either end sends one every stream_configs.heartbeat_s; it is never
  # answered. A connection on which nothing arrives for
  # connection_timeout_s is closed.
}

struct RoundOver {
  round @0 :UInt32;
  # The server published this round's model: a client that does not hold
  # its model between rounds may give it up.
}

struct Goodbye {
  # Client to server, one-way, the last frame of a client that leaves the
  # run: the server drops it at once (no reconnect grace) and logs why.
  reason @0 :Reason;
  enum Reason {
    interrupted @0;   # SIGINT (Ctrl-C)
    terminated @1;    # SIGTERM (a scheduler's cancel, a shutdown)
    userException @2; # the user's own training or evaluation code raised
    wrongModel @3;    # the model it was given does not fit its own
    other @4;
  }
  detail @1 :Text;
  # What happened, at most 512 bytes: an exception's type and message,
  # what does not fit.
}

# -- Secure aggregation (SecAgg+): the phases before and after the masked
# upload. Keys are 32-byte X25519 public keys; a sealed share is 133 bytes
# (the sender's one-share X25519 public key, then AES-256-GCM: 12-byte
# nonce, the 73-byte share payload, 16-byte tag).

struct SecAggKeys {
  round @0 :UInt32;
  shareKey @1 :Data;
  # The client's public key for sealing shares (32 bytes).
  maskKey @2 :Data;
  # Its public key for pairwise masks (32 bytes).
  sampleCount @3 :UInt64;
  # Its weight under client_weights_mode sample_size (capped by the
  # server's max_sample_size); ignored under equal weights.
  selfSeedCommitment @4 :Data;
  # SHA-256 of its self-mask seed (32 bytes): a self seed reconstructed
  # from revealed shares must hash to it, so a wrong share is caught.
}

struct SecAggPeer {
  index @0 :UInt32;
  # The neighbour's index among the round's clients.
  clientId @1 :Text;
  shareKey @2 :Data;
  maskKey @3 :Data;
}

struct SecAggRoster {
  round @0 :UInt32;
  index @1 :UInt32;
  # This client's index among the round's clients.
  weight @2 :Float64;
  # This client's normalized weight: its share of the advertised total.
  threshold @3 :UInt32;
  clippingRange @4 :Float64;
  quantizationBits @5 :UInt32;
  neighbours @6 :List(SecAggPeer);
  # At most 255, sorted by index; the client seals one share for each.
}

struct SealedShare {
  peer @0 :UInt32;
  # Client to server: the recipient's index; server to client: the sender's.
  sealed @1 :Data;
}

struct SecAggShares {
  round @0 :UInt32;
  shares @1 :List(SealedShare);
  # Client to server: one per neighbour. Server to client: those its
  # neighbours that completed the share phase sealed for it; the client
  # masks against exactly these.
}

struct SecAggReceipt {
  round @0 :UInt32;
  unopened @1 :List(UInt32);
  # Client to server: the neighbours (indices) whose relayed share did not
  # open for it (at most 255).
  excluded @2 :List(UInt32);
  # Server to client: the neighbours not to mask against (they sit the
  # round out); the client masks against every other neighbour that shared.
  disputed @3 :List(UInt32);
  # Server to client, instead of `excluded`: the neighbours (indices) that
  # said this client's share did not open for them; the client answers
  # with a second receipt revealing those shares' one-share secrets (at
  # most threshold - 1), and gets `excluded` in answer to that.
  shareSecrets @4 :List(ShareSecret);
  # Client to server, in that second receipt.
}

struct ShareSecret {
  peer @0 :UInt32;
  # The recipient of the disputed share.
  secret @1 :Data;
  # The X25519 secret (32 bytes) whose public key leads that sealed share:
  # with the recipient's share key it opens that share and no other.
}

struct RevealedShare {
  owner @0 :UInt32;
  # The client whose secret this is a share of.
  x @1 :UInt8;
  y @2 :Data;
  # 32 bytes.
}

struct SecAggUnmask {
  round @0 :UInt32;
  inSum @1 :List(UInt32);
  # Server to client: the neighbours whose self-mask seed shares to reveal.
  dropped @2 :List(UInt32);
  # Server to client: the neighbours whose mask-key shares to reveal. A
  # client refuses to reveal both of one neighbour.
  selfSeedShares @3 :List(RevealedShare);
  maskKeyShares @4 :List(RevealedShare);
  # Client to server: the shares asked for.
}

struct Frame {
  version @0 :UInt16;
  body :union {
    hello @1 :Hello;
    welcome @2 :Welcome;
    roundStart @3 :RoundStart;
    offer @4 :Offer;
    accept @5 :Accept;
    chunk @6 :Chunk;
    credit @7 :Credit;
    fetch @8 :Fetch;
    endOfStream @9 :EndOfStream;
    streamClosed @10 :StreamClosed;
    done @11 :Done;
    error @12 :Error;
    heartbeat @13 :Heartbeat;
    roundOver @14 :RoundOver;
    evaluation @15 :Evaluation;
    secAggKeys @16 :SecAggKeys;
    secAggRoster @17 :SecAggRoster;
    secAggShares @18 :SecAggShares;
    secAggUnmask @19 :SecAggUnmask;
    secAggReceipt @20 :SecAggReceipt;
    goodbye @21 :Goodbye;
  }
}
