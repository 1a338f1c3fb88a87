#!/usr/bin/env bash
# A model with integer buffers federated unmodified: the ResNet-style CNN
# of examples/python/resnet_bn.py (BatchNorm after every convolution, three
# int64 num_batches_tracked buffers) on Fashion-MNIST, shortened to
# FEDCAF_IB_ROUNDS rounds of FEDCAF_IB_STEPS batches per client:
#
#   python   `fedcaf server -c configs/server_python.yaml` and two
#            examples/python/fashion_mnist.py --model resnet clients, the
#            state_dict sent and loaded as it is; then the same with the
#            workaround other setups need (--float-only: only the float
#            tensors sent, loaded with strict=False). The full model's
#            accuracy is at least the workaround's (within 0.005), and every
#            saved global model holds the counters as I64, each the clients'
#            mean: rounds x steps (both clients train as many steps).
#   script   `fedcaf simulate -c configs/torchscript.yaml` with the same
#            network exported to TorchScript (export_torchscript.py --model
#            resnet): fedcaf's C++ trainer runs it; the saved model's
#            counters are I64 and equal rounds x steps, except the stem's,
#            which aggregator_kwargs.tensor_rules keeps (0, as exported);
#            the accuracy is printed beside the Python run's.
#
#   int_buffers_test.sh FEDCAF SOURCE_DIR PYDIR [PYTHON]
set -u
fedcaf=$1; src=$2; pydir=$3; python=${4:-/usr/bin/python3}
rounds=${FEDCAF_IB_ROUNDS:-2}; steps=${FEDCAF_IB_STEPS:-120}
export FEDCAF_PYTHON=$pydir PYTHONPATH=$pydir
. "$(dirname "$0")/lib.sh"
example=$src/examples/python/fashion_mnist.py

# python_run NAME [EXAMPLE_ARGS...]: the server and two Python clients.
python_run() {
  local name=$1; shift
  local dir=$out/$name port; port=$(free_port); mkdir -p "$dir"
  local uri=127.0.0.1:$port clients=() rc=0 c
  "$python" "$example" --model resnet "$@" --init "$dir/init.safetensors" || return 1
  timeout 600 "$fedcaf" server -c "$src/configs/server_python.yaml" \
    --set "server_configs.num_global_epochs=$rounds" \
    --set "server_configs.comm_configs.grpc_configs.server_uri=$uri" \
    --set "client_configs.model_configs.path=$dir/init.safetensors" \
    --set "server_configs.save_global_model=$dir/global-{round}.safetensors" \
    --report "$dir/server.json" > "$dir/server.log" 2>&1 & pids+=($!)
  local server=$!
  for c in 1 2; do
    timeout 600 "$python" "$example" --model resnet "$@" --steps "$steps" \
      -c "$src/configs/client_$c.yaml" \
      --set "comm_configs.grpc_configs.server_uri=$uri" \
      > "$dir/client_$c.log" 2>&1 & pids+=($!); clients+=($!)
  done
  wait $server || rc=$?
  for c in "${clients[@]}"; do wait "$c" || rc=$?; done
  grep "final test accuracy" "$dir/server.log"
  if [ $rc -ne 0 ]; then
    fail "$name: a process exited $rc"
    for c in "$dir"/*.log; do echo "== $c"; tail -n 5 "$c"; done
    return 1
  fi
}

python_run full || finish
python_run float_only --float-only || finish

kw=data_configs.dataset_kwargs
"$python" "$src/examples/python/export_torchscript.py" --model resnet \
  -o "$out/resnet.pt" > /dev/null &&
"$python" "$src/examples/python/export_tensors.py" -o "$out/fmnist" > /dev/null &&
(cd "$src" && timeout 600 "$fedcaf" simulate -c configs/torchscript.yaml \
  --set "client_configs.model_configs.path=$out/resnet.pt" \
  --set "server_configs.num_global_epochs=$rounds" \
  --set client_configs.train_configs.mode=step \
  --set "client_configs.train_configs.num_local_steps=$steps" \
  --set "server_configs.save_global_model=$out/script-{round}.safetensors" \
  --set "server_configs.aggregator_kwargs.tensor_rules.stem?1?num_batches_tracked=keep" \
  --set "$kw.train_features=$out/fmnist/train_features.npy" \
  --set "$kw.train_labels=$out/fmnist/train_labels.npy" \
  --set "$kw.test_features=$out/fmnist/test_features.npy" \
  --set "$kw.test_labels=$out/fmnist/test_labels.npy" \
  --report "$out/script.json" > "$out/script.log" 2>&1) ||
  { fail "the TorchScript run failed"; tail -n 5 "$out/script.log"; finish; }

"$python" - "$out" "$rounds" "$steps" <<'PY' || fail "integer buffers"
import json, struct, sys
out, rounds, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])

def counters(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    header.pop("__metadata__", None)
    out = {}
    for name, t in header.items():
        if name.endswith("num_batches_tracked"):
            assert t["dtype"] == "I64", (name, t["dtype"])
            a, b = t["data_offsets"]
            out[name] = struct.unpack("<q", data[a:b])[0]
    return out

def accuracy(path):
    r = json.load(open(path))
    assert r["ok"] and len(r["rounds"]) == rounds, (r["status"], r["failure"])
    return r["final_test_accuracy"]

for r in range(1, rounds + 1):
    got = counters(f"{out}/full/global-{r}.safetensors")
    assert len(got) == 3 and set(got.values()) == {r * steps}, (r, got)
    script = counters(f"{out}/script-{r}.safetensors")
    kept = script.pop("stem.1.num_batches_tracked", None)
    assert kept == 0 and len(script) == 2 and set(script.values()) == {r * steps}, (r, kept, script)
print(f"num_batches_tracked in every saved global model: I64, rounds x "
      f"{steps} (the clients' mean), Python client and TorchScript; the "
      f"TorchScript run's stem counter kept at 0 (tensor_rules: keep)")
full = accuracy(f"{out}/full/server.json")
workaround = accuracy(f"{out}/float_only/server.json")
script = accuracy(f"{out}/script.json")
print(f"final accuracy: state_dict as it is {full:.4f}, float tensors only "
      f"{workaround:.4f}, TorchScript {script:.4f} ({rounds} rounds of "
      f"{steps} steps)")
assert full >= workaround - 0.005, (full, workaround)
assert script > 0.6, script
PY
[ "$fails" -eq 0 ] && pass "a model with int64 buffers federates unmodified"
finish
