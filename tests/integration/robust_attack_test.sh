#!/usr/bin/env bash
# Two attackers among ten clients, on Fashion-MNIST over real sockets:
# `fedcaf server -c configs/server.yaml` (3 rounds) with ten clients, first
# all honest `fedcaf client` processes (the clean run, FedAvg), then eight
# honest ones and two Python clients that upload -10 x the model they
# received, under FedAvg, TrimmedMean and Median. FedAvg collapses; the
# robust rules stay within 0.03 of the clean run's accuracy. The full run
# (an epoch a round) unless FEDCAF_ROBUST_STEPS limits local steps.
set -u
fedcaf=$1; src=$2; pydir=$3; python=${4:-/usr/bin/python3}
export FEDCAF_PYTHON=$pydir PYTHONPATH=$pydir
. "$(dirname "$0")/lib.sh"
short=()
if [ -n "${FEDCAF_ROBUST_STEPS:-}" ]; then
  short=(--set client_configs.train_configs.mode=step
         --set client_configs.train_configs.num_local_steps=$FEDCAF_ROBUST_STEPS)
fi

# run NAME AGGREGATOR ATTACKERS: clients 1..10-ATTACKERS honest, the rest
# attackers; the server's report in $out/NAME.json. The default bound on an
# update's distance (max_update_ratio 10) is off here: it would refuse these
# attackers (11 x the model's norm away) before any rule sees them.
run() {
  local name=$1 rule=$2 attackers=$3 rc=0 clients=()
  local port=$(free_port); local uri="127.0.0.1:$port"
  mkdir -p "$out/$name"
  timeout 900 "$fedcaf" server -c "$src/configs/server.yaml" "${short[@]}" \
    --set server_configs.comm_configs.grpc_configs.server_uri=$uri \
    --set server_configs.num_clients=10 \
    --set data_configs.dataset_kwargs.num_clients=10 \
    --set server_configs.aggregator=$rule \
    --set server_configs.aggregator_kwargs.max_update_ratio=0 \
    --report "$out/$name.json" > "$out/$name/server.log" 2>&1 & pids+=($!)
  local server=$!
  for k in $(seq 1 10); do
    if [ $k -gt $(( 10 - attackers )) ]; then
      timeout 900 "$python" "$src/tests/integration/robust_check.py" client \
        "$src/configs/client_1.yaml" "$uri" $k "$out/$name" attacker \
        > "$out/$name/client_$k.log" 2>&1 & pids+=($!); clients+=($!)
    else
      timeout 900 "$fedcaf" client -c "$src/configs/client_1.yaml" \
        --set comm_configs.grpc_configs.server_uri=$uri \
        --set client_id=Client$k \
        --set data_configs.dataset_kwargs.num_clients=10 \
        --set data_configs.dataset_kwargs.client_id=$(( k - 1 )) \
        > "$out/$name/client_$k.log" 2>&1 & pids+=($!); clients+=($!)
    fi
  done
  wait $server || rc=$?
  for c in "${clients[@]}"; do wait $c || rc=$?; done
  grep -h "values dropped\|^round" "$out/$name/server.log"
  if [ $rc -ne 0 ]; then
    echo "FAIL: $name: a process exited non-zero"
    cat "$out/$name/server.log" "$out/$name"/client_*.log; exit 1
  fi
}

run clean FedAvgAggregator 0
run fedavg FedAvgAggregator 2
run trimmed TrimmedMeanAggregator 2
run median MedianAggregator 2
"$python" - "$out" <<'PY'
import json, sys
out = sys.argv[1]
acc = {}
for name in ("clean", "fedavg", "trimmed", "median"):
    r = json.load(open(f"{out}/{name}.json"))
    assert r["ok"], (name, r["failure"])
    acc[name] = r["rounds"][-1]["test_accuracy"]
print("accuracy after 3 rounds: " + ", ".join(f"{k} {v:.4f}" for k, v in acc.items()))
assert acc["clean"] >= 0.75, "the clean run did not learn"
assert acc["fedavg"] <= acc["clean"] - 0.3, "FedAvg did not collapse under attack"
for rule in ("trimmed", "median"):
    assert acc[rule] >= acc["clean"] - 0.03, f"{rule} fell more than 0.03 below the clean run"
# The attackers' values are the ones dropped most, every round.
for name in ("trimmed", "median"):
    for r in json.load(open(f"{out}/{name}.json"))["rounds"]:
        t = r["trimmed_values"]
        worst = sorted(t, key=t.get, reverse=True)[:2]
        assert sorted(worst) == ["Client10", "Client9"], (name, r["round"], t)
print("robust rules hold against two -10x attackers")
PY
