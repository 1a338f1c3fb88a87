#!/usr/bin/env bash
# Peak memory and round time of real processes on loopback: one server and N
# clients, FedAvg, 3 rounds, dummy trainer, a synthetic float32 model of S
# bytes (configs/synthetic_dummy.yaml). Prints each process's peak RSS
# (VmHWM) as a multiple of S, and seconds and bytes per second per round.
#
#   tests/perf/memory_matrix.sh [FEDCAF] [SIZES_MIB] [CLIENT_COUNTS] [MODES] \
#     [AGGREGATOR]
#   tests/perf/memory_matrix.sh build/fedcaf "1024 2048" "2 8" "ram window disk"
#   tests/perf/memory_matrix.sh build/fedcaf 1024 4 window MedianAggregator
# (robust rules hold window x N chunks at once: about the model plus
# window x N x chunk_bytes.)
# (disk: the server's global model and each client's model live in files
# under /tmp, mapped, with pages given back after use.)
# With two or more client counts, it ends with the growth of the server's
# peak RSS per extra client for each mode and size, against the budget of
# window x chunk_bytes + 1 MiB (the chunks one client may have in flight,
# plus its connection's buffers).
# OLD=path/to/another/fedcaf (and PAIRS, default 1) runs each case with
# both builds, this one first, PAIRS times in turn (interleaved: a noisy
# machine drifts alike for both), and ends with this build's s/round and
# peak RSS over the other's, per case. OLD_SRC=path/to/its/tree: the
# configs the other build reads (an older build refuses keys added since).
# NEW_SET="key=value ...": settings for this build's server only (to
# measure what a default costs against a build without it).
set -u
fedcaf=${1:-build/fedcaf}
sizes=${2:-"256 1024"}
counts=${3:-"2"}
modes=${4:-"ram"}
aggregator=${5:-FedAvgAggregator}
src=$(cd "$(dirname "$0")/../.." && pwd)
out=$(mktemp -d); pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$out"' EXIT
echo "aggregator: $aggregator"
binaries=("$fedcaf"); [ -n "${OLD:-}" ] && binaries+=("$OLD")
printf "%7s %8s %3s %6s %12s %12s %10s %10s %5s\n" "mode" "S_MiB" "N" "chunk" "server/S" "client/S" "s/round" "GB/s" "build"
for mode in $modes; do
for mib in $sizes; do
  for n in $counts; do
   for pair in $(seq 1 "${PAIRS:-1}"); do
   for bin in "${binaries[@]}"; do
    which=new; [ "$bin" = "${binaries[0]}" ] || which=old
    cfgs=$src/configs; [ $which = old ] && cfgs=${OLD_SRC:-$src}/configs
    port=$(( 20000 + RANDOM % 20000 ))
    set_s=(--set "client_configs.model_configs.total_bytes=$((mib << 20))"
           --set "server_configs.num_clients=$n"
           --set "server_configs.memory_mode=$mode"
           --set "server_configs.aggregator=$aggregator"
           --set "server_configs.comm_configs.grpc_configs.server_uri=127.0.0.1:$port")
    if [ $which = new ]; then
      for kv in ${NEW_SET:-}; do set_s+=(--set "$kv"); done
    fi
    if [ "$mode" = disk ]; then
      set_s+=(--set client_configs.train_configs.storage=disk)
    fi
    timeout 900 "$bin" server -c "$cfgs/synthetic_dummy.yaml" "${set_s[@]}" \
      --report "$out/server.json" > "$out/server.log" 2>&1 & pids+=($!); server=$!
    clients=()
    for k in $(seq 1 "$n"); do
      timeout 900 "$bin" client -c "$cfgs/client_1.yaml" \
        --set "client_id=Client$k" \
        --set "data_configs.dataset_kwargs.num_clients=$n" \
        --set "data_configs.dataset_kwargs.client_id=$((k - 1))" \
        --set "comm_configs.grpc_configs.server_uri=127.0.0.1:$port" \
        --report "$out/client_$k.json" > "$out/client_$k.log" 2>&1 & pids+=($!); clients+=($!)
    done
    rc=0; wait "$server" || rc=$?
    for c in "${clients[@]}"; do wait "$c" || rc=$?; done
    if [ $rc -ne 0 ]; then echo "run S=$mib MiB N=$n failed"; tail -n 3 "$out"/*.log; continue; fi
    python3 - "$out" "$mib" "$n" "$mode" "$which" <<'PY'
import json, sys, glob
out, mib, n, mode, which = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
s = mib << 20
server = json.load(open(f"{out}/server.json"))
clients = [json.load(open(f)) for f in glob.glob(f"{out}/client_*.json")]
rounds = server["rounds"][1:] or server["rounds"]
secs = sum(r["wall_seconds"] for r in rounds) / len(rounds)
moved = sum(r["bytes_up"] + r["bytes_down"] for r in rounds) / len(rounds)
chunk = server["config"]["server_configs"]["comm_configs"]["stream_configs"]["chunk_bytes"]
window = server["config"]["server_configs"]["comm_configs"]["stream_configs"]["window"]
if which == "new":
    with open(f"{out}/peaks.txt", "a") as f:
        f.write(f"{mode} {mib} {n} {server['peak_rss_bytes']} {chunk} {window}\n")
with open(f"{out}/pairs.txt", "a") as f:
    f.write(f"{which} {mode} {mib} {n} {secs} {server['peak_rss_bytes']}\n")
print(f"{mode:>7} {mib:8d} {n:3d} {chunk >> 10:5d}K {server['peak_rss_bytes'] / s:12.3f} "
      f"{max(c['peak_rss_bytes'] for c in clients) / s:12.3f} {secs:10.2f} {moved / secs / 1e9:10.2f} {which:>5}")
PY
    rm -f "$out"/*.json
   done
   done
  done
done
done
[ -n "${OLD:-}" ] && [ -f "$out/pairs.txt" ] && python3 - "$out/pairs.txt" <<'PY'
import sys, collections, statistics
runs = collections.defaultdict(lambda: collections.defaultdict(list))
for line in open(sys.argv[1]):
    which, mode, mib, n, secs, peak = line.split()
    runs[(mode, int(mib), int(n))][which].append((float(secs), int(peak)))
for (mode, mib, n), by in sorted(runs.items()):
    if not by["new"] or not by["old"]:
        continue
    t = statistics.mean(x[0] for x in by["new"]) / statistics.mean(x[0] for x in by["old"])
    r = statistics.mean(x[1] for x in by["new"]) / statistics.mean(x[1] for x in by["old"])
    print(f"{mode} {mib} MiB, {n} clients: this build over OLD: s/round {t:.3f}, "
          f"server peak RSS {r:.3f} ({len(by['new'])} pairs)")
PY
[ -f "$out/peaks.txt" ] && python3 - "$out/peaks.txt" <<'PY'
import sys, collections
runs = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    mode, mib, n, peak, chunk, window = line.split()
    runs[(mode, int(mib))][int(n)] = (int(peak), int(chunk), int(window))
for (mode, mib), by_n in sorted(runs.items()):
    if len(by_n) < 2:
        continue
    lo, hi = min(by_n), max(by_n)
    (p_lo, chunk, window), (p_hi, _, _) = by_n[lo], by_n[hi]
    per_client = (p_hi - p_lo) / (hi - lo)
    budget = window * chunk + (1 << 20)
    print(f"{mode} {mib} MiB: server peak grows {per_client / 2**20:.2f} MiB per extra "
          f"client ({lo} -> {hi} clients); budget window x chunk + 1 MiB = "
          f"{budget / 2**20:.2f} MiB: {'within' if per_client <= budget else 'OVER'}")
PY
