#!/usr/bin/env python3
"""A PyTorch CNN on Fashion-MNIST as a fedcaf client: your model, your data,
your training loop; fedcaf moves the model.

    fedcaf server -c configs/server_python.yaml
    python3 examples/python/fashion_mnist.py -c configs/client_1.yaml
    python3 examples/python/fashion_mnist.py -c configs/client_2.yaml

`--model resnet` trains a ResNet-style CNN with BatchNorm
(examples/python/resnet_bn.py) instead: its int64 num_batches_tracked
buffers travel as they are. (`--float-only` shows the workaround other
setups need: send only the float tensors and load with strict=False.)

The client config gives the client id, the server's address and this
client's share of the data (data_configs.dataset_kwargs: num_clients,
client_id, seed). `--init PATH` writes the model's initial weights, which
the server reads as model_configs.path (./setup.sh writes the file that
configs/server_python.yaml names).
"""

import argparse
import gzip
import os
import sys
import time

import numpy as np
import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
try:
    import fedcaf  # pip-installed, the .deb's, or on PYTHONPATH
except ImportError:  # run from a source tree built with cmake --build build
    sys.path.insert(0, os.path.join(HERE, "..", "..", "build", "python"))
    import fedcaf  # noqa: E402
sys.path.insert(0, HERE)
from client_config import read_client_config  # noqa: E402
from resnet_bn import ResNetBN  # noqa: E402

MEAN, STD = 0.2860, 0.3530


class Net(nn.Module):
    """Two convolutions with pooling, then two linear layers."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
        self.classifier = nn.Sequential(
            nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(),
            nn.Linear(128, 10))

    def forward(self, x):
        return self.classifier(self.features(x))


def read_idx(path):
    """Reads an IDX file (gzipped or not) into a numpy array."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = tuple(int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big")
                  for i in range(dims))
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def load_split(root, prefix):
    def find(name):
        for candidate in (name, name + ".gz"):
            if os.path.exists(os.path.join(root, candidate)):
                return os.path.join(root, candidate)
        raise SystemExit(f"fashion_mnist.py: {name} not found in {root} "
                         "(install dataset-fashion-mnist, or name another "
                         "folder in data_configs.dataset_path)")
    images = read_idx(find(f"{prefix}-images-idx3-ubyte"))
    labels = read_idx(find(f"{prefix}-labels-idx1-ubyte"))
    x = (torch.from_numpy(images.astype(np.float32) / 255.0) - MEAN) / STD
    return x.unsqueeze(1), torch.from_numpy(labels.astype(np.int64))


def share(n, num_clients, index, seed):
    """This client's IID share of n samples."""
    order = np.random.default_rng(seed).permutation(n)
    return torch.from_numpy(np.array_split(order, num_clients)[index])


def train(model, x, y, epochs, lr, batch, seed, prox=None, steps=0):
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    g = torch.Generator().manual_seed(seed)
    model.train()
    total, seen = 0.0, 0
    for _ in range(epochs):
        batches = torch.randperm(len(y), generator=g).split(batch)
        for idx in batches[:steps] if steps else batches:
            opt.zero_grad()
            loss = loss_fn(model(x[idx]), y[idx])
            objective = loss + prox.term() if prox else loss
            objective.backward()
            opt.step()
            total += loss.item() * len(idx)
            seen += len(idx)
    return seen, total / max(seen, 1)


@torch.no_grad()
def evaluate(model, x, y):
    model.eval()
    loss_sum, correct = 0.0, 0
    for idx in torch.arange(len(y)).split(1000):
        out = model(x[idx])
        loss_sum += nn.functional.cross_entropy(out, y[idx], reduction="sum").item()
        correct += (out.argmax(1) == y[idx]).sum().item()
    return {"accuracy": correct / len(y), "loss": loss_sum / len(y)}


def client_settings(path, overrides):
    cfg = read_client_config(path, overrides)
    data = cfg.get("data_configs", {})
    kw = data.get("dataset_kwargs", {})
    return {"root": data.get("dataset_path", "/usr/share/datasets/fashion-mnist"),
            "num_clients": int(kw.get("num_clients", 1)),
            "index": int(kw.get("client_id", 0)),
            "seed": int(kw.get("seed", 42)),
            "threads": int(cfg.get("train_configs", {}).get("num_threads", 0))}


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-c", "--config", help="client config file")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a key of the client config (as fedcaf --set; "
                        "data_configs keys move this client's data too)")
    p.add_argument("--init", metavar="PATH",
                   help="write the initial model (safetensors) and exit")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--steps", type=int, default=0,
                   help="at most this many batches per epoch (0: all)")
    p.add_argument("--model", choices=("cnn", "resnet"), default="cnn")
    p.add_argument("--float-only", action="store_true",
                   help="send and load only the float tensors (a workaround "
                        "fedcaf does not need; for comparison)")
    p.add_argument("--record", metavar="DIR",
                   help="save each model received and update sent (safetensors)")
    args = p.parse_args()

    torch.manual_seed(42)
    model = ResNetBN() if args.model == "resnet" else Net()

    def state():
        s = model.state_dict()
        if args.float_only:
            s = {k: v for k, v in s.items() if v.is_floating_point()}
        return s

    if args.init:
        os.makedirs(os.path.dirname(os.path.abspath(args.init)), exist_ok=True)
        fedcaf.save_safetensors(state(), args.init)
        return 0
    if not args.config:
        p.error("-c CONFIG is required (or --init PATH)")

    s = client_settings(args.config, args.set)
    torch.set_num_threads(s["threads"] or max(1, os.cpu_count() // 2))
    x, y = load_split(s["root"], "train")
    tx, ty = load_split(s["root"], "t10k")
    mine = share(len(y), s["num_clients"], s["index"], s["seed"])
    test = share(len(ty), s["num_clients"], s["index"], s["seed"])
    x, y, tx, ty = x[mine], y[mine], tx[test], ty[test]

    overrides = dict(kv.split("=", 1) for kv in args.set)
    with fedcaf.Client(args.config, set=overrides) as client:
        for task in client.tasks():
            model.load_state_dict(task.model_state(torch),
                                  strict=not args.float_only)
            scores = evaluate(model, tx, ty)  # the global model, on my data
            task.evaluate(scores, num_samples=len(ty))
            if task.evaluate_only:
                print(f"final model: accuracy {scores['accuracy']:.4f}", flush=True)
                continue
            if args.record:
                os.makedirs(args.record, exist_ok=True)
                fedcaf.save_safetensors(
                    model.state_dict(),
                    os.path.join(args.record, f"received-{task.round}.safetensors"))
            start = time.time()
            # FedProx when the server sets train_configs.proximal_mu
            prox = fedcaf.FedProx(model, task) if task.proximal_mu > 0 else None
            n, loss = train(model, x, y, args.epochs, args.lr, args.batch,
                            s["seed"] + task.round, prox, args.steps)
            if args.record:
                fedcaf.save_safetensors(
                    model.state_dict(),
                    os.path.join(args.record, f"sent-{task.round}.safetensors"))
            task.send(state(), num_samples=n, metrics={"loss": loss})
            print(f"round {task.round}: trained on {n} samples in "
                  f"{time.time() - start:.1f} s, loss {loss:.4f}; global model "
                  f"accuracy {scores['accuracy']:.4f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
