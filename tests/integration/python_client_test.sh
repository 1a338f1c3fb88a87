#!/usr/bin/env bash
# The Python client (fedcaf package, embedded C++ client) over real sockets:
# `fedcaf server -c configs/server_python.yaml` and two
# examples/python/fashion_mnist.py clients, 3 rounds on Fashion-MNIST:
# federated accuracy >= 0.85 and the server's models equal a plain-PyTorch
# FedAvg of the recorded updates; the same with secure aggregation on, within
# the quantizer's bound. Then a Python client whose arrays do not
# match the model is refused, naming the tensor.
#
#   python_client_test.sh FEDCAF SOURCE_DIR PYDIR [PYTHON [PART]]
# PART: fashion (the Fashion-MNIST runs, tier accuracy), small (the
# synthetic model's refusals, evaluation and Ctrl-C, tier system), or both
# (the default).
set -u
fedcaf=$1; src=$2; pydir=$3; python=${4:-/usr/bin/python3}; part=${5:-both}
export FEDCAF_PYTHON=$pydir PYTHONPATH=$pydir
. "$(dirname "$0")/lib.sh"

"$python" "$src/examples/python/fashion_mnist.py" --init "$out/init.safetensors" || exit 1
# fashion_run DIR [--set ...]: the server and two Python clients, records
# and reports in DIR.
fashion_run() {
  local dir=$1; shift; mkdir -p "$dir"
  local port=$(free_port) clients=() rc=0
  local uri="127.0.0.1:$port"
  timeout 600 "$fedcaf" server -c "$src/configs/server_python.yaml" \
    --set server_configs.comm_configs.grpc_configs.server_uri=$uri \
    --set client_configs.model_configs.path="$out/init.safetensors" \
    --set server_configs.save_global_model="$dir/global-{round}.safetensors" \
    "$@" --report "$dir/server.json" > "$dir/server.log" 2>&1 & pids+=($!)
  local server=$!
  for i in 1 2; do
    timeout 600 "$python" "$src/examples/python/fashion_mnist.py" \
      -c "$src/configs/client_$i.yaml" --record "$dir/rec$i" \
      --set comm_configs.grpc_configs.server_uri=$uri \
      > "$dir/client_$i.log" 2>&1 & pids+=($!); clients+=($!)
  done
  wait $server || rc=$?
  for c in "${clients[@]}"; do wait $c || rc=$?; done
  cat "$dir/server.log"
  if [ $rc -ne 0 ]; then
    echo "FAIL: a process exited non-zero"; cat "$dir"/client_*.log; exit 1
  fi
}
if [ "$part" != small ]; then
fashion_run "$out"
"$python" "$src/tests/integration/python_client_check.py" replay "$out" 3 || exit 1
# Secure aggregation, transparently (the embedded C++ client masks): each
# round's model is the replayed FedAvg within the quantizer's bound, n 2c /
# (2^b - 1) = 2 x 16 / (2^22 - 1) = 7.63e-6, plus float32 rounding of the
# result and of the replay (3e-7): measured up to 7.41e-6.
fashion_run "$out/secure" --set server_configs.secure_aggregation.enabled=true
grep -q "keys and shares exchanged" "$out/secure/client_1.log" ||
  { echo "FAIL: the Python client did not run secure aggregation"; exit 1; }
"$python" "$src/tests/integration/python_client_check.py" replay "$out/secure" 3 7.93e-6 ||
  exit 1

# Compression, transparently (the embedded C++ client encodes int8 deltas
# with error feedback and decodes int8 downloads), with FedProx's term from
# the server's train_configs.proximal_mu in the example's loss.
fashion_run "$out/compressed" \
  --set client_configs.comm_configs.compression.method=int8 \
  --set client_configs.comm_configs.compression.direction=both \
  --set client_configs.train_configs.proximal_mu=0.01
"$python" - "$out/compressed/server.json" <<'PY' || exit 1
import json, sys
r = json.load(open(sys.argv[1]))
assert r["ok"], r["failure"]
last = r["rounds"][-1]
acc = last["test_accuracy"]
print(f"int8 both ways, FedProx mu 0.01: federated accuracy {acc:.4f}, "
      f"upload ratio {last['compression_up']:.2f}, download ratio "
      f"{last['compression_down']:.2f}")
assert acc >= 0.85, f"accuracy {acc} < 0.85"
assert last["compression_up"] >= 3.8 and last["compression_down"] >= 3.8, last
PY
fi
[ "$part" = fashion ] && exit 0

# A small synthetic model for the refusals: one client, one round. The
# client's file has no data_configs: a Python client brings its own data.
printf 'client_id: Client1\ncomm_configs:\n  grpc_configs: {server_uri: 127.0.0.1:50051}\n' \
  > "$out/client_no_data.yaml"
port=$(free_port); uri="127.0.0.1:$port"
timeout 120 "$fedcaf" server -c "$src/configs/synthetic_dummy.yaml" \
  --set server_configs.comm_configs.grpc_configs.server_uri=$uri \
  --set server_configs.num_clients=1 --set server_configs.num_global_epochs=1 \
  --set client_configs.train_configs.trainer=python \
  --set client_configs.model_configs.total_bytes=4096 \
  --set client_configs.model_configs.num_tensors=4 \
  --set server_configs.federated_evaluation=true \
  --set server_configs.memory_mode=window \
  --set server_configs.aggregator=FedAdamAggregator \
  --report "$out/small.json" > "$out/small.log" 2>&1 & pids+=($!); server=$!
timeout 120 "$python" "$src/tests/integration/python_client_check.py" \
  refusals "$out/client_no_data.yaml" "$uri" || { cat "$out/small.log"; exit 1; }
wait $server || { echo "FAIL: the small server failed"; cat "$out/small.log"; exit 1; }
"$python" - "$out/small.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["ok"], r["failure"]
m = r["rounds"][0]["client_metrics"]
# It claimed 10 samples; an evaluation weighs what its client's update
# weighed (the update of 1 sample): a client cannot outweigh the others by
# what it claims in an evaluation.
assert m and m["means"]["accuracy"] == 0.5 and m["samples"] == 1, m
print("the final model's evaluation reached the report:", m)
PY
[ $? -eq 0 ] || { echo "FAIL: the final evaluation in the report"; exit 1; }
# Nothing listens on this port: Ctrl-C must stop the client at once.
port=$(free_port)
timeout 60 "$python" "$src/tests/integration/python_client_check.py" \
  interrupt "$src/configs/client_1.yaml" "127.0.0.1:$port" || exit 1
