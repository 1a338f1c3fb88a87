#!/usr/bin/env bash
# Bytes up and round time of each compression method against none, in one
# run: real processes on loopback, `fedcaf server` and N `fedcaf client`,
# a synthetic float32 model of S MiB (configs/synthetic_dummy.yaml: the
# dummy trainer adds 0.5 to every element), ram mode, uploads compressed
# (direction up). Prints per method the bytes the server received per
# round, the round time, the client's peak RSS and the CPU seconds of all
# processes, each as a ratio to none.
#
# With LINK (a tc rate, e.g. 1gbit), each client is a host of its own on a
# link of that rate both ways (deploy/netns.sh: network namespaces joined
# to the server's, tc tbf; needs root): where the network, not the CPU,
# sets a round's pace, which is what compression is for. Without it, all
# of them share this machine's loopback. With NOISE (e.g. 0.01), each
# update is 0.5 plus a value uniform in [-NOISE, NOISE) per element
# (train_configs.noise), which compresses as trained updates do, not as a
# constant.
#
# ROUNDS (default 3) rounds; the figures per round are the median of
# rounds 2 to ROUNDS (round 1 pays the first page faults).
#
#   tests/perf/compression_bench.sh [FEDCAF] [S_MIB] [N] [METHODS] [DIRECTION] [LINK] [NOISE] [ROUNDS]
#   tests/perf/compression_bench.sh build/fedcaf 1024 2 "fp16 bf16 int8 zfp" up
#   tests/perf/compression_bench.sh build/fedcaf 1024 2 "int8 zfp" up 1gbit 0.01
#   tests/perf/compression_bench.sh build/fedcaf 1024 2 "zfp" up "" 0.01
set -u
fedcaf=${1:-build/fedcaf}
mib=${2:-1024}
n=${3:-2}
methods=${4:-"fp16 bf16 int8 zfp"}
direction=${5:-up}
link=${6:-}
noise=${7:-0}
rounds=${8:-3}
src=$(cd "$(dirname "$0")/../.." && pwd)
out=$(mktemp -d); pids=()
prefix="cb$$"
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
      [ -n "$link" ] && netns_down "$prefix"; rm -rf "$out"' EXIT
fedcaf=$(realpath "$fedcaf")
server_ip=127.0.0.1
ns=false # each host's processes run under "ip netns exec <its namespace>"
# CPU seconds (user + system) of every process: what a shared machine's
# contention does not change.
cpu_time="/usr/bin/time -f %U+%S -o"
[ -x /usr/bin/time ] || { echo "needs /usr/bin/time (Debian's time)"; exit 2; }
if [ -n "$link" ]; then
  . "$src/deploy/netns.sh"
  if ! why=$(netns_can); then echo "LINK needs network namespaces: $why"; exit 2; fi
  netns_up "$prefix" "$n" || { echo "could not build the namespaces"; exit 1; }
  for k in $(seq 1 "$n"); do netns_rate "$prefix" "$k" "$link"; done
  server_ip=10.91.0.1; ns=true
fi

for method in none $methods; do
  port=$(( 20000 + RANDOM % 20000 ))
  on_host=(); $ns && on_host=(ip netns exec "${prefix}s")
  "${on_host[@]}" $cpu_time "$out/cpu-$method-s" timeout 900 "$fedcaf" server -c "$src/configs/synthetic_dummy.yaml" \
    --set "client_configs.model_configs.total_bytes=$((mib << 20))" \
    --set "server_configs.num_clients=$n" \
    --set "client_configs.comm_configs.compression.method=$method" \
    --set "client_configs.comm_configs.compression.direction=$direction" \
    --set "client_configs.train_configs.noise=$noise" \
    --set "server_configs.num_global_epochs=$rounds" \
    --set "server_configs.comm_configs.grpc_configs.server_uri=$server_ip:$port" \
    --report "$out/server-$method.json" > "$out/server.log" 2>&1 & pids+=($!); server=$!
  clients=()
  for k in $(seq 1 "$n"); do
    on_host=(); $ns && on_host=(ip netns exec "${prefix}c$k")
    "${on_host[@]}" $cpu_time "$out/cpu-$method-$k" timeout 900 "$fedcaf" client -c "$src/configs/client_1.yaml" \
      --set "client_id=Client$k" \
      --set "data_configs.dataset_kwargs.num_clients=$n" \
      --set "data_configs.dataset_kwargs.client_id=$((k - 1))" \
      --set "comm_configs.grpc_configs.server_uri=$server_ip:$port" \
      --report "$out/client-$method-$k.json" > "$out/client_$k.log" 2>&1 & pids+=($!); clients+=($!)
  done
  rc=0; wait "$server" || rc=$?
  for c in "${clients[@]}"; do wait "$c" || rc=$?; done
  if [ $rc -ne 0 ]; then
    echo "$method: a process failed"; tail -3 "$out"/*.log; exit 1
  fi
done

python3 - "$out" "$mib" "$n" "$methods" "$direction" "${link:-loopback}" "$noise" <<'PY'
import json, statistics, sys
out, mib, n, methods, direction, link, noise = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4].split(), sys.argv[5], sys.argv[6], sys.argv[7]
def figures(method):
    s = json.load(open(f"{out}/server-{method}.json"))
    assert s["ok"], (method, s["failure"])
    rounds = s["rounds"][1:] or s["rounds"]
    up = statistics.median(r["bytes_up"] for r in rounds)
    down = statistics.median(r["bytes_down"] for r in rounds)
    secs = statistics.median(r["wall_seconds"] for r in rounds)
    clients = [json.load(open(f"{out}/client-{method}-{k}.json")) for k in range(1, n + 1)]
    rss = max(c["peak_rss_bytes"] for c in clients)
    cpu = sum(float(t) for p in ["s"] + list(range(1, n + 1))
              for t in open(f"{out}/cpu-{method}-{p}").read().split()[-1].split("+"))
    return up, down, secs, rss, cpu
base = figures("none")
where = "loopback" if link == "loopback" else f"a {link} link per client"
update = "0.5" if float(noise) == 0 else f"0.5 + U[-{noise}, {noise})"
print(f"{mib} MiB model, {n} clients, direction {direction}, {where}, updates {update}; "
      f"per round (median of rounds 2-{len(json.load(open(f'{out}/server-none.json'))['rounds'])})")
print(f"{'method':>6} {'MiB up':>9} {'up/none':>8} {'MiB down':>9} {'down/none':>9} "
      f"{'s/round':>8} {'time/none':>9} {'client RSS/none':>15} {'CPU s':>7} {'CPU/none':>8}")
for m in ["none"] + methods:
    up, down, secs, rss, cpu = figures(m)
    print(f"{m:>6} {up / 2**20:9.1f} {up / base[0]:8.3f} {down / 2**20:9.1f} "
          f"{down / base[1]:9.3f} {secs:8.2f} {secs / base[2]:9.3f} {rss / base[3]:15.3f} "
          f"{cpu:7.1f} {cpu / base[4]:8.3f}")
print("CPU s: user + system seconds of the server and every client, whole run")
PY
