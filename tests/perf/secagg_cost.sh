#!/usr/bin/env bash
# What secure aggregation (SecAgg+) costs, measured in one run: real
# processes on loopback (one server, N clients), FedAvg, ram mode, dummy
# trainer, a synthetic float32 model of S MiB, each configuration run with
# and without server_configs.secure_aggregation. Prints per run the round
# time (mean over the rounds after the first) and the peak RSS (VmHWM) of
# the server and of the largest client as multiples of S, then per S and N
# the ratios secure / plain: the goals are server memory within 5 %, client
# memory within 1.1x, round time within 2x.
#
#   tests/perf/secagg_cost.sh [FEDCAF] [SIZES_MIB] [CLIENT_COUNTS] [ROUNDS]
#                             [NEIGHBOURS]
#   tests/perf/secagg_cost.sh build/fedcaf 1024 "2 8" 3
# NEIGHBOURS: secure_aggregation.neighbours (default 0: every other client;
# SecAgg+'s sparse graph, e.g. 4 at 8 clients, costs each client fewer
# masks).
set -u
fedcaf=${1:-build/fedcaf}
sizes=${2:-"1024"}
counts=${3:-"2 8"}
rounds=${4:-3}
neighbours=${5:-0}
src=$(cd "$(dirname "$0")/../.." && pwd)
out=$(mktemp -d); pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$out"' EXIT

one_run() { # mib n secure(true|false): appends a line to $out/runs.txt
  local mib=$1 n=$2 secure=$3 port=$(( 20000 + RANDOM % 20000 ))
  local uri="127.0.0.1:$port" clients=() rc=0
  timeout 1200 "$fedcaf" server -c "$src/configs/synthetic_dummy.yaml" \
    --set "client_configs.model_configs.total_bytes=$((mib << 20))" \
    --set "server_configs.num_clients=$n" \
    --set "server_configs.num_global_epochs=$rounds" \
    --set "server_configs.secure_aggregation.enabled=$secure" \
    --set "server_configs.secure_aggregation.neighbours=$neighbours" \
    --set "server_configs.comm_configs.grpc_configs.server_uri=$uri" \
    --report "$out/server.json" > "$out/server.log" 2>&1 &
  local server=$!; pids+=("$server")
  for k in $(seq 1 "$n"); do
    timeout 1200 "$fedcaf" client -c "$src/configs/client_1.yaml" \
      --set "client_id=Client$k" \
      --set "data_configs.dataset_kwargs.num_clients=$n" \
      --set "data_configs.dataset_kwargs.client_id=$((k - 1))" \
      --set "comm_configs.grpc_configs.server_uri=$uri" \
      --report "$out/client_$k.json" > "$out/client_$k.log" 2>&1 &
    clients+=($!); pids+=($!)
  done
  wait "$server" || rc=$?
  for c in "${clients[@]}"; do wait "$c" || rc=$?; done
  if [ $rc -ne 0 ]; then
    echo "run S=$mib MiB N=$n secure=$secure failed"; tail -3 "$out"/*.log
    return 1
  fi
  /usr/bin/python3 - "$out" "$mib" "$n" "$secure" <<'PY'
import glob, json, sys
out, mib, n, secure = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
server = json.load(open(f"{out}/server.json"))
clients = [json.load(open(f)) for f in glob.glob(f"{out}/client_*.json")]
rounds = server["rounds"][1:] or server["rounds"]
secs = sum(r["wall_seconds"] for r in rounds) / len(rounds)
client = max(c["peak_rss_bytes"] for c in clients)
with open(f"{out}/runs.txt", "a") as f:
    f.write(f"{mib} {n} {secure} {secs} {server['peak_rss_bytes']} {client}\n")
s = mib << 20
print(f"{mib:6d} {n:3d} {secure:>6} {secs:9.2f} {server['peak_rss_bytes'] / s:9.3f} "
      f"{client / s:9.3f}", flush=True)
PY
  rm -f "$out"/*.json
}

printf "%6s %3s %6s %9s %9s %9s\n" "S_MiB" "N" "secure" "s/round" "server/S" "client/S"
for mib in $sizes; do
  for n in $counts; do
    one_run "$mib" "$n" false
    one_run "$mib" "$n" true
  done
done
[ -f "$out/runs.txt" ] && /usr/bin/python3 - "$out/runs.txt" <<'PY'
import collections, sys
runs = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    mib, n, secure, secs, server, client = line.split()
    runs[(int(mib), int(n))][secure] = (float(secs), int(server), int(client))
print("secure / plain, measured in this run (goals: server <= 1.05, "
      "client <= 1.10, round time <= 2.00):")
for (mib, n), by in sorted(runs.items()):
    if len(by) < 2:
        continue
    (ps, pm, pc), (ss, sm, sc) = by["false"], by["true"]
    print(f"  {mib} MiB, {n} clients: round time {ss / ps:.2f}x, "
          f"server peak {sm / pm:.3f}x, client peak {sc / pc:.3f}x")
PY
