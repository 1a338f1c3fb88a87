#!/usr/bin/env bash
# A relay's peak RSS against the model's size: a root, one relay and two
# clients under it on loopback, ROUNDS (default 1) rounds of a synthetic model of each size
# in SIZES_MIB, the relay in each of MODES. The root runs in disk mode and
# the clients keep their models on disk (train_configs.storage) so that the
# machine's memory goes to the relay. Prints, per mode, the relay's peak
# RSS at each size, over the model's size, and the largest over the
# smallest (1.00: independent of the size).
#
#   tests/perf/relay_memory_bench.sh build/fedcaf ["256 2048"] ["window disk"] [DIR]
#
# DIR (default /var/tmp) holds the models' files. ROUNDS=2 shows a relay
# between rounds too (the parent's next model beside its last sum).
# OLD=path/to/another/fedcaf runs each case with that binary too, right
# after this one's, and prints this one's RSS over the other's.
set -u
fedcaf=$1; sizes=${2:-256 2048}; modes=${3:-window disk}; dir=${4:-/var/tmp}
binaries=("$fedcaf"); [ -n "${OLD:-}" ] && binaries+=("$OLD")
py=/usr/bin/python3
work=$(mktemp -d "$dir/fedcaf-relaymem.XXXXXX")
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2> /dev/null; done; wait 2> /dev/null; [ -n "${FEDCAF_KEEP:-}" ] && echo "kept $work" || rm -rf "$work"' EXIT
results=()
for mode in $modes; do
  for mib in $sizes; do
   for fedcaf in "${binaries[@]}"; do
    which=new; [ "$fedcaf" = "${binaries[0]}" ] || which=old
    port=$(( 20000 + RANDOM % 20000 ))
    cat > "$work/root.yaml" <<YAML
server_configs:
  num_clients: 1
  num_global_epochs: ${ROUNDS:-1}
  memory_mode: disk
  storage_dir: $work
  relays: {R1: 2}
  comm_configs:
    grpc_configs: {server_uri: 127.0.0.1:$port}
    stream_configs: {chunk_bytes: 4194304, window: 4, idle_timeout_s: 600}
client_configs:
  train_configs: {trainer: dummy, add: 0.5, storage: disk, storage_dir: $work}
  model_configs: {name: synthetic, num_tensors: 16, total_bytes: $(( mib << 20 )), seed: 7}
YAML
    cat > "$work/relay.yaml" <<YAML
client_id: R1
comm_configs:
  grpc_configs: {server_uri: 127.0.0.1:$port}
  stream_configs: {idle_timeout_s: 600}
server_configs:
  num_clients: 2
  memory_mode: $mode
  storage_dir: $work
  scheduler_kwargs: {round_deadline_s: 600, registration_deadline_s: 60}
  comm_configs:
    grpc_configs: {server_uri: 127.0.0.1:$(( port + 1 ))}
    stream_configs: {chunk_bytes: 4194304, window: 4, idle_timeout_s: 600}
YAML
    for i in 1 2; do
      printf 'client_id: C%s\ndata_configs:\n  dataset_kwargs: {num_clients: 2, client_id: %s}\ncomm_configs:\n  grpc_configs: {server_uri: 127.0.0.1:%s}\n  stream_configs: {idle_timeout_s: 600}\n' \
        "$i" "$(( i - 1 ))" "$(( port + 1 ))" > "$work/c$i.yaml"
    done
    pids=()
    timeout ${LIMIT_S:-1200} "$fedcaf" server -c "$work/root.yaml" --report "$work/root.json" > "$work/root.log" 2>&1 &
    root=$!; pids+=($root)
    timeout ${LIMIT_S:-1200} "$fedcaf" relay -c "$work/relay.yaml" --report "$work/relay.json" > "$work/relay.log" 2>&1 &
    relay=$!; pids+=($relay)
    for i in 1 2; do
      timeout ${LIMIT_S:-1200} "$fedcaf" client -c "$work/c$i.yaml" > "$work/c$i.log" 2>&1 & pids+=($!)
    done
    wait $root || { echo "FAIL: root ($mode, $mib MiB): $(tail -n 3 "$work/root.log")"; tail -n 3 "$work/relay.log"; exit 1; }
    for p in "${pids[@]:1}"; do wait "$p"; done
    rss=$("$py" -c 'import json,sys; print(json.load(open(sys.argv[1]))["peak_rss_bytes"] >> 20)' "$work/relay.json")
    results+=("$which $mode $mib $rss")
    echo "relay in $mode mode, model $mib MiB: peak RSS $rss MiB ($fedcaf)"
   done
  done
done
"$py" - "${results[@]}" <<'PY'
import sys
rows = [r.split() for r in sys.argv[1:]]
for mode in dict.fromkeys(r[1] for r in rows):
    mine = [(int(m), int(rss)) for w, md, m, rss in rows if md == mode and w == "new"]
    parts = ", ".join(f"{m} MiB: {rss} MiB ({rss / m:.2f} x)" for m, rss in mine)
    print(f"{mode}: {parts}; largest/smallest model's RSS {mine[-1][1] / mine[0][1]:.2f}")
    old = {int(m): int(rss) for w, md, m, rss in rows if md == mode and w == "old"}
    if old:
        print(f"{mode}, this build over OLD: " + ", ".join(
            f"{m} MiB: {rss} / {old[m]} MiB = {rss / old[m]:.2f}" for m, rss in mine))
PY
