#!/usr/bin/env python3
"""Robust rules against NumPy, with real processes (tests/integration/
robust_rules_test.sh and robust_attack_test.sh).

  client CONFIG URI K DIR [attacker]
        client K (fedcaf package): each round it uploads 0.5 x the received
        model + N(0, 1) noise drawn from (K, round), and records what it
        sent (DIR/sent-K-ROUND.npz); an attacker uploads -10 x the received
        model instead and records nothing
  check DIR RULE ROUNDS K1,K2,... [TRIM]
        the server's models (DIR/global-ROUND.safetensors) equal the rule
        (TrimmedMeanAggregator with TRIM, or MedianAggregator) applied
        coordinate-wise by NumPy to the recorded uploads of clients K1, K2,
        ... plus one -10 x copy of the model each attacker received
        (attackers: listed as -K), and the report (DIR/server.json) counts
        the values of each client that NumPy's order drops
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from python_client_check import fail, read_safetensors  # noqa: E402

import fedcaf  # noqa: E402  (python_client_check put FEDCAF_PYTHON on the path)


def client(config, uri, k, out, attacker):
    overrides = {"comm_configs.grpc_configs.server_uri": uri,
                 "client_id": f"Client{k}"}
    with fedcaf.Client(config, set=overrides) as c:
        for task in c.tasks():
            if task.evaluate_only:
                continue
            received = {n: np.array(a) for n, a in task.arrays.items()}
            if k == 1 or attacker:
                np.savez(f"{out}/received-{k}-{task.round}.npz", **received)
            if attacker:
                sent = {n: (a * np.float32(-10)).astype(a.dtype)
                        for n, a in received.items()}
            else:
                rng = np.random.default_rng([k, task.round])
                sent = {n: (a * np.float32(0.5) + rng.standard_normal(
                            a.shape, dtype=np.float32)).astype(np.float32)
                        for n, a in received.items()}
                np.savez(f"{out}/sent-{k}-{task.round}.npz", **sent)
            task.send(sent, num_samples=100)


def reference(stack, rule, trim):
    """The rule over axis 0 of `stack` (float32), in float64 then float32,
    as numpy.median and scipy.stats.trim_mean define it."""
    k = stack.shape[0]
    wide = stack.astype(np.float64)
    if rule == "MedianAggregator":
        return np.median(wide, axis=0).astype(np.float32)
    t = int(trim * k)
    return np.sort(wide, axis=0)[t:k - t].mean(axis=0).astype(np.float32)


def check(out, rule, rounds, ids, trim):
    report = json.load(open(f"{out}/server.json"))
    if not report["ok"]:
        fail(report["failure"])
    worst, exact, total = 0.0, 0, 0
    for r in range(1, rounds + 1):
        server = read_safetensors(f"{out}/global-{r}.safetensors")
        uploads = []
        for k in ids:
            if k > 0:
                uploads.append(np.load(f"{out}/sent-{k}-{r}.npz"))
            else:
                got = np.load(f"{out}/received-{-k}-{r}.npz")
                uploads.append({n: a * np.float32(-10) for n, a in got.items()})
        for name, theirs in server.items():
            mine = reference(np.stack([u[name] for u in uploads]), rule, trim)
            diff = np.abs(mine.astype(np.float64) - theirs.astype(np.float64))
            scale = np.maximum(1.0, np.abs(mine.astype(np.float64)))
            worst = max(worst, float((diff / scale).max()))
            exact += int((mine.view(np.uint32) == theirs.view(np.uint32)).sum())
            total += mine.size
        # Who had values dropped: NumPy's order of each coordinate's values
        # (the uploads are random: no ties).
        k = len(ids)
        t = (k - 1) // 2 if rule == "MedianAggregator" else int(trim * k)
        want = {f"Client{abs(i)}": 0 for i in ids}
        for name in server:
            order = np.argsort(np.stack([u[name] for u in uploads]).reshape(k, -1),
                               axis=0)
            dropped = np.concatenate([order[:t], order[k - t:]]).ravel()
            for j, n in enumerate(np.bincount(dropped, minlength=k)):
                want[f"Client{abs(ids[j])}"] += int(n)
        got = report["rounds"][r - 1]["trimmed_values"]
        if got != want:
            fail(f"round {r}: trimmed_values {got}, NumPy drops {want}")
    print(f"{rule}: largest relative difference from NumPy {worst:.3g}; "
          f"{exact} of {total} values bit for bit")
    if worst > 1e-6:
        fail(f"the server's model differs from NumPy's {rule} by {worst}")


if __name__ == "__main__":
    if sys.argv[1] == "client":
        client(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5],
               len(sys.argv) > 6 and sys.argv[6] == "attacker")
    else:
        check(sys.argv[2], sys.argv[3], int(sys.argv[4]),
              [int(x) for x in sys.argv[5].split(",")],
              float(sys.argv[6]) if len(sys.argv) > 6 else 0.2)
