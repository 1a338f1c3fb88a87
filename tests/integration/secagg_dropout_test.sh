#!/usr/bin/env bash
# Secure aggregation with real processes that die: `fedcaf server` and
# `fedcaf client` processes on 127.0.0.1, a 256 MiB synthetic model, dummy
# trainer (client i adds 0.5 (i + 1) to every element), one round.
#
# 1. Five clients, threshold 3 (every client neighbours the four others).
#    Client5 is killed (SIGKILL) the moment it has exchanged its keys and
#    shares (its masked upload is just starting: whether its first chunks
#    were folded depends on the scheduling; secagg_protocol_test loses a
#    client between sharing and its first chunk deterministically), Client4
#    0.3 s into its masked upload. A partial masked upload is discarded (the
#    survivors send theirs again), and the three survivors unmask the sum:
#    the global model equals FedAvg of their updates (the initial model +
#    1.0) within the quantizer's bound.
# 2. Four clients, threshold 3: Client3 and Client4 are killed after
#    sharing; two survivors cannot reconstruct the others' secrets, so the
#    round fails, the server names the missing clients and keeps the model
#    it started the round with.
set -u
fedcaf=$1; src=$2
. "$(dirname "$0")/lib.sh"
mib=256
model=(--set "client_configs.model_configs.total_bytes=$((mib << 20))"
       --set client_configs.train_configs.add_by_index=true
       --set server_configs.num_global_epochs=1
       --set server_configs.comm_configs.stream_configs.chunk_bytes=65536)

# kill_on NAME LOG DELAY PID: SIGKILLs the client that timeout(1) PID runs
# DELAY seconds after LOG says the
# client exchanged its secure aggregation keys and shares (within 60 s).
kill_on() {
  local name=$1 log=$2 delay=$3 pid=$4
  for _ in $(seq 1 3000); do
    if grep -q "keys and shares exchanged" "$log" 2> /dev/null; then
      sleep "$delay"
      # $pid is timeout(1)'s: the client is its child.
      kill -KILL $(pgrep -P "$pid") 2> /dev/null &&
        echo "killed $name ($delay s after sharing)"
      return
    fi
    sleep 0.02
  done
  echo "$name never exchanged its shares"
}

# run_case NAME CLIENTS THRESHOLD "KILLED:DELAY ...": runs a server and
# CLIENTS clients; sets server_rc.
run_case() {
  local name=$1 n=$2 threshold=$3 kills=$4 port=$(free_port)
  local uri="127.0.0.1:$port" clients=() watchers=()
  timeout 300 "$fedcaf" server -c "$src/configs/synthetic_dummy.yaml" "${model[@]}" \
    --set "server_configs.num_clients=$n" \
    --set server_configs.secure_aggregation.enabled=true \
    --set "server_configs.secure_aggregation.threshold=$threshold" \
    --set server_configs.scheduler_kwargs.min_clients=2 \
    --set server_configs.comm_configs.stream_configs.reconnect_grace_s=1 \
    --set "server_configs.comm_configs.grpc_configs.server_uri=$uri" \
    --set "server_configs.save_global_model=$out/${name}_{round}.safetensors" \
    --report "$out/$name.json" > "$out/$name.server.log" 2>&1 &
  local server=$!; pids+=("$server")
  for k in $(seq 1 "$n"); do
    timeout 300 "$fedcaf" client -c "$src/configs/client_1.yaml" \
      --set "client_id=Client$k" \
      --set "data_configs.dataset_kwargs.num_clients=$n" \
      --set "data_configs.dataset_kwargs.client_id=$((k - 1))" \
      --set "comm_configs.grpc_configs.server_uri=$uri" \
      > "$out/$name.client_$k.log" 2>&1 &
    clients+=($!); pids+=($!)
  done
  for kd in $kills; do
    local k=${kd%%:*} delay=${kd##*:}
    kill_on "Client$k" "$out/$name.client_$k.log" "$delay" "${clients[$((k - 1))]}" &
    watchers+=($!)
  done
  server_rc=0; wait "$server" || server_rc=$?
  for w in "${watchers[@]}"; do wait "$w"; done
  for c in "${clients[@]}"; do wait "$c" 2> /dev/null; done
}

# 1: two of five lost after sharing, threshold met.
run_case met 5 3 "5:0 4:0.3"
[ "$server_rc" -eq 0 ] || { fail "the server failed with 3 of 5 survivors"; tail -5 "$out/met.server.log"; }
grep -E "dropped Client|dropped mid-upload|dropped before" "$out/met.server.log"
for k in 4 5; do
  grep -q "dropped Client$k" "$out/met.server.log" || fail "Client$k was not dropped"
done
# A partial masked upload was discarded: the survivors sent theirs again.
grep -q "left: it was dropped mid-upload" "$out/met.server.log" ||
  fail "no client was dropped mid-upload"
# The initial model: one round of clients that change nothing.
timeout 300 "$fedcaf" simulate -c "$src/configs/synthetic_dummy.yaml" "${model[@]}" \
  --set client_configs.train_configs.add=0 --set server_configs.num_clients=1 \
  --set data_configs.dataset_kwargs.num_clients=1 \
  --set "server_configs.save_global_model=$out/initial_{round}.safetensors" \
  > "$out/initial.log" 2>&1 || fail "the reference run failed"
/usr/bin/python3 - "$src" "$out" <<'PY' || fail "the model is not FedAvg of the survivors"
import json, sys, numpy as np
sys.path.insert(0, sys.argv[1] + "/tests/integration")
from safetensors_f32 import load_flat as load
out = sys.argv[2]
report = json.load(open(f"{out}/met.json"))
r = report["rounds"][0]
print("contributors:", r["contributors"], "missing:", r["missing_clients"])
assert sorted(r["contributors"]) == ["Client1", "Client2", "Client3"], r
assert sorted(r["missing_clients"]) == ["Client4", "Client5"], r
model, initial = load(f"{out}/met_1.safetensors"), load(f"{out}/initial_1.safetensors")
exact = initial + 0.5 * (1 + 2 + 3) / 3  # FedAvg of the survivors
bound = 5 * 2 * 8.0 / (2**22 - 1)        # n 2c / (2^b - 1), equal weights
d = float(np.abs(model.astype(np.float64) - exact).max())
print(f"max |secure - FedAvg of the survivors| {d:.3g} (bound {bound:.3g})")
assert 0 < d <= bound * 1.01
PY

# 2: two of four lost after sharing, threshold 3 not met: the round fails
# naming the missing, and its model is the one it started from (the run
# goes on: one client's absence or garbage must not end everyone's run).
run_case short 4 3 "3:0 4:0"
[ "$server_rc" -eq 0 ] || { fail "the server ended the run"; tail -5 "$out/short.server.log"; }
grep -h "too few survivors" "$out/short.server.log" | head -1
grep -q "too few survivors to unmask (threshold 3); missing: Client3, Client4" \
  "$out/short.server.log" || { fail "the failure does not name the missing"; tail -5 "$out/short.server.log"; }
grep -q "the global model stays as it was" "$out/short.server.log" ||
  fail "the failed round did not keep the model"
cmp -s <(tail -c $((mib << 20)) "$out/short_1.safetensors") \
  <(tail -c $((mib << 20)) "$out/initial_1.safetensors") ||
  fail "the failed round changed the model"

[ "$fails" -eq 0 ] && echo "secagg_dropout: all checks passed"
exit "$fails"
