#!/usr/bin/env bash
# Bytes up and round time of each compression method against none, in one
# run: real processes on loopback, `fedcaf server` and N `fedcaf client`,
# a synthetic float32 model of S MiB (configs/synthetic_dummy.yaml: the
# dummy trainer adds 0.5 to every element), 3 rounds, ram mode, uploads
# compressed (direction up). Prints per method the bytes the server received
# per round, the round time (rounds 2 and 3; round 1 pays the first page
# faults) and the client's peak RSS, each as a ratio to none.
#
#   tests/perf/compression_bench.sh [FEDCAF] [S_MIB] [N] [METHODS] [DIRECTION]
#   tests/perf/compression_bench.sh build/fedcaf 1024 2 "fp16 bf16 int8 zfp" up
set -u
fedcaf=${1:-build/fedcaf}
mib=${2:-1024}
n=${3:-2}
methods=${4:-"fp16 bf16 int8 zfp"}
direction=${5:-up}
src=$(cd "$(dirname "$0")/../.." && pwd)
out=$(mktemp -d); pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$out"' EXIT

for method in none $methods; do
  port=$(( 20000 + RANDOM % 20000 ))
  timeout 900 "$fedcaf" server -c "$src/configs/synthetic_dummy.yaml" \
    --set "client_configs.model_configs.total_bytes=$((mib << 20))" \
    --set "server_configs.num_clients=$n" \
    --set "client_configs.comm_configs.compression.method=$method" \
    --set "client_configs.comm_configs.compression.direction=$direction" \
    --set "server_configs.comm_configs.grpc_configs.server_uri=127.0.0.1:$port" \
    --report "$out/server-$method.json" > "$out/server.log" 2>&1 & pids+=($!); server=$!
  clients=()
  for k in $(seq 1 "$n"); do
    timeout 900 "$fedcaf" client -c "$src/configs/client_1.yaml" \
      --set "client_id=Client$k" \
      --set "data_configs.dataset_kwargs.num_clients=$n" \
      --set "data_configs.dataset_kwargs.client_id=$((k - 1))" \
      --set "comm_configs.grpc_configs.server_uri=127.0.0.1:$port" \
      --report "$out/client-$method-$k.json" > "$out/client_$k.log" 2>&1 & pids+=($!); clients+=($!)
  done
  rc=0; wait "$server" || rc=$?
  for c in "${clients[@]}"; do wait "$c" || rc=$?; done
  if [ $rc -ne 0 ]; then
    echo "$method: a process failed"; tail -3 "$out"/*.log; exit 1
  fi
done

python3 - "$out" "$mib" "$n" "$methods" "$direction" <<'PY'
import json, sys
out, mib, n, methods, direction = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4].split(), sys.argv[5]
def figures(method):
    s = json.load(open(f"{out}/server-{method}.json"))
    assert s["ok"], (method, s["failure"])
    rounds = s["rounds"][1:] or s["rounds"]
    up = sum(r["bytes_up"] for r in rounds) / len(rounds)
    down = sum(r["bytes_down"] for r in rounds) / len(rounds)
    secs = sum(r["wall_seconds"] for r in rounds) / len(rounds)
    clients = [json.load(open(f"{out}/client-{method}-{k}.json")) for k in range(1, n + 1)]
    rss = max(c["peak_rss_bytes"] for c in clients)
    # every round moved the same model: the last one equals the first + 1.5
    return up, down, secs, rss, s["rounds"][-1].get("compression_up")
base = figures("none")
print(f"{mib} MiB model, {n} clients, direction {direction}, loopback; per round (rounds 2-3)")
print(f"{'method':>6} {'MiB up':>9} {'up/none':>8} {'MiB down':>9} {'down/none':>9} "
      f"{'s/round':>8} {'time/none':>9} {'client RSS/none':>15}")
for m in ["none"] + methods:
    up, down, secs, rss, ratio = figures(m)
    print(f"{m:>6} {up / 2**20:9.1f} {up / base[0]:8.3f} {down / 2**20:9.1f} "
          f"{down / base[1]:9.3f} {secs:8.2f} {secs / base[2]:9.3f} {rss / base[3]:15.3f}")
PY
