"""A TCP relay that records what one client sends its server, and the
analysis of what it recorded (tests/integration/secagg_privacy_test.sh).

  secagg_tap.py relay LISTEN_PORT SERVER_PORT OUT_FILE SECONDS
      accepts connections on 127.0.0.1:LISTEN_PORT for at most SECONDS,
      relays each to 127.0.0.1:SERVER_PORT and appends every byte the
      client sends to OUT_FILE.
  secagg_tap.py payloads FILE CHUNK_BYTES OUT_NPY
      splits FILE into frames (docs/protocol.md, "Framing") and writes the
      payload of every chunk frame (its last CHUNK_BYTES bytes: Cap'n Proto
      places the data blob last in the one segment) as uint32 words.
"""
import socket
import struct
import sys
import threading
import time

import numpy as np


def relay(listen_port, server_port, out_file, seconds):
    lock = threading.Lock()
    out = open(out_file, "wb", buffering=0)  # complete if it is killed

    def pump(src, dst, record):
        try:
            while True:
                data = src.recv(1 << 20)
                if not data:
                    break
                if record:
                    with lock:
                        out.write(data)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", listen_port))
    listener.listen(4)
    listener.settimeout(0.5)
    deadline = time.monotonic() + seconds
    threads = []
    while time.monotonic() < deadline and len(threads) < 16:
        try:
            client, _ = listener.accept()
        except socket.timeout:
            continue
        server = socket.create_connection(("127.0.0.1", server_port))
        for args in ((client, server, True), (server, client, False)):
            t = threading.Thread(target=pump, args=args, daemon=True)
            t.start()
            threads.append(t)
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    out.close()


def payloads(path, chunk_bytes, out_npy):
    data = open(path, "rb").read()
    words, at, frames = [], 0, 0
    while at + 16 <= len(data):
        _, flags, segments, size_words = struct.unpack_from("<IIII", data, at)
        if flags != 0 or segments != 0:
            sys.exit(f"not a frame at byte {at}")
        end = at + 16 + 8 * size_words
        if end - at - 16 >= chunk_bytes:
            words.append(np.frombuffer(data[end - chunk_bytes:end], dtype="<u4"))
        at, frames = end, frames + 1
    if not words:
        sys.exit("no chunk frame recorded")
    np.save(out_npy, np.concatenate(words))
    print(f"{frames} frames, {len(words)} chunks, {len(data)} bytes recorded")


if __name__ == "__main__":
    if sys.argv[1] == "relay":
        relay(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], float(sys.argv[5]))
    elif sys.argv[1] == "payloads":
        payloads(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    else:
        sys.exit(__doc__)
