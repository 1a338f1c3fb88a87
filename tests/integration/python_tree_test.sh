#!/usr/bin/env bash
# Federated evaluation through a tree: four Python clients (examples/python/
# fashion_mnist.py, each an IID quarter of Fashion-MNIST's training and test
# sets, FEDCAF_TREE_STEPS (80) SGD steps a round), ROUNDS (2) rounds, with
# the root server evaluating nothing itself; once flat (one server, 4
# clients), once as a tree (the root, `fedcaf relay` RA and RB, two
# clients under each), every process a real one on 127.0.0.1. The relays
# send their children's evaluation of each round's model up with their
# sums (and the final model's, from their children's final evaluation):
# the root's report has test_accuracy and test_loss for every round, each
# within 0.005 (accuracy) of the flat run's.
#
#   python_tree_test.sh FEDCAF SOURCE_DIR PYTHONPATH [PYTHON]
set -u
fedcaf=$1; src=$2; pydir=$3; python=${4:-/usr/bin/python3}
rounds=${FEDCAF_TREE_ROUNDS:-2}; steps=${FEDCAF_TREE_STEPS:-80}
data=/usr/share/datasets/fashion-mnist
[ -e "$data/train-images-idx3-ubyte.gz" ] || { echo "skipped: no $data"; exit 77; }
export PYTHONPATH=$pydir
. "$(dirname "$0")/lib.sh"

"$python" "$src/examples/python/fashion_mnist.py" --init "$out/init.safetensors" ||
  { fail "fashion_mnist.py --init"; finish; }

root_server() { # NAME PORT NUM_CLIENTS RELAYS
  timeout 600 "$fedcaf" server -c "$src/configs/server_python.yaml" \
    --set "server_configs.comm_configs.grpc_configs.server_uri=127.0.0.1:$2" \
    --set "server_configs.num_clients=$3" --set "server_configs.relays=$4" \
    --set "data_configs.dataset_kwargs.num_clients=$3" \
    --set "server_configs.num_global_epochs=$rounds" \
    --set "client_configs.model_configs.path=$out/init.safetensors" \
    --report "$out/$1.json" > "$out/$1.log" 2>&1 &
  pids+=($!); root=$!
}
python_client() { # K PORT RUN
  (cd "$out" && exec timeout 600 "$python" "$src/examples/python/fashion_mnist.py" \
     -c "$src/configs/client_1.yaml" --steps "$steps" \
     --set "client_id=Client$1" --set data_configs.dataset_kwargs.num_clients=4 \
     --set "data_configs.dataset_kwargs.client_id=$(( $1 - 1 ))" \
     --set "comm_configs.grpc_configs.server_uri=127.0.0.1:$2") \
    > "$out/$3_C$1.log" 2>&1 &
  pids+=($!)
}
relay() { # NAME PORT ROOT_PORT
  cat > "$out/$1.yaml" <<EOF
client_id: $1
comm_configs:
  grpc_configs: {server_uri: 127.0.0.1:$3}
server_configs:
  num_clients: 2
  scheduler_kwargs: {round_deadline_s: 600}
  comm_configs:
    grpc_configs: {server_uri: 127.0.0.1:$2}
EOF
  timeout 600 "$fedcaf" relay -c "$out/$1.yaml" > "$out/$1.log" 2>&1 &
  pids+=($!)
}

port=$(free_port)
root_server flat "$port" 4 "{}"
for k in 1 2 3 4; do python_client "$k" "$port" flat; done
wait "$root" || fail "the flat run: $(tail -n 2 "$out/flat.log")"

port=$(free_port); ra=$(free_port); rb=$(free_port)
root_server tree "$port" 2 "{RA: 2, RB: 2}"
relay RA "$ra" "$port"; relay RB "$rb" "$port"
for k in 1 2; do python_client "$k" "$ra" tree; done
for k in 3 4; do python_client "$k" "$rb" tree; done
wait "$root" || fail "the tree: $(tail -n 2 "$out/tree.log")"
sleep 1

"$python" - "$out/flat.json" "$out/tree.json" "$rounds" <<'PY' && pass "$(cat "$out/verdict" 2> /dev/null)" || fail "$(cat "$out/verdict" 2> /dev/null)"
import json, os, sys
flat, tree = (json.load(open(p)) for p in sys.argv[1:3])
rounds = int(sys.argv[3])
verdict = os.path.join(os.path.dirname(sys.argv[1]), "verdict")
def acc(r):
    return [x.get("test_accuracy") for x in r["rounds"]]
a, b = acc(flat), acc(tree)
lines = ", ".join(f"round {i + 1}: flat {x if x is None else round(x, 4)} "
                  f"tree {y if y is None else round(y, 4)}" for i, (x, y) in enumerate(zip(a, b)))
ok = (flat["ok"] and tree["ok"] and len(a) == len(b) == rounds and
      None not in a and None not in b and
      all(abs(x - y) <= 0.005 for x, y in zip(a, b)) and
      all(x.get("test_loss") is not None for x in tree["rounds"]))
open(verdict, "w").write(("the root of 2 relays x 2 Python clients reports every round's "
                          "federated accuracy within 0.005 of the flat run's: " if ok else
                          "the tree's federated accuracy: ") + lines)
sys.exit(0 if ok else 1)
PY
finish
