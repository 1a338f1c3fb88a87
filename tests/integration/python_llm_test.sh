#!/usr/bin/env bash
# The 16-bit path with the Python client: `fedcaf server -c
# configs/server_llm_python.yaml` and two examples/python/causal_lm_bf16.py
# clients (a small bfloat16 causal transformer with Llama-style names, trained
# on the Debian copyright files), 3 short rounds: the run succeeds, each round
# carries the clients' evaluation loss, the last round's loss is below the
# initial model's, the wire carried 2 bytes a parameter, and the server's saved
# global models are BF16 under the Llama-style names.
set -u
fedcaf=$1; src=$2; pydir=$3; python=${4:-/usr/bin/python3}
export FEDCAF_PYTHON=$pydir PYTHONPATH=$pydir
# Few steps on 512 KiB of text (a 32 KiB held-out share): bfloat16 matrix
# products run ~15 x slower than float32 on CPUs without AVX-512 BF16
# (measured here: 50 products of 256 x 256 took 0.44 s against 0.028 s), and
# 25 steps on the example's default 2 MiB took 120 s a round on such a CPU.
rounds=3; steps=${FEDCAF_LLM_STEPS:-10}; text=${FEDCAF_LLM_BYTES:-524288}
. "$(dirname "$0")/lib.sh"
port=$(free_port)
uri="127.0.0.1:$port"

"$python" "$src/examples/python/causal_lm_bf16.py" --init "$out/init.safetensors" || exit 1
timeout 300 "$fedcaf" server -c "$src/configs/server_llm_python.yaml" \
  --set server_configs.comm_configs.grpc_configs.server_uri=$uri \
  --set server_configs.num_global_epochs=$rounds \
  --set client_configs.model_configs.path="$out/init.safetensors" \
  --set server_configs.save_global_model="$out/global-{round}.safetensors" \
  --report "$out/server.json" > "$out/server.log" 2>&1 & pids+=($!); server=$!
clients=()
for i in 1 2; do
  timeout 300 "$python" "$src/examples/python/causal_lm_bf16.py" \
    -c "$src/configs/client_$i.yaml" --steps $steps --bytes $text \
    --set comm_configs.grpc_configs.server_uri=$uri \
    > "$out/client_$i.log" 2>&1 & pids+=($!); clients+=($!)
done
rc=0
wait $server || rc=$?
for c in "${clients[@]}"; do wait $c || rc=$?; done
cat "$out/server.log"
if [ $rc -ne 0 ]; then
  echo "FAIL: a process exited non-zero"; cat "$out"/client_*.log; exit 1
fi
"$python" - "$out" $rounds <<'PY'
import json, os, re, struct, sys
out, rounds = sys.argv[1], int(sys.argv[2])

def fail(why):
    print("FAIL:", why)
    sys.exit(1)

report = json.load(open(f"{out}/server.json"))
if not report["ok"]:
    fail(report["failure"])
if len(report["rounds"]) != rounds:
    fail(f"{len(report['rounds'])} rounds reported, {rounds} expected")
losses = []
for r in report["rounds"]:
    cm = r["client_metrics"]
    if not cm or cm["clients"] != 2 or "loss" not in cm["means"] \
            or "perplexity" not in cm["means"]:
        fail(f"round {r['round']}: no clients' evaluation loss: {cm}")
    tm = r["client_train_metrics"]
    if not tm or "loss" not in tm["means"]:
        fail(f"round {r['round']}: no training loss: {tm}")
    losses.append(cm["means"]["loss"])
log = open(f"{out}/server.log").read()
m = re.search(r"evaluation of the initial model: loss ([0-9.]+)", log)
if not m:
    fail("the server logged no evaluation of the initial model")
initial = float(m.group(1))
print(f"evaluation loss: initial {initial:.4f}, rounds "
      + ", ".join(f"{x:.4f}" for x in losses))
if not losses[-1] < initial or not losses[-1] < losses[0]:
    fail(f"the loss did not fall: initial {initial}, rounds {losses}")

def header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        h = json.loads(f.read(n))
    h.pop("__metadata__", None)
    return h

names = {"model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"}
for i in range(2):
    names |= {f"model.layers.{i}.{n}.weight" for n in (
        "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
        "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj",
        "input_layernorm", "post_attention_layernorm")}
# The int64 position buffer: carried as bf16, saved as I64, 0 .. 127 as the
# clients hold it (the rounded mean of equal values).
names.add("model.position_ids")
params = 0
for r in range(1, rounds + 1):
    path = f"{out}/global-{r}.safetensors"
    h = header(path)
    if set(h) != names:
        fail(f"global-{r}: names {sorted(set(h) ^ names)} differ")
    pos = h.pop("model.position_ids")
    bad = {k: t["dtype"] for k, t in h.items() if t["dtype"] != "BF16"}
    if bad or pos["dtype"] != "I64" or pos["shape"] != [1, 128]:
        fail(f"global-{r}: not BF16: {bad}, position_ids {pos}")
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        f.seek(8 + n + pos["data_offsets"][0])
        values = struct.unpack("<128q", f.read(8 * 128))
    if list(values) != list(range(128)):
        fail(f"global-{r}: position_ids {values[:8]} ...")
    params = 128 + sum(t["data_offsets"][1] - t["data_offsets"][0]
                       for t in h.values()) // 2
# 2 bytes a parameter each way, not 4 (2 clients a round; a little framing)
for r in report["rounds"]:
    if not 2 * 2 * params <= r["bytes_up"] < 2 * 2 * params * 1.1:
        fail(f"round {r['round']}: {r['bytes_up']} bytes up for 2 x {params} "
             "bf16 parameters")
print(f"global models BF16 with Llama-style names ({len(names)} tensors, "
      f"{params} parameters), position_ids I64 0 .. 127; "
      f"{report['rounds'][-1]['bytes_up']} bytes up a round")
PY
