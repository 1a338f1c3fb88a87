#!/usr/bin/env bash
# The shipped three-process run: `fedcaf server` and two `fedcaf client` over
# fedcaf's wire (a gateway per connection) on 127.0.0.1, against the in-process run of the same config.
# Shortened (FEDCAF_MP_ROUNDS rounds of FEDCAF_MP_STEPS local steps) to keep
# CI fast; the README gives the full-length command.
set -u
fedcaf=$1; src=$2
rounds=${FEDCAF_MP_ROUNDS:-2}; steps=${FEDCAF_MP_STEPS:-150}
. "$(dirname "$0")/lib.sh"
port=$(free_port)
uri="127.0.0.1:$port"
short=(--set server_configs.num_global_epochs=$rounds
       --set client_configs.train_configs.mode=step
       --set client_configs.train_configs.num_local_steps=$steps)
net=(--set server_configs.comm_configs.grpc_configs.server_uri=$uri)
cnet=(--set comm_configs.grpc_configs.server_uri=$uri)

timeout 600 "$fedcaf" server -c "$src/configs/server.yaml" "${short[@]}" "${net[@]}" \
  --report "$out/server.json" > "$out/server.log" 2>&1 & pids+=($!); server=$!
timeout 600 "$fedcaf" client -c "$src/configs/client_1.yaml" "${cnet[@]}" \
  --report "$out/client_1.json" > "$out/client_1.log" 2>&1 & pids+=($!); c1=$!
timeout 600 "$fedcaf" client -c "$src/configs/client_2.yaml" "${cnet[@]}" \
  --report "$out/client_2.json" > "$out/client_2.log" 2>&1 & pids+=($!); c2=$!
rc=0
wait $server || rc=$?; wait $c1 || rc=$?; wait $c2 || rc=$?
cat "$out/server.log"
if [ $rc -ne 0 ]; then
  echo "FAIL: a process exited non-zero"; cat "$out"/client_*.log; exit 1
fi
timeout 600 "$fedcaf" simulate -c "$src/configs/simulate.yaml" "${short[@]}" \
  --report "$out/simulate.json" > "$out/simulate.log" 2>&1 || { cat "$out/simulate.log"; exit 1; }
cat "$out/simulate.log"
python3 - "$out" "$rounds" <<'PY'
import json, sys
out, rounds = sys.argv[1], int(sys.argv[2])
server = json.load(open(f"{out}/server.json"))
sim = json.load(open(f"{out}/simulate.json"))
clients = [json.load(open(f"{out}/client_{i}.json")) for i in (1, 2)]
assert server["ok"] and sim["ok"], (server["failure"], sim["failure"])
assert len(server["rounds"]) == rounds == len(sim["rounds"])
for c in clients:
    assert c["ok"] and c["role"] == "client" and len(c["rounds"]) == rounds, c
    assert c["rounds"][-1]["test_accuracy"] is not None
    assert c["peak_in_flight"] <= server["config"]["server_configs"]["comm_configs"]["stream_configs"]["window"]
a, b = server["rounds"][-1]["test_accuracy"], sim["rounds"][-1]["test_accuracy"]
print(f"three processes: {a:.4f}  one process: {b:.4f}")
assert abs(a - b) <= 0.01, "the multi-process run differs from the in-process run"
for r in server["rounds"]:
    assert r["bytes_up"] > 0 and r["bytes_down"] > 0
print("1 passed, 0 failed")
PY
