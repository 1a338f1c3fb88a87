#!/usr/bin/env python3
"""A model trained by a multi-process job, federated as one client.

Each of the job's N ranks keeps only its dim-0 chunk of every parameter
(torch.chunk(p, N, 0)[rank], as ZeRO-3 and FSDP shard; by hand here) and
trains on its share of each batch of the client's data (data parallel).
Every rank runs a fedcaf client with the same client id and sends only its
chunks; the server joins them into the client's one update: one vote, one
weight. Written as torchrun code: RANK, WORLD_SIZE, MASTER_ADDR and
MASTER_PORT come from the environment, the ranks talk over gloo (CPU).

    fedcaf server -c configs/server_python.yaml \\
      --set server_configs.federated_evaluation=false
    deploy/torchrun-local.sh 2 python3 examples/python/sharded_fashion_mnist.py \\
      -c configs/client_1.yaml
    python3 examples/python/fashion_mnist.py -c configs/client_2.yaml

Sharded clients do not run with federated evaluation (no rank holds the
model for the server's final evaluation), hence the server's --set.
Debian 12's torch 1.13 has neither a working torchrun under Python 3.11 nor
an importable FSDP: deploy/torchrun-local.sh sets the environment torchrun
would, and the sharding is done by hand. Under torch 2.x the script runs
unchanged under `torchrun --nproc-per-node 2`; with FSDP2 (fully_shard) its
loop would send {name: p.to_local() for name, p in model.named_parameters()}.

--batch, --lr, --epochs and --steps mean what they mean for fashion_mnist.py:
a step takes the same --batch samples of the client's data, split among the
ranks, so both examples train alike (the same update, up to rounding).
`--report PATH` writes each rank's client report (JSON); "{rank}" in PATH
is replaced by the rank.
"""

import argparse
import json
import os
import sys
import time

import torch
import torch.distributed as dist
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
# fedcaf as fashion_mnist.py finds it (installed, or this source tree's build)
from fashion_mnist import (Net, client_settings, fedcaf, load_split,  # noqa: E402
                           share)


def rows_of_rank(rows, rank, ranks):
    """Rows [begin, end) of a tensor that torch.chunk(t, ranks, 0)[rank]
    holds (empty where torch.chunk makes fewer chunks than ranks)."""
    per = -(-rows // ranks)
    return min(rows, per * rank), min(rows, per * (rank + 1))


class Zero3:
    """ZeRO-3 by hand: this rank keeps its rows of every parameter; the full
    parameters exist only from gather() to reduce_grads()."""

    def __init__(self, model, rank, ranks):
        self.rank, self.ranks = rank, ranks
        self.params = dict(model.named_parameters())
        self.shapes = {n: p.shape for n, p in self.params.items()}
        self.rows = {n: rows_of_rank(s[0], rank, ranks) for n, s in self.shapes.items()}
        self.shards = {n: nn.Parameter(p.detach()[slice(*self.rows[n])].clone())
                       for n, p in self.params.items()}
        self.free()

    def load(self, local):
        """Takes this rank's rows of the model (a task's model_state)."""
        with torch.no_grad():
            for name, shard in self.shards.items():
                if local[name].shape != shard.shape:
                    raise SystemExit(f"rank {self.rank}: {name} is "
                                     f"{tuple(local[name].shape)} here, this "
                                     f"rank holds {tuple(shard.shape)}")
                shard.copy_(local[name])

    def gather(self):
        """All-gathers every parameter from the ranks' chunks (padded to the
        largest: gloo's all_gather takes tensors of one size)."""
        for name, p in self.params.items():
            rows, shard = self.shapes[name][0], self.shards[name].detach()
            padded = shard.new_zeros((-(-rows // self.ranks),) + shard.shape[1:])
            padded[:len(shard)] = shard
            parts = [torch.empty_like(padded) for _ in range(self.ranks)]
            dist.all_gather(parts, padded)
            p.data = torch.cat(parts)[:rows]

    def reduce_grads(self):
        """Sums every gradient over the ranks (gloo has no reduce_scatter),
        keeps this rank's rows of it, frees the full parameters."""
        for name, p in self.params.items():
            dist.all_reduce(p.grad)
            self.shards[name].grad = p.grad[slice(*self.rows[name])].clone()
        self.free()

    def free(self):
        for p in self.params.values():
            p.data, p.grad = torch.empty(0), None


def all_sum(*values):
    t = torch.tensor(values, dtype=torch.float64)
    dist.all_reduce(t)
    return t.tolist()


def train(model, zero, x, y, args, seed):
    """fashion_mnist.py's train(), the batch split among the ranks; returns
    the client's samples and mean loss (the same on every rank)."""
    opt = torch.optim.SGD(zero.shards.values(), lr=args.lr, momentum=0.9)
    g = torch.Generator().manual_seed(seed)
    model.train()
    total, seen = 0.0, 0
    for _ in range(args.epochs):
        batches = torch.randperm(len(y), generator=g).split(args.batch)
        for idx in batches[:args.steps] if args.steps else batches:
            mine = idx.tensor_split(zero.ranks)[zero.rank]
            zero.gather()
            # the batch's mean loss is the sum of each rank's part of it
            loss = nn.functional.cross_entropy(model(x[mine]), y[mine],
                                               reduction="sum") / len(idx)
            loss.backward()
            zero.reduce_grads()
            opt.step()
            total += loss.item() * len(idx)
            seen += len(mine)
    seen, total = all_sum(seen, total)
    return int(seen), total / max(seen, 1)


@torch.no_grad()
def evaluate(model, zero, x, y):
    """The gathered model's accuracy on the client's test data, each rank
    scoring its part."""
    zero.gather()
    model.eval()
    mine = torch.arange(len(y)).tensor_split(zero.ranks)[zero.rank]
    out = model(x[mine])
    loss, correct = all_sum(
        nn.functional.cross_entropy(out, y[mine], reduction="sum").item(),
        (out.argmax(1) == y[mine]).sum().item())
    zero.free()
    return {"accuracy": correct / len(y), "loss": loss / len(y)}


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-c", "--config", required=True, help="client config file")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a key of the client config (as fedcaf --set)")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--batch", type=int, default=64,
                   help="the client's samples per step, split among the ranks")
    p.add_argument("--steps", type=int, default=0,
                   help="at most this many batches per epoch (0: all)")
    p.add_argument("--report", metavar="PATH",
                   help="write this rank's client report (JSON); {rank} in "
                        "PATH is the rank")
    args = p.parse_args()

    dist.init_process_group("gloo")  # RANK, WORLD_SIZE, MASTER_ADDR/PORT
    rank, ranks = dist.get_rank(), dist.get_world_size()
    s = client_settings(args.config, args.set)
    torch.set_num_threads(s["threads"] or max(1, os.cpu_count() // 2 // ranks))
    x, y = load_split(s["root"], "train")
    tx, ty = load_split(s["root"], "t10k")
    mine = share(len(y), s["num_clients"], s["index"], s["seed"])
    test = share(len(ty), s["num_clients"], s["index"], s["seed"])
    x, y, tx, ty = x[mine], y[mine], tx[test], ty[test]

    torch.manual_seed(42)
    model = Net()
    zero = Zero3(model, rank, ranks)
    overrides = dict(kv.split("=", 1) for kv in args.set)
    with fedcaf.Client(args.config, set=overrides, shard="torchrun") as client:
        for task in client.tasks():
            if task.evaluate_only:  # not sent to sharded clients
                continue
            zero.load(task.model_state(torch))  # this rank's rows
            scores = evaluate(model, zero, tx, ty)  # the global model
            if rank == 0:  # the client's evaluation, once
                task.evaluate(scores, num_samples=len(ty))
            start = time.time()
            n, loss = train(model, zero, x, y, args, s["seed"] + task.round)
            local = {name: shard.detach() for name, shard in zero.shards.items()}
            task.send(local, num_samples=n, metrics={"loss": loss})
            if rank == 0:
                print(f"round {task.round}: {ranks} ranks trained on {n} "
                      f"samples in {time.time() - start:.1f} s, loss "
                      f"{loss:.4f}; global model accuracy "
                      f"{scores['accuracy']:.4f}", flush=True)
        if args.report:
            with open(args.report.replace("{rank}", str(rank)), "w") as f:
                json.dump(client.report(), f, indent=1)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
