#!/usr/bin/env bash
# A client that lies in its evaluations: `fedcaf server` and six
# `fedcaf client` processes on 127.0.0.1 train the Fashion-MNIST CNN
# (shortened: FEDCAF_EL_ROUNDS rounds of FEDCAF_EL_STEPS local steps) with
# federated evaluation and no evaluation on the server, so the clients'
# figures are the report's test_accuracy. Run twice: all honest, then with
# Client6 reporting accuracy 0.99 and loss 0.01 over 2^40 samples for every
# model (FEDCAF_FAULT=evaluation_claim; it trains honestly). Every round's
# test_accuracy and the final_test_accuracy must stay within 0.01 of the
# honest run's, and the liar's figures must not reach the report. (The
# server leaves out each figure's highest and lowest value: the liar's 0.99
# goes, and the mean moves by at most a quarter of the spread of the honest
# clients' figures, about 0.02 here with 1,667 test images each.)
#
#   evaluation_liar_test.sh FEDCAF SOURCE_DIR
set -u
fedcaf=$1; src=$2
rounds=${FEDCAF_EL_ROUNDS:-2}; steps=${FEDCAF_EL_STEPS:-60}; n=6
. "$(dirname "$0")/lib.sh"

# run NAME FAULT: the server and Client1-6, Client6 with FAULT.
run() {
  local name=$1 fault=$2 port; port=$(free_port)
  local uri="127.0.0.1:$port" clients=() k rc=0
  timeout 300 "$fedcaf" server -c "$src/configs/server.yaml" \
    --set server_configs.num_clients=$n \
    --set "server_configs.num_global_epochs=$rounds" \
    --set server_configs.evaluate=false \
    --set server_configs.federated_evaluation=true \
    --set client_configs.train_configs.mode=step \
    --set "client_configs.train_configs.num_local_steps=$steps" \
    --set data_configs.dataset_kwargs.num_clients=$n \
    --set "server_configs.comm_configs.grpc_configs.server_uri=$uri" \
    --report "$out/$name.json" > "$out/$name.server.log" 2>&1 &
  local server=$!; pids+=("$server")
  for (( k = 1; k <= n; k++ )); do
    local lie=""
    [ "$k" -eq "$n" ] && lie=$fault
    FEDCAF_FAULT=$lie timeout 300 "$fedcaf" client -c "$src/configs/client_1.yaml" \
      --set "client_id=Client$k" \
      --set data_configs.dataset_kwargs.num_clients=$n \
      --set "data_configs.dataset_kwargs.client_id=$((k - 1))" \
      --set "comm_configs.grpc_configs.server_uri=$uri" \
      > "$out/$name.client_$k.log" 2>&1 &
    clients+=($!); pids+=($!)
  done
  wait "$server" || rc=$?
  local c
  for c in "${clients[@]}"; do wait "$c" || rc=$?; done
  if [ "$rc" -ne 0 ]; then
    fail "$name: a process exited $rc"
    tail -5 "$out/$name.server.log" "$out/$name".client_*.log
    return 1
  fi
  grep -h "round $rounds/$rounds\|final" "$out/$name.server.log" | head -3
}

run honest "" || finish
run liar evaluation_claim || finish
"$py" - "$out" "$rounds" "$n" <<'PY' || fail "the liar moved the accuracy figures"
import json, sys
out, rounds, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
honest = json.load(open(f"{out}/honest.json"))
liar = json.load(open(f"{out}/liar.json"))
for r in (honest, liar):
    assert r["ok"] and len(r["rounds"]) == rounds, (r["status"], r["failure"])
pairs = [(f"round {a['round']}", a["test_accuracy"], b["test_accuracy"])
         for a, b in zip(honest["rounds"], liar["rounds"])]
pairs.append(("final", honest["final_test_accuracy"], liar["final_test_accuracy"]))
for what, a, b in pairs:
    assert a is not None and b is not None, (what, a, b)
    print(f"{what}: test_accuracy honest {a:.4f}, with the liar {b:.4f} "
          f"(|difference| {abs(a - b):.4f}; the liar claimed 0.99 over 2^40 samples)")
    assert abs(a - b) <= 0.01, f"{what}: the liar moved the accuracy by {abs(a - b):.4f}"
    assert b < 0.95, f"{what}: the liar's 0.99 reached the report ({b})"
for r in liar["rounds"]:
    m = r["client_metrics"]
    assert m["clients"] == n, m # the liar's evaluation counted, as one vote
PY
[ "$fails" -eq 0 ] && pass "a liar's evaluations move no accuracy figure by more than 0.01"
finish
