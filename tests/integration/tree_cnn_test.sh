#!/usr/bin/env bash
# The Fashion-MNIST CNN through a tree (accuracy tier): 8 clients (IID
# eighths, one thread each), 2 rounds, FedAvg; flat (one server) and as a
# tree (the root, relays RA and RB, 4 clients under each), every process a
# real one over loopback. Every client trains the same model on the same
# data in both runs (the trainer reseeds per round), so the two differ only
# in how their updates were summed: round 1's models agree element by
# element within 4 float32 roundings of the tensor's largest value (the
# bound of docs/design.md, "Trees of aggregators"), and after round 2 (whose
# training amplifies those last bits) the test accuracy within 0.002.
#
#   tests/integration/tree_cnn_test.sh build/fedcaf [python3]
set -u
fedcaf=$1
py=${2:-/usr/bin/python3}
out=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2> /dev/null; done; wait 2> /dev/null; rm -rf "$out"' EXIT
base=$(( 20000 + RANDOM % 20000 ))
root_port=$base

server() { # NAME NUM_CLIENTS RELAYS
  cat > "$out/$1.yaml" <<EOF
server_configs:
  num_clients: $2
  num_global_epochs: 2
  memory_mode: window
  relays: $3
  scheduler_kwargs: {round_deadline_s: 900}
  comm_configs:
    grpc_configs: {server_uri: 127.0.0.1:$root_port}
  save_global_model: $out/$1-{round}.safetensors
client_configs:
  train_configs:
    trainer: VanillaTrainer
    num_local_epochs: 1
    optim: SGD
    optim_args: {lr: 0.05, momentum: 0.9}
    train_batch_size: 64
  model_configs: {model_name: CNN, seed: 42}
EOF
}
client() { # I PORT
  cat > "$out/C$1.yaml" <<EOF
client_id: C$1
train_configs: {num_threads: 1}
data_configs:
  dataset_kwargs: {num_clients: 8, client_id: $(( $1 - 1 )), partition_strategy: iid, seed: 42}
comm_configs:
  grpc_configs: {server_uri: 127.0.0.1:$2}
EOF
}
relay() { # NAME PORT
  cat > "$out/$1.yaml" <<EOF
client_id: $1
comm_configs:
  grpc_configs: {server_uri: 127.0.0.1:$root_port}
server_configs:
  num_clients: 4
  memory_mode: window
  scheduler_kwargs: {round_deadline_s: 900}
  comm_configs:
    grpc_configs: {server_uri: 127.0.0.1:$2}
EOF
}
bg() { timeout 900 "$@" & pids+=($!); }

server flat 8 "{}"
timeout 900 "$fedcaf" server -c "$out/flat.yaml" --report "$out/flat.json" > "$out/flat.log" 2>&1 &
root=$!; pids+=($root)
for i in 1 2 3 4 5 6 7 8; do client "$i" "$root_port"; bg "$fedcaf" client -c "$out/C$i.yaml" > "$out/flat_C$i.log" 2>&1; done
wait "$root" || { echo "FAIL: the flat run: $(tail -n 3 "$out/flat.log")"; exit 1; }
wait

server tree 2 "{RA: 4, RB: 4}"
relay RA $((base + 1)); relay RB $((base + 2))
timeout 900 "$fedcaf" server -c "$out/tree.yaml" --report "$out/tree.json" > "$out/tree.log" 2>&1 &
root=$!; pids+=($root)
bg "$fedcaf" relay -c "$out/RA.yaml" > "$out/RA.log" 2>&1
bg "$fedcaf" relay -c "$out/RB.yaml" > "$out/RB.log" 2>&1
for i in 1 2 3 4 5 6 7 8; do
  client "$i" $(( base + 1 + (i - 1) / 4 ))
  bg "$fedcaf" client -c "$out/C$i.yaml" > "$out/tree_C$i.log" 2>&1
done
wait "$root" || { echo "FAIL: the tree: $(tail -n 3 "$out/tree.log")"; exit 1; }
wait

"$py" - "$out" <<'PY'
import json, struct, sys
import numpy as np
out = sys.argv[1]

def load(path):
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    return {k: np.frombuffer(data[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]], dtype=np.float32)
            for k, v in header.items() if k != "__metadata__" and v["dtype"] == "F32"}

# Round 1: the same updates summed two ways. Each element within 4 float32
# roundings of its tensor's largest value (one per relay level, the final
# one, and slack).
flat, tree = load(f"{out}/flat-1.safetensors"), load(f"{out}/tree-1.safetensors")
worst, differ, total = 0.0, 0, 0
for name, f in flat.items():
    t = tree[name]
    scale = float(np.abs(f).max()) * 2.0**-24
    worst = max(worst, float(np.abs(t.astype(np.float64) - f).max()) / scale)
    differ += int((t != f).sum()); total += f.size
acc = [json.load(open(f"{out}/{n}.json"))["rounds"][-1]["test_accuracy"] for n in ("flat", "tree")]
print(f"   round 1: {differ} of {total} elements differ, at most {worst:.2f} x 2^-24 x their tensor's largest; "
      f"after round 2 (trained from those): test accuracy flat {acc[0]:.4f}, tree {acc[1]:.4f}")
assert worst <= 4, worst
assert abs(acc[0] - acc[1]) <= 0.002, acc
print("ok: the CNN through a tree of 2 relays: round 1 within 4 float32 roundings of flat FedAvg, accuracy within 0.002")
PY
