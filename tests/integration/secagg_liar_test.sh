#!/usr/bin/env bash
# Secure aggregation with one liar among five real `fedcaf client` processes
# on 127.0.0.1 (a 16 MiB synthetic model, dummy trainer: client i adds
# 0.5 (i + 1) to every element each round), threshold 3, three rounds, in
# ram and window memory modes. Client5 lies through the client's fault
# injection (FEDCAF_FAULT):
#
#   secagg_garbage_shares  seals random bytes for its neighbours: the four
#                          say so in their receipts, it is excluded before
#                          anyone masks (named), the round goes on without it;
#   secagg_zero_upload     uploads zeros instead of its masked update: its
#                          first chunk is refused (poisoned_update, named),
#                          the others unmask without it;
#   secagg_wrong_reveal    reveals wrong shares at the unmask: the server
#                          finds a threshold of shares that opens each
#                          secret, names it (every round: a wrong share may
#                          be its owner's doing, so it is never dropped for
#                          it); its update is in the sum.
#
# Every lie: each round completes (status completed, ok), the liar is named
# in round 1's excluded list, excluded twice it is dropped from the run
# (round 3 has 4 clients; not for wrong revealed shares), and the last model
# is within the quantizer's bound of FedAvg of the clients whose updates are
# in it.
#
#   secagg_liar_test.sh FEDCAF SOURCE_DIR
set -u
fedcaf=$1; src=$2
. "$(dirname "$0")/lib.sh"
mib=16
rounds=3
model=(--set "client_configs.model_configs.total_bytes=$((mib << 20))"
       --set client_configs.train_configs.add_by_index=true
       --set "server_configs.num_global_epochs=$rounds"
       --set server_configs.comm_configs.stream_configs.chunk_bytes=65536)

# run_lie NAME MODE FAULT: a server and five clients, Client5 with FAULT.
run_lie() {
  local name=$1 mode=$2 fault=$3 port=$(free_port) clients=()
  local uri="127.0.0.1:$port"
  timeout 200 "$fedcaf" server -c "$src/configs/synthetic_dummy.yaml" "${model[@]}" \
    --set server_configs.num_clients=5 \
    --set "server_configs.memory_mode=$mode" \
    --set server_configs.secure_aggregation.enabled=true \
    --set server_configs.secure_aggregation.threshold=3 \
    --set server_configs.scheduler_kwargs.min_clients=3 \
    --set "server_configs.comm_configs.grpc_configs.server_uri=$uri" \
    --set "server_configs.save_global_model=$out/${name}_{round}.safetensors" \
    --report "$out/$name.json" > "$out/$name.server.log" 2>&1 &
  local server=$!; pids+=("$server")
  for k in 1 2 3 4 5; do
    local lie=""
    [ "$k" -eq 5 ] && lie=$fault
    FEDCAF_FAULT=$lie timeout 200 "$fedcaf" client -c "$src/configs/client_1.yaml" \
      --set "client_id=Client$k" \
      --set data_configs.dataset_kwargs.num_clients=5 \
      --set "data_configs.dataset_kwargs.client_id=$((k - 1))" \
      --set "comm_configs.grpc_configs.server_uri=$uri" \
      > "$out/$name.client_$k.log" 2>&1 &
    clients+=($!); pids+=($!)
  done
  local rc=0; wait "$server" || rc=$?
  for c in "${clients[@]}"; do wait "$c" 2> /dev/null; done
  [ "$rc" -eq 0 ] || { fail "$name: the server exited $rc"; tail -5 "$out/$name.server.log"; }
  grep -h "Client5 .*excluded from the round" "$out/$name.server.log" | head -2
  "$py" - "$src" "$out" "$name" "$rounds" "$fault" <<'PY' || fail "$name"
import json, sys, numpy as np
sys.path.insert(0, sys.argv[1] + "/tests/integration")
from safetensors_f32 import load_flat as load
out, name, rounds, fault = sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
report = json.load(open(f"{out}/{name}.json"))
assert report["ok"] and report["status"] == "completed", (report["status"], report["failure"])
rs = report["rounds"]
assert len(rs) == rounds, len(rs)
honest = ["Client1", "Client2", "Client3", "Client4"]
for r in rs:
    assert r["status"] == "completed", r
    print(f"round {r['round']}: contributors {r['contributors']} excluded "
          f"{[e['client'] for e in r['excluded']]}")
    if fault != "secagg_wrong_reveal":
        assert sorted(r["contributors"]) == honest, r["contributors"]
assert [e["client"] for e in rs[0]["excluded"]][:1] == ["Client5"], rs[0]["excluded"]
if fault == "secagg_wrong_reveal":  # named every round, never dropped
    assert all(e["client"] == "Client5" for r in rs for e in r["excluded"])
    assert all("Client5" in r["contributors"] for r in rs)
else:
    assert "Client5" not in rs[-1]["contributors"], "excluded twice, still in"
# Every round: the model moves by the mean of its contributors' additions.
initial = load(f"{out}/initial_1.safetensors")
expected = initial.astype(np.float64)
for r in rs:
    ks = [int(c[len("Client"):]) for c in r["contributors"]]
    expected += np.float32(0.5) * sum(k for k in ks) / len(ks)
model = load(f"{out}/{name}_{rounds}.safetensors")
bound = rounds * len(honest) * 2 * 8.0 / (2**22 - 1) + 1e-5
d = float(np.abs(model.astype(np.float64) - expected).max())
print(f"{name}: max |secure - FedAvg of the contributors| {d:.3g} (bound {bound:.3g})")
assert d <= bound, (d, bound)
PY
}

# The initial model: one round of one client that changes nothing.
timeout 200 "$fedcaf" simulate -c "$src/configs/synthetic_dummy.yaml" "${model[@]}" \
  --set client_configs.train_configs.add=0 --set server_configs.num_clients=1 \
  --set server_configs.num_global_epochs=1 \
  --set data_configs.dataset_kwargs.num_clients=1 \
  --set "server_configs.save_global_model=$out/initial_{round}.safetensors" \
  > "$out/initial.log" 2>&1 || fail "the reference run failed"

for mode in ${LIAR_MODES:-ram window}; do
  for fault in ${LIAR_FAULTS:-secagg_garbage_shares secagg_zero_upload secagg_wrong_reveal}; do
    run_lie "${mode}_${fault#secagg_}" "$mode" "$fault"
  done
done
# A liar whose masked upload is uniform bytes (no server can tell it from a
# masked update): the unmasked sum is out of range, the round cannot
# complete and says so (status failed, ok false, no contributors), the
# model stays as it was, the run goes on: in ram mode the sum is apart from
# the model; in window mode each position's old bytes come back from the
# file they were kept in when its masked sum overwrote them.
for mode in ${LIAR_MODES:-ram window}; do
  [ -z "${LIAR_FAULTS:-}" ] || break
  name=${mode}_random_upload; port=$(free_port); uri="127.0.0.1:$port"; clients=()
  timeout 200 "$fedcaf" server -c "$src/configs/synthetic_dummy.yaml" "${model[@]}" \
    --set server_configs.num_global_epochs=2 --set server_configs.num_clients=3 \
    --set server_configs.secure_aggregation.enabled=true \
    --set "server_configs.memory_mode=$mode" \
    --set "server_configs.comm_configs.grpc_configs.server_uri=$uri" \
    --set "server_configs.save_global_model=$out/${name}_{round}.safetensors" \
    --report "$out/$name.json" --metrics "$out/$name.jsonl" > "$out/$name.server.log" 2>&1 &
  server=$!; pids+=("$server")
  for k in 1 2 3; do
    lie=""; [ "$k" -eq 3 ] && lie=secagg_random_upload
    FEDCAF_FAULT=$lie timeout 200 "$fedcaf" client -c "$src/configs/client_1.yaml" \
      --set "client_id=Client$k" --set data_configs.dataset_kwargs.num_clients=3 \
      --set "data_configs.dataset_kwargs.client_id=$((k - 1))" \
      --set "comm_configs.grpc_configs.server_uri=$uri" > "$out/$name.client_$k.log" 2>&1 &
    clients+=($!); pids+=($!)
  done
  rc=0; wait "$server" || rc=$?
  for c in "${clients[@]}"; do wait "$c" 2> /dev/null; done
  [ "$rc" -eq 0 ] || fail "$name: the server exited $rc"
  grep -h "secure aggregation failed" "$out/$name.server.log" | head -1
  "$py" - "$src" "$out" "$name" <<'PY' || fail "$name"
import json, sys, numpy as np
sys.path.insert(0, sys.argv[1] + "/tests/integration")
from safetensors_f32 import load_flat as load
out, name = sys.argv[2], sys.argv[3]
report = json.load(open(f"{out}/{name}.json"))
print("status", report["status"], "ok", report["ok"], "failed_rounds", report["failed_rounds"])
assert report["status"] == "rounds_failed" and not report["ok"], report["status"]
assert report["failed_rounds"] == [1, 2], report["failed_rounds"]
for r in report["rounds"]:
    assert r["status"] == "failed" and r["contributors"] == [], r
    assert "secure aggregation failed" in r["failure"], r["failure"]
lines = [json.loads(l) for l in open(f"{out}/{name}.jsonl")]
assert [l["status"] for l in lines if l["event"] == "round"] == ["failed", "failed"]
assert [l["status"] for l in lines if l["event"] == "end"] == ["rounds_failed"]
initial = load(f"{out}/initial_1.safetensors")
assert np.array_equal(load(f"{out}/{name}_2.safetensors"), initial), "the model moved"
print(f"{name}: both rounds failed and said so; the model is the initial one")
PY
done
[ "$fails" -eq 0 ] && echo "secagg_liar: all checks passed"
exit "$fails"
