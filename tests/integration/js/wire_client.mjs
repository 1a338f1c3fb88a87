// A fedcaf client written against messages/fedcaf.capnp as compiled by
// capnp-es (capnpc-js), with nothing of fedcaf's code: it says Hello to a
// `fedcaf server`, decodes the Welcome, waits for roundStart, fetches chunk
// 0 of the global model and decodes the Chunk; it prints what it decoded as
// JSON and writes the raw frames it received (the captures) to OUT_DIR.
//
//   node wire_client.mjs GENERATED_JS PORT CLIENT_ID TOKEN OUT_DIR
import net from "node:net";
import fs from "node:fs";
import path from "node:path";
import * as capnp from "capnp-es";

const [generated, port, clientId, token, outDir] = process.argv.slice(2);
const { Frame } = await import(path.resolve(generated));

function frame(requestId, fill) {
  const m = new capnp.Message();
  const f = m.initRoot(Frame);
  f.version = 1;
  fill(f.body);
  const body = new Uint8Array(m.toArrayBuffer());
  const out = new Uint8Array(8 + body.length);
  new DataView(out.buffer).setUint32(0, requestId, true); // flags stay 0
  out.set(body, 8);
  return out;
}

/// The frame's body (a union: hello, welcome, ...).
function decode(bytes) {
  const body = new Uint8Array(bytes.subarray(8)); // a copy: its own buffer
  const m = new capnp.Message(body.buffer, false, false);
  return m.getRoot(Frame).body;
}

const socket = net.connect(Number(port), "127.0.0.1");
let buffer = Buffer.alloc(0);
const result = {};
const timer = setTimeout(() => {
  console.error("no answer within 20 s");
  process.exit(1);
}, 20000);

function handle(raw) {
  const requestId = raw.readUInt32LE(0);
  const f = decode(raw);
  if (f._isWelcome) {
    fs.writeFileSync(path.join(outDir, "welcome.bin"), raw);
    const w = f.welcome;
    result.welcome = {
      requestId, clientIndex: w.clientIndex, numClients: w.numClients,
      heartbeatMs: w.heartbeatMs, connectionTimeoutMs: w.connectionTimeoutMs,
      maxMessageBytes: Number(w.maxMessageBytes),
      federatedEvaluation: w.federatedEvaluation,
      clientConfigsStart: w.clientConfigs.slice(0, 40),
    };
  } else if (f._isRoundStart) {
    const r = f.roundStart;
    const tensors = r.manifest.tensors;
    result.roundStart = {
      round: r.round, modelVersion: Number(r.modelVersion),
      chunkBytes: Number(r.chunkBytes), tensors: tensors.length,
      firstTensor: tensors.get(0).name,
    };
    socket.write(frame(2, (g) => {
      const fetch = g._initFetch();
      fetch.round = r.round;
      fetch.modelVersion = r.modelVersion;
      fetch.sequence = 0n;
    }));
  } else if (f._isChunk) {
    fs.writeFileSync(path.join(outDir, "chunk.bin"), raw);
    const c = f.chunk;
    const payload = c.bytes.toUint8Array();
    result.chunk = {
      requestId, streamId: Number(c.streamId), round: c.round,
      sequence: Number(c.sequence), tensorIndex: c.tensorIndex,
      tensorOffset: Number(c.tensorOffset),
      checksum: c.checksum.toString(16), bytes: payload.length,
      firstFloat: new DataView(payload.buffer, payload.byteOffset, 4)
        .getFloat32(0, true),
    };
    clearTimeout(timer);
    console.log(JSON.stringify(result));
    socket.end();
  } else if (f._isError) {
    console.error(`error: ${f.error.message}`);
    process.exit(1);
  }
}

socket.on("data", (data) => {
  buffer = Buffer.concat([buffer, data]);
  while (buffer.length >= 16) {
    const words = buffer.readUInt32LE(12);
    const size = 16 + 8 * words;
    if (buffer.length < size) break;
    handle(buffer.subarray(0, size));
    buffer = buffer.subarray(size);
  }
});
socket.on("connect", () => {
  socket.write(frame(1, (f) => {
    const h = f._initHello();
    h.clientId = clientId;
    h.token = token;
  }));
});
socket.on("error", (e) => {
  console.error(`socket: ${e.message}`);
  process.exit(1);
});
