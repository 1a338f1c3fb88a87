#!/usr/bin/env bash
# APPFL's shipped example configs (tests/fixtures/appfl: server_fedavg.yaml
# and its two client configs, keys naming Python files removed) run a round
# as they are: `fedcaf server` and two `fedcaf client` on 127.0.0.1, one
# round (num_global_epochs set to 1; the data set's path set where it is not
# Debian's). The server prints the one warning listing the ignored keys;
# APPFL's Opacus DP-SGD runs as fedcaf's (an epsilon in the report). Then the
# same with compressor_configs on (ZFP, an absolute bound; 20 local steps):
# uploads travel zfp-encoded.
#
#   appfl_configs_test.sh FEDCAF SOURCE_DIR
# Skipped (77) without Fashion-MNIST at FEDCAF_DATASET
# (default /usr/share/datasets/fashion-mnist).
set -u
fedcaf=$1; src=$2
data=${FEDCAF_DATASET:-/usr/share/datasets/fashion-mnist}
[ -e "$data/t10k-images-idx3-ubyte.gz" ] || [ -e "$data/t10k-images-idx3-ubyte" ] ||
  { echo "skipped: no Fashion-MNIST in $data"; exit 77; }
. "$(dirname "$0")/lib.sh"
fixtures=$src/tests/fixtures/appfl

# appfl_round DIR [--set ...]: the server fixture (with the sets) and both
# client fixtures, one round; logs and reports in DIR.
appfl_round() {
  local dir=$1; shift; mkdir -p "$dir"
  local uri="127.0.0.1:$(free_port)" clients=() rc=0 server
  timeout 300 "$fedcaf" server -c "$fixtures/server_fedavg.yaml" \
    --set server_configs.comm_configs.grpc_configs.server_uri=$uri \
    --set server_configs.num_global_epochs=1 \
    --set data_configs.dataset_path="$data" "$@" \
    --report "$dir/server.json" > "$dir/server.log" 2>&1 & pids+=($!); server=$!
  for i in 1 2; do
    timeout 300 "$fedcaf" client -c "$fixtures/client_$i.yaml" \
      --set comm_configs.grpc_configs.server_uri=$uri \
      --set data_configs.dataset_path="$data" \
      --report "$dir/client_$i.json" > "$dir/client_$i.log" 2>&1 & pids+=($!)
    clients+=($!)
  done
  wait $server || rc=$?
  for c in "${clients[@]}"; do wait $c || rc=$?; done
  cat "$dir/server.log"
  [ $rc -eq 0 ] || { fail "a process exited $rc"; cat "$dir"/client_*.log; }
}

start=$(date +%s.%N)
appfl_round "$out/as_shipped"
seconds=$(echo "$(date +%s.%N) - $start" | bc)
warnings=$(grep -c "warning" "$out/as_shipped/server.log")
if [ "$warnings" -eq 1 ] && grep -q "fedcaf: warning: $fixtures/server_fedavg.yaml: ignored 16 keys fedcaf does not use: server_configs.logging_output_dirname, " "$out/as_shipped/server.log"; then
  pass "server_fedavg.yaml: one warning, 16 ignored keys"
else
  fail "server_fedavg.yaml: expected one warning of 16 keys"
fi
for i in 1 2; do
  grep -q "fedcaf: warning: $fixtures/client_$i.yaml: ignored 5 keys" "$out/as_shipped/client_$i.log" &&
    pass "client_$i.yaml: one warning, 5 ignored keys" ||
    fail "client_$i.yaml: expected one warning of 5 keys"
done
"$py" - "$out/as_shipped" "$seconds" <<'PY' && pass "a round as shipped" || fail "a round as shipped"
import json, sys
out, seconds = sys.argv[1], float(sys.argv[2])
server = json.load(open(f"{out}/server.json"))
assert server["ok"], server["failure"]
assert len(server["rounds"]) == 1, server["rounds"]
r = server["rounds"][0]
clients = [json.load(open(f"{out}/client_{i}.json")) for i in (1, 2)]
assert all(c["ok"] for c in clients), [c["failure"] for c in clients]
ids = sorted(c["node"] for c in clients)
assert ids == ["Client1", "Client2"], ids  # APPFL's logging_id
eps = r.get("dp_sgd_epsilon")
assert eps and eps > 0, r  # Opacus's DP-SGD, as fedcaf's
print(f"APPFL server_fedavg.yaml, 1 round: test accuracy "
      f"{r['test_accuracy']:.4f}, DP-SGD epsilon {eps:.3f}, "
      f"{seconds:.1f} s for the three processes")
PY

key=client_configs.comm_configs.compressor_configs
appfl_round "$out/zfp" --set $key.enable_compression=true \
  --set $key.lossy_compressor=ZFPCompressor --set $key.error_bounding_mode=ABS \
  --set client_configs.train_configs.num_local_steps=20
"$py" - "$out/zfp/server.json" <<'PY' && pass "compressor_configs as zfp" || fail "compressor_configs as zfp"
import json, sys
server = json.load(open(sys.argv[1]))
assert server["ok"], server["failure"]
r = server["rounds"][0]
assert r["compression_up"] > 1.5, r
print(f"APPFL ZFPCompressor ABS 1e-3 as zfp uploads: {r['compression_up']:.2f}x "
      f"fewer bytes up, test accuracy {r['test_accuracy']:.4f}")
PY
finish
