#!/usr/bin/env python3
"""A small causal transformer in bfloat16 as a fedcaf client: the 16-bit path.

    /usr/bin/python3 examples/python/causal_lm_bf16.py --init build/examples/causal_lm_bf16.safetensors
    fedcaf server -c configs/server_llm_python.yaml
    python3 examples/python/causal_lm_bf16.py -c configs/client_1.yaml
    python3 examples/python/causal_lm_bf16.py -c configs/client_2.yaml

The model is a decoder-only transformer in plain PyTorch (byte vocabulary of
256, d_model 128, 2 layers of 4 heads, context 128, RMSNorm, SwiGLU, rotary
positions, a causal mask from torch.triu) whose parameters are
torch.bfloat16 and whose state_dict names are Llama's
(model.embed_tokens.weight, model.layers.N.self_attn.q_proj.weight, ...,
model.norm.weight, lm_head.weight), plus an int64 position buffer in the
state_dict (model.position_ids, as BERT-style models and older Hugging Face
checkpoints keep one): it travels as bf16 and comes back int64. The global model arrives through
task.model_state(torch) (torch.frombuffer(..., dtype=torch.bfloat16), no
copy) and the update leaves as model.state_dict(): the wire, the server's
aggregation input and its saved models are all BF16.

Training: forward and backward run in bfloat16 on the bf16 parameters; AdamW
steps an fp32 master copy of them (made from the received global model at
the start of each round, with fresh optimizer state), and after each step the
master is rounded back into the bf16 parameters. Only bf16 is ever sent.

Data: text the machine has, the Debian copyright files
(/usr/share/doc/*/copyright, sorted paths, the first --bytes bytes, 2 MiB by
default). The last 1/16 is held out for evaluation; the rest is split into
data_configs.dataset_kwargs.num_clients contiguous shards and this client
trains on shard client_id (its -c client config, as fashion_mnist.py reads
it). Each task the client evaluates the global model on its share of the
held-out windows and reports loss and perplexity (task.evaluate); the server
reports their weighted mean (federated_evaluation: true).
"""

import argparse
import glob
import math
import os
import sys
import time

import torch
from torch import nn
from torch.nn import functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
try:
    import fedcaf  # pip-installed, the .deb's, or on PYTHONPATH
except ImportError:  # run from a source tree built with cmake --build build
    sys.path.insert(0, os.path.join(HERE, "..", "..", "build", "python"))
    import fedcaf  # noqa: E402
sys.path.insert(0, HERE)
from client_config import read_client_config  # noqa: E402

VOCAB, D_MODEL, LAYERS, HEADS, FFN, CONTEXT = 256, 128, 2, 4, 352, 128
DTYPE = torch.bfloat16


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):  # in fp32, as Llama does, then back to bf16
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(x.dtype)


def rotary(x, cos, sin):
    """Rotary position embedding on (batch, heads, time, head_dim)."""
    x1, x2 = x[..., ::2], x[..., 1::2]
    return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), -1).flatten(-2)


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.q_proj = nn.Linear(D_MODEL, D_MODEL, bias=False)
        self.k_proj = nn.Linear(D_MODEL, D_MODEL, bias=False)
        self.v_proj = nn.Linear(D_MODEL, D_MODEL, bias=False)
        self.o_proj = nn.Linear(D_MODEL, D_MODEL, bias=False)

    def forward(self, x, cos, sin, mask):
        b, t, _ = x.shape
        hd = D_MODEL // HEADS

        def heads(h):
            return h.view(b, t, HEADS, hd).transpose(1, 2)
        q = rotary(heads(self.q_proj(x)), cos, sin)
        k = rotary(heads(self.k_proj(x)), cos, sin)
        v = heads(self.v_proj(x))
        scores = (q @ k.transpose(-2, -1)).float() / math.sqrt(hd)
        scores = scores.masked_fill(mask[:t, :t], float("-inf"))
        y = scores.softmax(-1).to(v.dtype) @ v
        return self.o_proj(y.transpose(1, 2).reshape(b, t, D_MODEL))


class MLP(nn.Module):  # SwiGLU
    def __init__(self):
        super().__init__()
        self.gate_proj = nn.Linear(D_MODEL, FFN, bias=False)
        self.up_proj = nn.Linear(D_MODEL, FFN, bias=False)
        self.down_proj = nn.Linear(FFN, D_MODEL, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.self_attn = Attention()
        self.mlp = MLP()
        self.input_layernorm = RMSNorm(D_MODEL)
        self.post_attention_layernorm = RMSNorm(D_MODEL)

    def forward(self, x, cos, sin, mask):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask)
        return x + self.mlp(self.post_attention_layernorm(x))


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed_tokens = nn.Embedding(VOCAB, D_MODEL)
        self.layers = nn.ModuleList(Layer() for _ in range(LAYERS))
        self.norm = RMSNorm(D_MODEL)
        # An integer buffer in the state_dict: fedcaf carries it in the
        # model's bf16 (exact up to 256) and hands it back as int64.
        self.register_buffer("position_ids", torch.arange(CONTEXT)[None, :])


class CausalLM(nn.Module):
    """state_dict names as Llama's: model.* and lm_head.weight."""

    def __init__(self):
        super().__init__()
        self.model = Decoder()
        self.lm_head = nn.Linear(D_MODEL, VOCAB, bias=False)
        hd = D_MODEL // HEADS
        freq = 1.0 / (10000 ** (torch.arange(0, hd, 2).float() / hd))
        angle = torch.outer(torch.arange(CONTEXT).float(), freq)
        self.register_buffer("cos", angle.cos(), persistent=False)
        self.register_buffer("sin", angle.sin(), persistent=False)
        self.register_buffer("mask", torch.triu(
            torch.ones(CONTEXT, CONTEXT, dtype=torch.bool), diagonal=1),
            persistent=False)

    def forward(self, tokens):
        t = tokens.shape[1]
        x = self.model.embed_tokens(tokens)
        positions = self.model.position_ids[0, :t]
        cos = self.cos[positions].to(x.dtype)
        sin = self.sin[positions].to(x.dtype)
        for layer in self.model.layers:
            x = layer(x, cos, sin, self.mask)
        return self.lm_head(self.model.norm(x))


def build_model():
    torch.manual_seed(42)
    model = CausalLM()
    for name, p in model.named_parameters():
        if name.endswith("norm.weight"):
            continue
        std = 0.02
        if name.endswith(("o_proj.weight", "down_proj.weight")):
            std = 0.02 / math.sqrt(2 * LAYERS)
        nn.init.normal_(p, std=std)
    return model.to(DTYPE)  # parameters in bfloat16; the buffers cos/sin too


def load_text(max_bytes):
    """The Debian copyright files, sorted, up to max_bytes bytes."""
    out, size = [], 0
    for path in sorted(glob.glob("/usr/share/doc/*/copyright")):
        try:
            with open(path, "rb") as f:
                data = f.read(max_bytes - size)
        except OSError:
            continue
        out.append(data)
        size += len(data)
        if size >= max_bytes:
            break
    if size < 4 * CONTEXT:
        raise SystemExit("causal_lm_bf16.py: too little text under "
                         "/usr/share/doc/*/copyright")
    return torch.frombuffer(bytearray(b"".join(out)), dtype=torch.uint8).long()


def split(text, num_clients, index):
    """(this client's training shard, its share of the held-out windows)."""
    tail = len(text) // 16
    train, held = text[:-tail], text[-tail:]
    shard = train.tensor_split(num_clients)[index]
    n = (len(held) - 1) // CONTEXT  # non-overlapping windows (+1 for targets)
    starts = torch.arange(n) * CONTEXT
    mine = starts.tensor_split(num_clients)[index]
    windows = torch.stack([held[s:s + CONTEXT + 1] for s in mine.tolist()])
    return shard, windows


def train(model, shard, steps, lr, batch, seed):
    """bf16 forward/backward; AdamW on an fp32 master copy, rounded to bf16."""
    params = [p for p in model.parameters()]
    master = [p.detach().float().requires_grad_() for p in params]
    opt = torch.optim.AdamW(master, lr=lr, betas=(0.9, 0.95), weight_decay=0.0)
    g = torch.Generator().manual_seed(seed)
    model.train()
    total = 0.0
    for _ in range(steps):
        starts = torch.randint(0, len(shard) - CONTEXT - 1, (batch,), generator=g)
        xy = torch.stack([shard[s:s + CONTEXT + 1] for s in starts.tolist()])
        logits = model(xy[:, :-1])
        loss = F.cross_entropy(logits.float().reshape(-1, VOCAB), xy[:, 1:].reshape(-1))
        model.zero_grad(set_to_none=True)
        loss.backward()
        for m, p in zip(master, params):
            m.grad = p.grad.float()
        torch.nn.utils.clip_grad_norm_(master, 1.0)
        opt.step()
        with torch.no_grad():
            for m, p in zip(master, params):
                p.copy_(m)  # rounds to bf16
        total += loss.item()
    return steps * batch, total / max(steps, 1)


@torch.no_grad()
def evaluate(model, windows, batch=32):
    model.eval()
    loss_sum, tokens = 0.0, 0
    for w in windows.split(batch):
        logits = model(w[:, :-1])
        loss_sum += F.cross_entropy(logits.float().reshape(-1, VOCAB),
                                    w[:, 1:].reshape(-1), reduction="sum").item()
        tokens += w[:, 1:].numel()
    loss = loss_sum / max(tokens, 1)
    return {"loss": loss, "perplexity": math.exp(loss)}


def client_settings(path, overrides):
    cfg = read_client_config(path, overrides)
    kw = cfg.get("data_configs", {}).get("dataset_kwargs", {})
    return {"num_clients": int(kw.get("num_clients", 1)),
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
                   help="write the initial bf16 model (safetensors) and exit")
    p.add_argument("--steps", type=int, default=120, help="training steps per round")
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--bytes", type=int, default=2 << 20,
                   help="bytes of text to read (default 2 MiB)")
    args = p.parse_args()

    model = build_model()
    if args.init:
        os.makedirs(os.path.dirname(os.path.abspath(args.init)), exist_ok=True)
        fedcaf.save_safetensors(model.state_dict(), args.init)
        return 0
    if not args.config:
        p.error("-c CONFIG is required (or --init PATH)")

    s = client_settings(args.config, args.set)
    torch.set_num_threads(s["threads"] or max(1, os.cpu_count() // 2))
    shard, windows = split(load_text(args.bytes), s["num_clients"], s["index"])

    overrides = dict(kv.split("=", 1) for kv in args.set)
    with fedcaf.Client(args.config, set=overrides) as client:
        for task in client.tasks():
            model.load_state_dict(task.model_state(torch))  # bf16, no cast
            start = time.time()
            scores = evaluate(model, windows)  # the global model, on my data
            task.evaluate(scores, num_samples=len(windows))
            if task.evaluate_only:
                print(f"final model: loss {scores['loss']:.4f}, perplexity "
                      f"{scores['perplexity']:.2f}", flush=True)
                continue
            n, loss = train(model, shard, args.steps, args.lr, args.batch,
                            s["seed"] + 1000 * s["index"] + task.round)
            task.send(model.state_dict(), num_samples=n, metrics={"loss": loss})
            print(f"round {task.round}: global model loss {scores['loss']:.4f} "
                  f"(perplexity {scores['perplexity']:.2f}); trained {args.steps} "
                  f"steps in {time.time() - start:.1f} s, training loss {loss:.4f}",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
