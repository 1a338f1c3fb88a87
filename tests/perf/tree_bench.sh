#!/usr/bin/env bash
# The root's link, flat vs a tree of relays, on network-namespace hosts
# (deploy/netns.sh; needs root): the root on host c1, whose link is limited
# to RATE both ways with tc; 4 relays on c2..c5; CLIENTS clients on the
# hosts after them (unlimited links). One run of each, side by side:
#
#   flat  the root and CLIENTS clients
#   tree  the root, 4 relays, CLIENTS/4 clients under each
#
# ROUNDS rounds of a synthetic SIZE_MIB model, dummy trainer. Prints the
# root's received and sent bytes per round (its eth0 counters, and its
# report's), the mean time of rounds 2.. (1 if only 1), each process kind's peak RSS, the
# CPU time of all its processes per round against the round time times the
# machine's cores (where the tree's CPU fills the cores, the CPU, not the
# root's link, bounds its round), and the ratios tree / flat.
#
#   sudo tests/perf/tree_bench.sh build/fedcaf [SIZE_MIB=256] [CLIENTS=16] [RATE=1gbit] [ROUNDS=2]
#
# OLD=path/to/another/fedcaf runs the tree a second time with that binary
# (oldtree) and prints the tree's figures against it. MODES (default
# window) are the relays' memory modes: the tree runs once for each (the
# first is "tree", the others tree_MODE); a window-mode relay fetches its
# parent's model twice (once to pass it down, then chunk by chunk for the
# checks of its children's updates), a ram or disk relay once.
set -u
fedcaf=$(readlink -f "$1"); mib=${2:-256}; n=${3:-16}; rate=${4:-1gbit}
rounds=${5:-2}
here=$(cd "$(dirname "$0")/../.." && pwd)
. "$here/deploy/netns.sh"
why=$(netns_can) || { echo "SKIP: $why"; exit 77; }
p="fct$$"
out=$(mktemp -d)
hosts=$((5 + n))
cleanup() {
  local pid
  for pid in $(jobs -p); do kill "$pid" 2> /dev/null; done
  wait 2> /dev/null
  netns_down "$p"
  rm -rf "$out"
}
trap cleanup EXIT
netns_up "$p" "$hosts" || { echo "FAIL: netns_up"; exit 1; }
netns_rate "$p" 1 "$rate"
addr() { echo "10.91.0.$((10 + $1))"; }
root_at="$(addr 1):50051"

cat > "$out/common.yaml" <<EOF
client_configs:
  train_configs: {trainer: dummy, add: 0.5}
  model_configs: {name: synthetic, num_tensors: 16, total_bytes: $((mib << 20)), seed: 5}
EOF
root_config() { # FILE NUM_CLIENTS RELAYS
  { cat <<EOF
server_configs:
  num_clients: $2
  num_global_epochs: $rounds
  memory_mode: window
  relays: $3
  scheduler_kwargs: {round_deadline_s: 3600}
  comm_configs:
    grpc_configs: {server_uri: 0.0.0.0:50051}
    stream_configs: {idle_timeout_s: 600, window: 8}
EOF
    cat "$out/common.yaml"; } > "$1"
}
client_config() { # FILE ID INDEX SERVER
  cat > "$1" <<EOF
client_id: $2
data_configs:
  dataset_kwargs: {num_clients: $n, client_id: $3}
comm_configs:
  grpc_configs: {server_uri: $4}
  stream_configs: {idle_timeout_s: 600}
EOF
}
relay_config() { # FILE ID CLIENTS
  cat > "$1" <<EOF
client_id: $2
comm_configs:
  grpc_configs: {server_uri: $root_at}
  stream_configs: {idle_timeout_s: 600}
server_configs:
  num_clients: $3
  memory_mode: $relay_mode
  storage_dir: $out
  scheduler_kwargs: {round_deadline_s: 3600}
  comm_configs:
    grpc_configs: {server_uri: 0.0.0.0:50051}
    stream_configs: {idle_timeout_s: 600, window: 8}
EOF
}
modes=(${MODES:-window})
relay_mode=${modes[0]}
timed() { # LOG COMMAND...: peak RSS (KiB), user and system CPU seconds in LOG.time
  /usr/bin/time -f "%M %U %S" -o "$1.time" timeout 3600 "${@:2}" > "$1" 2>&1
}
cpu_ticks() { # busy and all jiffies of the whole machine (every host shares its cores)
  awk '/^cpu / { all = 0; for (i = 2; i <= NF; i++) all += $i; print all - $5 - $6, all }' /proc/stat
}
counters() { # rx tx bytes of the root host's eth0
  on "$p" c1 cat /sys/class/net/eth0/statistics/rx_bytes /sys/class/net/eth0/statistics/tx_bytes | tr '\n' ' '
}

run() { # NAME RELAYS(0|4) [BINARY]
  local name=$1 relays=$2 per=$((n / 4)) i r pids=() fedcaf=${3:-$fedcaf}
  if [ "$relays" -eq 0 ]; then
    root_config "$out/$name.yaml" "$n" "{}"
  else
    root_config "$out/$name.yaml" 4 "{R1: $per, R2: $per, R3: $per, R4: $per}"
  fi
  local before; before=$(counters)
  local ticks; ticks=$(cpu_ticks)
  on "$p" c1 bash -c "$(declare -f timed); timed '$out/${name}_root.log' '$fedcaf' server -c '$out/$name.yaml' --report '$out/$name.json'" &
  local root=$!
  sleep 1
  if [ "$relays" -gt 0 ]; then
    for r in 1 2 3 4; do
      relay_config "$out/${name}_R$r.yaml" "R$r" "$per"
      on "$p" "c$((1 + r))" bash -c "$(declare -f timed); timed '$out/${name}_R$r.log' '$fedcaf' relay -c '$out/${name}_R$r.yaml'" &
      pids+=($!)
    done
  fi
  for i in $(seq 1 "$n"); do
    local server=$root_at
    [ "$relays" -gt 0 ] && server="$(addr $((2 + (i - 1) / per))):50051"
    client_config "$out/${name}_C$i.yaml" "C$i" "$((i - 1))" "$server"
    on "$p" "c$((5 + i))" bash -c "$(declare -f timed); timed '$out/${name}_C$i.log' '$fedcaf' client -c '$out/${name}_C$i.yaml'" &
    pids+=($!)
  done
  wait "$root" || { echo "FAIL: $name: the root"; tail -n 5 "$out/${name}_root.log"; return 1; }
  for i in "${pids[@]}"; do wait "$i"; done
  echo "$before $(counters)" > "$out/$name.bytes"
  echo "$ticks $(cpu_ticks)" > "$out/$name.ticks"
}

run flat 0 || exit 1
run tree 4 || exit 1
if [ -n "${OLD:-}" ]; then run oldtree 4 "$(readlink -f "$OLD")" || exit 1; fi
for relay_mode in "${modes[@]:1}"; do run "tree_$relay_mode" 4 || exit 1; done
/usr/bin/python3 - "$out" "$mib" "$n" "$rate" "$rounds" <<'PY'
import glob, json, os, sys
out, mib, n, rate, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
fig = {}
names = ["flat", "tree"] + (["oldtree"] if os.path.exists(f"{out}/oldtree.json") else []) \
    + sorted(os.path.basename(p)[:-5] for p in glob.glob(f"{out}/tree_*.json"))
for name in names:
    r = json.load(open(f"{out}/{name}.json"))
    assert r["status"] == "completed", (name, r["status"])
    rx0, tx0, rx1, tx1 = map(int, open(f"{out}/{name}.bytes").read().split())
    b0, a0, b1, a1 = map(int, open(f"{out}/{name}.ticks").read().split())
    # Round 1 of a tree also waits for the relays' children to register
    # (a relay opens its side with its first model): later rounds only.
    secs = [x["wall_seconds"] for x in r["rounds"]][1 if rounds > 1 else 0:]
    times = lambda pat: [open(f).read().split()[-3:] for f in glob.glob(f"{out}/{name}_{pat}.log.time")]
    rss = lambda pat: max(int(t[0]) for t in times(pat)) / 1024
    cpu_of = lambda pat: sum(float(t[1]) + float(t[2]) for t in times(pat)) / rounds
    kinds = dict(root=cpu_of("root"), relays=cpu_of("R*"), clients=cpu_of("C*"))
    cpu = sum(kinds.values())
    fig[name] = dict(rx=(rx1 - rx0) / rounds, tx=(tx1 - tx0) / rounds,
                     up=sum(x["bytes_up"] for x in r["rounds"]) / rounds,
                     down=sum(x["bytes_down"] for x in r["rounds"]) / rounds,
                     secs=sum(secs) / len(secs), cpu=cpu, busy=(b1 - b0) / (a1 - a0), kinds=kinds, root=rss("root"), client=rss("C*"),
                     relay=rss("R*") if name != "flat" else 0)
g = 2**30
cores = os.cpu_count()
print(f"{n} clients x {mib} MiB, root link {rate}, {rounds} rounds, 4 relays of {n // 4}")
for name, f in fig.items():
    print(f"  {name}: root link per round in {f['rx'] / g:.2f} GiB, out {f['tx'] / g:.2f} GiB "
          f"(report: up {f['up'] / g:.2f}, down {f['down'] / g:.2f}); round {f['secs']:.1f} s; "
          f"CPU {f['cpu']:.1f} s per round (start-up included; "
          + ", ".join(f"{k} {v:.1f}" for k, v in f["kinds"].items() if v) +
          f"), {f['cpu'] / cores:.1f} s on {cores} cores, "
          f"the machine {100 * f['busy']:.0f}% busy; "
          f"peak RSS root {f['root']:.0f} MiB, client {f['client']:.0f} MiB"
          + (f", relay {f['relay']:.0f} MiB" if f['relay'] else ""))
fl = fig["flat"]
for name in [x for x in names if x.startswith("tree")]:
    t = fig[name]
    print(f"  {name} / flat: root ingress {t['rx'] / fl['rx']:.3f}, egress {t['tx'] / fl['tx']:.3f}, "
          f"round time {t['secs'] / fl['secs']:.3f}; the tree's CPU alone, spread on {cores} cores, "
          f"takes {t['cpu'] / cores / fl['secs']:.3f} of the flat round")
t = fig["tree"]
if "oldtree" in fig:
    o = fig["oldtree"]
    print(f"  tree / oldtree: round time {t['secs'] / o['secs']:.3f}, relay peak RSS {t['relay'] / o['relay']:.3f}, "
          f"root ingress {t['rx'] / o['rx']:.3f}, egress {t['tx'] / o['tx']:.3f}")
PY
