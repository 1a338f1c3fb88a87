#!/usr/bin/env bash
# Checkpoints of a disk-mode model: `fedcaf server` (memory_mode disk) and two
# `fedcaf client` processes, one round of a synthetic model of SIZE_MIB
# (default 4096), a checkpoint after it. Prints the server's peak RSS over
# the model's size (the run's peak, the checkpoint's write included) and the
# checkpoint's time over `cp` of the checkpoint's model file to a file beside
# it (the same bytes, the same disk), both measured in this run.
#
#   tests/perf/checkpoint_bench.sh build/fedcaf [SIZE_MIB] [DIR]
#
# DIR (default /var/tmp) holds the model's file, the checkpoint and the cp.
# The two clients share this machine with the server: their models are
# file-backed (train_configs.storage: disk) so that 2 x SIZE of their heap
# does not squeeze the page cache the checkpoint writes through (with heap
# clients, a 4 GiB checkpoint measured 13-15 s against 3-4 s: memory
# pressure a server without its clients beside it does not have).
set -u
fedcaf=$1; mib=${2:-4096}; dir=${3:-/var/tmp}
work=$(mktemp -d "$dir/fedcaf-ckbench.XXXXXX")
trap 'rm -rf "$work"' EXIT
port=$(( 20000 + RANDOM % 20000 ))
cat > "$work/server.yaml" <<EOF
server_configs:
  num_clients: 2
  num_global_epochs: 1
  aggregator: FedAvgAggregator
  memory_mode: disk
  storage_dir: $work
  checkpoint: {dir: $work/ckpt, keep: 1}
  comm_configs:
    grpc_configs: {server_uri: 127.0.0.1:$port}
    stream_configs: {chunk_bytes: 4194304, window: 4, idle_timeout_s: 600}
client_configs:
  train_configs: {trainer: dummy, add: 0.5, storage: disk, storage_dir: $work}
  model_configs: {name: synthetic, num_tensors: 16, total_bytes: $(( mib << 20 )), seed: 7}
data_configs:
  dataset_kwargs: {num_clients: 2}
EOF
for i in 1 2; do
  printf 'client_id: Client%s\ndata_configs:\n  dataset_kwargs: {num_clients: 2, client_id: %s}\ncomm_configs:\n  grpc_configs: {server_uri: 127.0.0.1:%s}\n  stream_configs: {idle_timeout_s: 600}\n' \
    "$i" "$(( i - 1 ))" "$port" > "$work/client$i.yaml"
done
timeout 3600 "$fedcaf" server -c "$work/server.yaml" --log-level debug \
  --report "$work/server.json" > "$work/server.log" 2>&1 & server=$!
sleep 1
clients=()
for i in 1 2; do
  timeout 3600 "$fedcaf" client -c "$work/client$i.yaml" > "$work/client$i.log" 2>&1 &
  clients+=($!)
done
wait $server || { echo "FAIL: the server"; tail -5 "$work/server.log"; exit 1; }
for c in "${clients[@]}"; do wait "$c"; done
took=$(grep -o "checkpoint of round 1 in [0-9.]* s" "$work/server.log" | grep -o "[0-9.]* s" | cut -d' ' -f1)
grep -o "the model .*fsync [0-9.]* s" "$work/server.log" | sed 's/^/server: /'
model="$work/ckpt/round-000001/model.safetensors"
sync
start=$(date +%s.%N)
cp "$model" "$work/copy.safetensors" && sync
end=$(date +%s.%N)
# The checkpoint is written just after the round dirtied the model's own
# file (disk mode): as much dirty data waits for writeback. The same for cp:
# a model's worth written (not synced) just before it.
rm -f "$work/copy.safetensors"; sync
dd if=/dev/zero of="$work/dirty.bin" bs=1M count="$mib" status=none
start2=$(date +%s.%N)
cp "$model" "$work/copy.safetensors" && sync
end2=$(date +%s.%N)
grep -q "copied file to file" "$work/server.log" && how="file to file" || how="from the mapping"
/usr/bin/python3 - "$work/server.json" "$mib" "$took" "$start" "$end" "$start2" "$end2" "$how" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
mib, took = int(sys.argv[2]), float(sys.argv[3])
cp = float(sys.argv[5]) - float(sys.argv[4])
cp_dirty = float(sys.argv[7]) - float(sys.argv[6])
rss = r["peak_rss_bytes"] / 2**20
print(f"model {mib} MiB, disk mode: server peak RSS {rss:.0f} MiB = "
      f"{rss / mib:.3f} x model; checkpoint ({sys.argv[8]}) {took:.2f} s; "
      f"cp of its model file {cp:.2f} s ({took / cp:.2f} x), with a model's "
      f"worth of dirty pages pending as the checkpoint had {cp_dirty:.2f} s "
      f"({took / cp_dirty:.2f} x)")
PY
