#!/usr/bin/env bash
# client_configs.comm_configs.compression, end to end.
# 1. Real processes (`fedcaf server`, two `fedcaf client`), a 4 MiB synthetic
#    model, dummy trainers adding 0.5 a round: fp16 and bf16 uploads carry
#    0.5 exactly, so the final model is byte for byte the uncompressed
#    run's; int8 and zfp land within their error; downloads compressed too
#    (direction both); the reports give the bytes per client and the ratio.
# 2. Fashion-MNIST, the default run (`fedcaf simulate`, 3 rounds): fp16,
#    bf16 and int8 within 0.01 of none's accuracy, zfp (tolerance 1e-3)
#    within 0.02; the runs without error feedback are printed beside them.
#
#   compression_test.sh FEDCAF SOURCE_DIR [PART]
# PART: exact (1, tier system), accuracy (2, tier accuracy), or both (the
# default).
set -u
fedcaf=$1; src=$2; part=${3:-both}
. "$(dirname "$0")/lib.sh"

# run NAME METHOD DIRECTION: server and two clients; models in $out/NAME.
run() {
  local name=$1 method=$2 direction=$3 rc=0 clients=()
  local port=$(free_port); mkdir -p "$out/$name"
  timeout 300 "$fedcaf" server -c "$src/configs/synthetic_dummy.yaml" \
    --set client_configs.model_configs.total_bytes=4194304 \
    --set client_configs.model_configs.num_tensors=5 \
    --set server_configs.comm_configs.stream_configs.chunk_bytes=262144 \
    --set client_configs.comm_configs.compression.method=$method \
    --set client_configs.comm_configs.compression.direction=$direction \
    --set server_configs.comm_configs.grpc_configs.server_uri=127.0.0.1:$port \
    --set server_configs.save_global_model="$out/$name/global-{round}.safetensors" \
    --report "$out/$name/server.json" > "$out/$name/server.log" 2>&1 & pids+=($!)
  local server=$!
  for k in 1 2; do
    timeout 300 "$fedcaf" client -c "$src/configs/client_$k.yaml" \
      --set comm_configs.grpc_configs.server_uri=127.0.0.1:$port \
      --report "$out/$name/client_$k.json" > "$out/$name/client_$k.log" 2>&1 & pids+=($!)
    clients+=($!)
  done
  wait $server || rc=$?
  for c in "${clients[@]}"; do wait $c || rc=$?; done
  if [ $rc -ne 0 ]; then
    echo "FAIL: $name: a process exited non-zero"
    cat "$out/$name"/*.log; exit 1
  fi
}

if [ "$part" != accuracy ]; then
run none none up
for m in fp16 bf16 int8 zfp; do run $m $m up; done
run int8-both int8 both
"$py" - "$out" <<'PY' || exit 1
import json, sys
import numpy as np
out = sys.argv[1]

def model(name):
    data = open(f"{out}/{name}/global-3.safetensors", "rb").read()
    n = int.from_bytes(data[:8], "little")
    return np.frombuffer(data[8 + n:], dtype=np.float32)

base = model("none")
for name in ("fp16", "bf16", "int8", "zfp", "int8-both"):
    got = model(name)
    worst = float(np.abs(got - base).max())
    r = json.load(open(f"{out}/{name}/server.json"))
    assert r["ok"], (name, r["failure"])
    last = r["rounds"][-1]
    up, down = last["compression_up"], last["compression_down"]
    per_client = last["client_bytes"]
    assert sorted(per_client) == ["Client1", "Client2"], per_client
    print(f"{name:>9}: final model within {worst:.3g} of the uncompressed run; "
          f"upload ratio {up:.3f}, download ratio {down}; "
          f"bytes up per client {[v['up'] for v in per_client.values()]}")
    if name in ("fp16", "bf16"):
        assert worst == 0, f"{name}: 0.5 a round is exact, the model is not"
    elif name == "zfp":
        assert worst <= 3 * 1e-3, f"zfp: {worst} beyond 3 rounds of its tolerance"
    elif name == "int8":
        assert worst <= 3 * 0.5 / 254 + 1e-6, f"int8: {worst}"
    ratio = {"fp16": 2, "bf16": 2, "int8": 3.9, "int8-both": 3.9, "zfp": 3}[name]
    assert up >= ratio * 0.99, f"{name}: upload ratio {up} < {ratio}"
    if name == "int8-both":
        assert down >= 3.9, f"int8 downloads: ratio {down}"
        # downloads are lossy: the model moved by 1.5 within the int8 steps
        # of its values (|x| < 5 here: steps of 5 / 127)
        assert worst <= 3 * 5 / 254 + 3 * 0.5 / 254, f"int8-both: {worst}"
    else:
        assert down is None, down
PY
fi
[ "$part" = exact ] && exit 0

acc() {  # acc NAME [--set ...]: the default run's final accuracy
  local name=$1; shift
  timeout 600 "$fedcaf" simulate "$@" --report "$out/$name.json" > "$out/$name.log" 2>&1 ||
    { echo "FAIL: simulate $name"; tail -5 "$out/$name.log"; exit 1; }
}
z=client_configs.comm_configs.compression
acc none
for m in fp16 bf16 int8 zfp; do acc $m --set $z.method=$m; done
for m in int8 zfp; do acc $m-noef --set $z.method=$m --set $z.error_feedback=false; done
"$py" - "$out" <<'PY'
import json, sys
out = sys.argv[1]
acc = {}
for name in ("none", "fp16", "bf16", "int8", "zfp", "int8-noef", "zfp-noef"):
    r = json.load(open(f"{out}/{name}.json"))
    assert r["ok"], (name, r["failure"])
    acc[name] = r["rounds"][-1]["test_accuracy"]
print("Fashion-MNIST, default run, final accuracy: " +
      ", ".join(f"{k} {v:.4f}" for k, v in acc.items()))
for name, tolerance in (("fp16", 0.01), ("bf16", 0.01), ("int8", 0.01), ("zfp", 0.02)):
    assert abs(acc[name] - acc["none"]) <= tolerance, \
        f"{name}: {acc[name]} is more than {tolerance} from none's {acc['none']}"
print("compression: every method within its bound of none")
PY
