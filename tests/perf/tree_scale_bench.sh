#!/usr/bin/env bash
# Many simulated clients under relays: a root and RELAYS `fedcaf relay`
# processes on this host (loopback), each running CLIENTS simulated clients
# in its own process (server_configs.simulated_clients) and sampling
# PER_RELAY of them a round (clients_per_round), so that a round of the
# root has RELAYS x PER_RELAY clients. Dummy trainer, a synthetic model of
# MODEL_KIB. Prints the root's rounds per minute (rounds 2 to the last),
# each process's peak RSS, and the same for one `fedcaf simulate` of
# CLIENTS clients sampling RELAYS x PER_RELAY a round (one relay's group as
# a flat run) measured in the same run, as a ratio; then the same tree in
# one process (`simulate` with server_configs.simulated_relays: RELAYS x
# CLIENTS clients under RELAYS relays), its rate against the processes'.
#
#   tests/perf/tree_scale_bench.sh build/fedcaf [RELAYS] [CLIENTS] [PER_RELAY] [ROUNDS] [MODEL_KIB]
#
# Defaults 10 relays of 10000 clients, 1 sampled each, 20 rounds, 64 KiB.
set -u
fedcaf=$1; relays=${2:-10}; clients=${3:-10000}; per=${4:-1}
rounds=${5:-20}; kib=${6:-64}
py=/usr/bin/python3
out=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2> /dev/null; done; wait 2> /dev/null; rm -rf "$out"' EXIT
base=$(( 20000 + RANDOM % 20000 ))
model="{name: synthetic, num_tensors: 4, total_bytes: $(( kib * 1024 )), seed: 5}"
names=$(for r in $(seq "$relays"); do printf 'R%s: %s, ' "$r" "$per"; done)
cat > "$out/root.yaml" <<YAML
server_configs:
  num_clients: $relays
  num_global_epochs: $rounds
  relays: {${names%, }}
  scheduler_kwargs: {round_deadline_s: 120, registration_deadline_s: 600}
  comm_configs:
    grpc_configs: {server_uri: 127.0.0.1:$base}
    stream_configs: {heartbeat_s: 2, idle_timeout_s: 600}
client_configs:
  train_configs: {trainer: dummy, add: 0.5}
  model_configs: $model
YAML
for r in $(seq "$relays"); do
  cat > "$out/R$r.yaml" <<YAML
client_id: R$r
comm_configs:
  grpc_configs: {server_uri: 127.0.0.1:$base}
  stream_configs: {heartbeat_s: 2, idle_timeout_s: 600}
server_configs:
  num_clients: $clients
  simulated_clients: $clients
  scheduler_kwargs: {clients_per_round: $per, round_deadline_s: 60, registration_deadline_s: 600}
  comm_configs:
    grpc_configs: {server_uri: 127.0.0.1:$(( base + r ))}
    stream_configs: {idle_timeout_s: 600}
YAML
done
start=$(date +%s.%N)
timeout 1800 "$fedcaf" server -c "$out/root.yaml" --report "$out/root.json" > "$out/root.log" 2>&1 &
root=$!; pids+=($root)
for r in $(seq "$relays"); do
  timeout 1800 "$fedcaf" relay -c "$out/R$r.yaml" --report "$out/R$r.json" > "$out/R$r.log" 2>&1 &
  pids+=($!)
done
wait $root || { echo "FAIL: the root: $(tail -n 3 "$out/root.log")"; tail -n 3 "$out/R1.log"; exit 1; }
for p in "${pids[@]:1}"; do wait "$p"; done
tree_s=$(echo "$(date +%s.%N) - $start" | bc)
# The flat reference: one process, CLIENTS clients, RELAYS x PER_RELAY a round.
# simulate_config NAME CLIENTS RELAYS: a simulate of CLIENTS, RELAYS x PER
# a round, under RELAYS simulated relays (0: flat).
simulate_config() {
  cat > "$out/$1.yaml" <<YAML
server_configs:
  num_clients: $2
  num_global_epochs: $rounds
  simulated_relays: $3
  scheduler_kwargs: {clients_per_round: $(( relays * per ))}
client_configs:
  train_configs: {trainer: dummy, add: 0.5}
  model_configs: $model
YAML
}
simulate_config flat "$clients" 0
timeout 1800 "$fedcaf" simulate -c "$out/flat.yaml" --report "$out/flat.json" > "$out/flat.log" 2>&1 ||
  { echo "FAIL: simulate: $(tail -n 3 "$out/flat.log")"; exit 1; }
# The same tree in one process: simulate with server_configs.simulated_relays.
simulate_config sim_tree $(( relays * clients )) "$relays"
start=$(date +%s.%N)
timeout 1800 "$fedcaf" simulate -c "$out/sim_tree.yaml" --report "$out/sim_tree.json" > "$out/sim_tree.log" 2>&1 ||
  { echo "FAIL: simulate of the tree: $(tail -n 3 "$out/sim_tree.log")"; exit 1; }
sim_tree_s=$(echo "$(date +%s.%N) - $start" | bc)
"$py" - "$out" "$relays" "$clients" "$per" "$tree_s" "$sim_tree_s" <<'PY'
import json, sys
out, relays, clients, per, tree_s, sim_s = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]), float(sys.argv[6])
def rate(r):
    ends = [x["ended_unix_s"] for x in r["rounds"]]
    return 60 * (len(ends) - 1) / (ends[-1] - ends[0])
root = json.load(open(f"{out}/root.json"))
assert root["status"] == "completed", root["status"]
assert all(x["clients"] == relays for x in root["rounds"]), [x["clients"] for x in root["rounds"]]
flat = json.load(open(f"{out}/flat.json"))
mib = lambda r: r["peak_rss_bytes"] / 2**20
reports = [json.load(open(f"{out}/R{k}.json")) for k in range(1, relays + 1)]
for r in reports:  # each relay's round: PER_RELAY of its clients
    assert all(x["clients"] == per for x in r["rounds"]), [x["clients"] for x in r["rounds"]]
rss = [mib(r) for r in reports]
t, f = rate(root), rate(flat)
print(f"{relays * clients} clients under {relays} relays, {relays * per} a round "
      f"({len(root['rounds'])} rounds, {tree_s:.0f} s with start-up): "
      f"{t:.1f} rounds/min; peak RSS root {mib(root):.0f} MiB, relays "
      f"{min(rss):.0f}-{max(rss):.0f} MiB")
print(f"flat simulate of {clients} clients, {relays * per} a round: {f:.1f} "
      f"rounds/min, peak RSS {mib(flat):.0f} MiB; tree/flat rate {t / f:.2f} x")
sim = json.load(open(f"{out}/sim_tree.json"))
assert sim["status"] == "completed", sim["status"]
assert all(len(x["relay_weights"]) == relays and x["clients"] == relays
           for x in sim["rounds"]), sim["rounds"][0]
s = rate(sim)
print(f"the same tree in one simulate (simulated_relays {relays}, "
      f"{sim_s:.0f} s with start-up): {s:.1f} rounds/min, peak RSS "
      f"{mib(sim):.0f} MiB; one-process/processes rate {s / t:.2f} x")
PY
