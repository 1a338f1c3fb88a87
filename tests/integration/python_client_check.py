#!/usr/bin/env python3
"""Checks for tests/integration/python_client_test.sh.

  replay OUT ROUNDS          the server's global models equal a plain-PyTorch
                             FedAvg of the updates the clients recorded, and
                             the report carries the clients' evaluation
  interrupt CONFIG URI       Ctrl-C while connecting to an absent server
  refusals CONFIG URI        a Python client's wrong arrays are refused with
                             messages naming the tensor, then a right update
                             goes through
"""
import json
import os
import struct
import sys

import numpy as np
import torch

sys.path.insert(0, os.environ["FEDCAF_PYTHON"])
import fedcaf  # noqa: E402

NUMPY = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16,
         "F64": np.float64, "I64": np.int64, "I32": np.int32, "U8": np.uint8}


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        a, b = t["data_offsets"]
        out[name] = np.frombuffer(data[8 + n + a:8 + n + b],
                                  dtype=NUMPY[t["dtype"]]).reshape(t["shape"])
    return out


def fail(why):
    print("FAIL:", why)
    sys.exit(1)


def replay(out, rounds, tolerance=1e-6):
    report = json.load(open(f"{out}/server.json"))
    if not report["ok"]:
        fail(report["failure"])
    if len(report["rounds"]) != rounds:
        fail(f"{len(report['rounds'])} rounds reported, {rounds} expected")
    for r in report["rounds"]:
        cm = r["client_metrics"]
        if not cm or cm["clients"] != 2 or "accuracy" not in cm["means"]:
            fail(f"round {r['round']}: no clients' evaluation: {cm}")
        if r["test_accuracy"] != cm["means"]["accuracy"]:
            fail(f"round {r['round']}: test_accuracy is not the clients'")
        if not r["client_train_metrics"] or "loss" not in r["client_train_metrics"]["means"]:
            fail(f"round {r['round']}: no training figures")
    accuracy = report["rounds"][-1]["test_accuracy"]
    print(f"federated test accuracy after {rounds} rounds: {accuracy:.4f}")
    if accuracy < 0.85:
        fail(f"accuracy {accuracy} < 0.85")
    worst = 0.0
    for r in range(1, rounds + 1):
        sent = [read_safetensors(f"{out}/rec{c}/sent-{r}.safetensors") for c in (1, 2)]
        server = read_safetensors(f"{out}/global-{r}.safetensors")
        for name, theirs in server.items():
            # FedAvg, equal weights, in plain PyTorch
            mine = (torch.from_numpy(sent[0][name].copy()) +
                    torch.from_numpy(sent[1][name].copy())) / 2
            diff = (mine - torch.from_numpy(theirs.copy())).abs().max().item()
            worst = max(worst, diff)
        if r < rounds:  # what the clients received next is that model
            got = read_safetensors(f"{out}/rec1/received-{r + 1}.safetensors")
            for name, theirs in server.items():
                if not np.array_equal(got[name], theirs):
                    fail(f"round {r + 1}: client 1 received another '{name}'")
    print(f"largest difference from the PyTorch FedAvg replay: {worst:.3g}")
    if worst > tolerance:
        fail(f"the server's model differs from the replay by {worst}")


def expect_error(what, code, needles, call):
    try:
        call()
    except fedcaf.Error as e:
        if e.code != code or not all(n in e.message for n in needles):
            fail(f"{what}: refused as {e.code}: {e.message}")
        print(f"refused as expected ({what}): {e.code}: {e.message}")
        return
    fail(f"{what}: not refused")


def refusals(config, uri):
    client = fedcaf.Client(config, set={"comm_configs.grpc_configs.server_uri": uri})
    task = next(client.tasks())
    layout = task.layout
    name, dtype, shape = layout[0]
    good = {n: np.array(task.arrays[n]) + 0.5 for n, _, _ in layout}
    wrong_shape = dict(good)
    wrong_shape[name] = np.zeros((3,) + tuple(shape), dtype=np.float32)
    expect_error("shape", "manifest_mismatch",
                 [name, str(list(shape)).replace(" ", ""), "[3, "],
                 lambda: task.send(wrong_shape, num_samples=1))
    wrong_dtype = dict(good)
    wrong_dtype[name] = torch.zeros(tuple(shape), dtype=torch.float64)
    expect_error("dtype", "manifest_mismatch", [name, "float64", "float32"],
                 lambda: task.send(wrong_dtype, num_samples=1))
    missing = dict(good)
    del missing[name]
    expect_error("missing tensor", "bad_argument", [name, "missing"],
                 lambda: task.send(missing, num_samples=1))
    extra = dict(good)
    extra["not.in.model"] = np.zeros(2, dtype=np.float32)
    expect_error("extra tensor", "bad_argument", ["not.in.model"],
                 lambda: task.send(extra, num_samples=1))
    expect_error("bad figure", "bad_argument", ["figure"],
                 lambda: task.send(good, num_samples=1, metrics={"loss": float("nan")}))
    task.send(good, num_samples=1)  # the right one goes through
    # "sent already", or "over" once the next task (the final model) came
    expect_error("second send", "bad_argument", ["task.send"],
                 lambda: task.send(good, num_samples=1))
    # An evaluation of this task's model after its upload still counts
    # (the server takes the model before the one it serves), once.
    task.evaluate({"accuracy": 0.25}, num_samples=4)
    expect_error("second evaluation", "bad_argument", ["evaluated already"],
                 lambda: task.evaluate({"accuracy": 0.25}, num_samples=4))
    expect_error("negative samples", "bad_argument", ["num_samples"],
                 lambda: task.evaluate({"accuracy": 0.25}, num_samples=-1))
    for t in client.tasks():
        if t.evaluate_only:
            t.evaluate({"accuracy": 0.5}, num_samples=10)
    client.close()
    print("refusals: ok")


def interrupt(config, uri):
    """Ctrl-C while the client is still trying to reach an absent server
    stops it at once, not after idle_timeout_s."""
    import signal
    import threading
    import time
    client = fedcaf.Client(config, set={"comm_configs.grpc_configs.server_uri": uri,
                                        "comm_configs.stream_configs.idle_timeout_s": 60})
    threading.Timer(1.0, lambda: signal.raise_signal(signal.SIGINT)).start()
    start = time.time()
    try:
        next(client.tasks())
        fail("a task from an absent server")
    except KeyboardInterrupt:
        pass
    client.close()
    took = time.time() - start
    print(f"Ctrl-C while connecting: stopped in {took:.2f} s")
    if took > 10:
        fail(f"Ctrl-C took {took:.1f} s to stop the client")


if __name__ == "__main__":
    if sys.argv[1] == "replay":
        replay(sys.argv[2], int(sys.argv[3]),
               float(sys.argv[4]) if len(sys.argv) > 4 else 1e-6)
    elif sys.argv[1] == "interrupt":
        interrupt(sys.argv[2], sys.argv[3])
    else:
        refusals(sys.argv[2], sys.argv[3])
