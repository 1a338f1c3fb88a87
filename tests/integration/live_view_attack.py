#!/usr/bin/env python3
"""Attacks on the live view (--http) of a running `fedcaf server`, for run L
of hostile_peer_test.sh. All at once, on 127.0.0.1, bounded in count and
time:

  line     a request line of 200 MiB without an end, sent as fast as the
           server takes it: it must close the connection (414) long before
  flood    300 connections opened and kept open (never a byte)
  slow     8 requests sent one byte a second: each closed within 5 s (+1)
  noread   8 connections that pipeline 1000 GETs of the page each and never
           read: each closed (reset) by the server within 9 s (at the 5 s
           write timeout, or after 100 requests on one connection where the
           kernel's buffers took 100 responses, as on loopback)
  normal   meanwhile a normal GET of /status every 250 ms on a new
           connection: every one answered 200 within 2 s

It samples the server's RSS and open descriptors (/proc/PID) every 50 ms.
Prints one line per observation and `verdict: ok` or `verdict: unexpected:
...`; exits 0 iff every expectation held.

  live_view_attack.py --url http://127.0.0.1:PORT --pid PID [--seconds S]
"""
import argparse
import os
import resource
import socket
import threading
import time

MiB = 1 << 20
problems = []
lock = threading.Lock()


def note(line):
    with lock:
        print("live_view_attack: " + line, flush=True)


def expect(ok, what):
    if not ok:
        note("UNEXPECTED: " + what)
        with lock:
            problems.append(what)


def connect(port, timeout=5, label=None, rcvbuf=None):
    """A connection to the view; `label`: announced with its address (the
    driver looks for the server's log line about it)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.settimeout(timeout)
    try:
        s.connect(("127.0.0.1", port))
    except OSError:
        s.close()
        raise
    if label:
        note(f"conn {label} 127.0.0.1:{s.getsockname()[1]}")
    return s


def closed_by_server(s, until):
    """Reads until the server closes (True) or `until` passes (False);
    returns (closed, first bytes read)."""
    got = b""
    while time.monotonic() < until:
        s.settimeout(max(0.01, min(0.5, until - time.monotonic())))
        try:
            b = s.recv(65536)
        except socket.timeout:
            continue
        except OSError:
            return True, got
        if not b:
            return True, got
        if len(got) < 4096:
            got += b[:4096]
    return False, got


def attack_line(port):
    """200 MiB of request line: closed (414) before it is all sent."""
    total = 200 * MiB
    s = connect(port, label="line")
    s.settimeout(10)
    chunk = b"a" * MiB
    sent = 0
    started = time.monotonic()
    try:
        s.sendall(b"GET /")
        while sent < total and time.monotonic() - started < 20:
            sent += s.send(chunk)
    except OSError:
        pass
    closed, got = closed_by_server(s, time.monotonic() + 5)
    s.close()
    status = got.split(b"\r\n", 1)[0].decode(errors="replace")
    note(f"line: sent {sent / MiB:.1f} MiB of 200 MiB, then the server "
         f"{'closed' if closed or sent < total else 'kept'} the connection; "
         f"it answered '{status or 'nothing (reset)'}'")
    expect(sent < total, "the server took a 200 MiB request line")
    expect(status in ("", "HTTP/1.1 414 URI Too Long"),
           "the request line was answered " + status)


def attack_flood(port, hold_s, socks):
    """300 connections opened and held, never a byte."""
    opened = 0
    for _ in range(300):
        try:
            socks.append(connect(port, timeout=3))
            opened += 1
        except OSError as e:
            note(f"flood: connect failed: {e}")
            break
    note(f"flood: {opened} connections open, held for {hold_s:.0f} s")
    expect(opened == 300, f"only {opened} of 300 connections opened")


def attack_slow(port, i):
    """A request one byte a second: closed within 6 s, never answered."""
    s = connect(port, label=f"slow{i}")
    req = b"GET /status HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    started = time.monotonic()
    closed = False
    got = b""
    for b in req:
        try:
            s.send(bytes([b]))
        except OSError:
            closed = True
            break
        closed, got = closed_by_server(s, time.monotonic() + 1)
        if closed:
            break
    took = time.monotonic() - started
    s.close()
    note(f"slow {i}: {'closed' if closed else 'open'} after {took:.1f} s")
    expect(closed and took <= 6.5 and not got.startswith(b"HTTP/1.1 200"),
           f"slow client {i}: closed {closed} after {took:.1f} s")


def attack_noread(port, i):
    """Pipelines 1000 GETs of the page, never reads: closed in time."""
    s = connect(port, label=f"noread{i}", rcvbuf=4096)
    req = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" * 1000
    started = time.monotonic()
    s.settimeout(2)
    try:
        s.sendall(req)
    except OSError:
        pass
    # Not reading: wait for the server to give up (a reset, or EOF once
    # what is buffered is read, which is read only at the end).
    closed = False
    while time.monotonic() - started < 12 and not closed:
        time.sleep(0.25)
        try:
            info = s.getsockopt(socket.SOL_TCP, socket.TCP_INFO, 8)
            closed = info[0] in (7, 8)  # CLOSE or CLOSE_WAIT: it closed
        except OSError:
            closed = True
    took = time.monotonic() - started
    s.close()
    note(f"noread {i}: {'closed by the server' if closed else 'open'} "
         f"after {took:.1f} s")
    expect(closed and took <= 9, f"a client that never reads: closed "
           f"{closed} after {took:.1f} s")


def normal_gets(port, until, results):
    while time.monotonic() < until:
        t = time.monotonic()
        try:
            s = connect(port, timeout=2)
            s.settimeout(2)
            s.sendall(b"GET /status HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                      b"Connection: close\r\n\r\n")
            closed, got = closed_by_server(s, t + 2)
            s.close()
            ok = closed and got.startswith(b"HTTP/1.1 200 OK")
        except OSError:
            ok = False
        results.append((ok, time.monotonic() - t))
        time.sleep(0.25)


def proc_sample(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            rss = next(int(l.split()[1]) * 1024 for l in f
                       if l.startswith("VmRSS:"))
        return rss, len(os.listdir(f"/proc/{pid}/fd"))
    except (OSError, StopIteration):
        return None


def sampler(pid, until, peaks):
    while time.monotonic() < until:
        got = proc_sample(pid)
        if got:
            peaks[0] = max(peaks[0], got[0])
            peaks[1] = max(peaks[1], got[1])
        time.sleep(0.05)


def main():
    a = argparse.ArgumentParser()
    a.add_argument("--url", required=True)
    a.add_argument("--pid", type=int, required=True)
    a.add_argument("--seconds", type=float, default=12)
    a.add_argument("--cap", type=int, default=32)
    o = a.parse_args()
    port = int(o.url.rstrip("/").rsplit(":", 1)[1])
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    base = proc_sample(o.pid)
    if not base:
        print(f"live_view_attack: verdict: not mounted: no process {o.pid}")
        return 2
    note(f"before: server RSS {base[0] / MiB:.1f} MiB, {base[1]} descriptors")
    until = time.monotonic() + o.seconds
    peaks = [base[0], base[1]]
    results = []
    held = []
    threads = [threading.Thread(target=sampler, args=(o.pid, until, peaks)),
               threading.Thread(target=normal_gets,
                                args=(port, until - 1, results))]
    threads[0].start()
    threads[1].start()
    attack_flood(port, o.seconds, held)
    workers = [threading.Thread(target=attack_line, args=(port,))]
    workers += [threading.Thread(target=attack_slow, args=(port, i))
                for i in range(8)]
    workers += [threading.Thread(target=attack_noread, args=(port, i))
                for i in range(8)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(60)
    for t in threads:
        t.join(o.seconds + 5)
    for s in held:
        s.close()
    growth = peaks[0] - base[0]
    note(f"server RSS {base[0] / MiB:.1f} -> peak {peaks[0] / MiB:.1f} MiB "
         f"(+{growth / MiB:.1f} MiB); descriptors {base[1]} -> peak {peaks[1]}")
    expect(growth < 16 * MiB, f"RSS grew by {growth / MiB:.1f} MiB")
    # The view's cap, its listener and one connection past the cap, plus
    # what the fedcaf port holds meanwhile (the honest clients, Mallory,
    # the Hello device's connection, their files): never the 256.
    expect(peaks[1] <= base[1] + o.cap + 2 + 8,
           f"descriptors grew from {base[1]} to {peaks[1]} (cap {o.cap})")
    good = sum(1 for ok, _ in results if ok)
    slowest = max((t for _, t in results), default=0)
    note(f"normal GETs during the attack: {good} of {len(results)} answered "
         f"200, the slowest in {slowest:.2f} s")
    expect(results and good == len(results), "a normal GET was not answered")
    if problems:
        note("verdict: unexpected: " + "; ".join(problems))
        return 1
    note("verdict: ok")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
