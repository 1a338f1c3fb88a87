#!/usr/bin/env bash
# The deploy/ launchers, each running a real server and 3 clients on this
# host: run-local.sh (one client config as a template), rank-exec.sh under
# the environment Slurm's srun gives each task (rank 0 server, ranks 1..3
# clients), mpi-run.sh a tree of 7 ranks (root, 2 relays, 4 clients) under
# an mpiexec that starts them here, and run-hosts.sh with a remote shell that runs on this host.
#   deploy_test.sh FEDCAF SOURCE_DIR
set -u
fedcaf=$1; src=$2
. "$(dirname "$0")/lib.sh"
fail() { echo "FAIL: $*"; for f in $(find "$out" -name '*.log'); do echo "== $f"; tail -8 "$f"; done; exit 1; }
port=$(free_port)

cat > "$out/server.yaml" <<YAML
server_configs:
  num_clients: 3
  num_global_epochs: 2
  comm_configs:
    grpc_configs: {server_uri: 127.0.0.1:$port}
    stream_configs: {chunk_bytes: 65536, idle_timeout_s: 30}
client_configs:
  train_configs: {trainer: dummy, add: 0.5}
  model_configs: {name: synthetic, num_tensors: 4, total_bytes: 1048576}
data_configs:
  dataset_kwargs: {num_clients: 3}
YAML
cat > "$out/client.yaml" <<YAML
client_id: ClientX
data_configs:
  dataset_kwargs: {num_clients: 3, client_id: 0}
comm_configs:
  grpc_configs: {server_uri: 127.0.0.1:$port}
YAML

# check DIR NAMES...: every report exists and says ok.
check() {
  local dir=$1; shift
  /usr/bin/python3 - "$dir" "$@" <<'PY' || fail "reports in $dir"
import json, sys
d = sys.argv[1]
for name in sys.argv[2:]:
    r = json.load(open(f"{d}/{name}.json"))
    assert r["ok"], (name, r["failure"])
    assert len(r["rounds"]) == 2, (name, r["rounds"])
    if r["role"] == "client":
        assert r["bytes_sent"] > 0 and r["bytes_received"] > 0, name
PY
}

FEDCAF=$fedcaf LOG_DIR=$out/local timeout 120 "$src/deploy/run-local.sh" 3 \
  "$out/server.yaml" "$out/client.yaml" > "$out/local.log" 2>&1 ||
  fail "run-local.sh"
check "$out/local" server client1 client2 client3
grep -q "Client3" "$out/local/server.log" || fail "run-local.sh did not name Client3"
echo "run-local.sh: a server and 3 clients from one client template"

for rank in 0 1 2 3; do
  SLURM_PROCID=$rank SLURM_NTASKS=4 FEDCAF_SERVER=127.0.0.1:$port FEDCAF=$fedcaf \
    LOG_DIR=$out/slurm timeout 120 "$src/deploy/rank-exec.sh" \
    "$out/server.yaml" "$out/client.yaml" &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || fail "rank-exec.sh"; done
pids=()
check "$out/slurm" server client1 client2 client3
echo "rank-exec.sh: ranks 0..3 as srun starts them: a server and 3 clients"

# A tree as mpi-run.sh starts it (FEDCAF_RELAYS=2, 4 clients: 7 ranks,
# int8 compressed):
# rank 0 the root, ranks 1-2 the relays, ranks 3-6 the clients, two under
# each relay; the clients find their relay's address in LOG_DIR.
cat > "$out/relay.yaml" <<YAML
client_id: RelayX
comm_configs:
  grpc_configs: {server_uri: 127.0.0.1:$port}
server_configs:
  num_clients: 2
  comm_configs:
    stream_configs: {chunk_bytes: 65536, idle_timeout_s: 30}
YAML
# The tree's transfers are compressed (int8, both ways): each relay serves
# its clients and decodes their uploads as its parent's client_configs say;
# its sum goes up whole.
sed 's/^  model_configs:.*/&\n  comm_configs: {compression: {method: int8, direction: both}}/' \
  "$out/server.yaml" > "$out/server_int8.yaml"
relay_port=$(free_port)
while [ "$relay_port" = "$port" ] || [ "$(( relay_port + 1 ))" = "$port" ]; do
  relay_port=$(free_port)
done
# mpiexec as Hydra starts ranks on one host: PMI_RANK and PMI_SIZE.
cat > "$out/mpiexec" <<'SH'
#!/bin/bash
[ "$1" = -n ] || exit 2
n=$2; shift 2
for (( r = 0; r < n; r++ )); do PMI_RANK=$r PMI_SIZE=$n "$@" & done
status=0
for (( r = 0; r < n; r++ )); do wait -n || status=1; done
exit $status
SH
chmod +x "$out/mpiexec"
PATH=$out:$PATH FEDCAF_SERVER=127.0.0.1:$port FEDCAF=$fedcaf FEDCAF_RELAYS=2 \
  FEDCAF_RELAY_PORT=$relay_port FEDCAF_RELAY_BIND=127.0.0.1 \
  FEDCAF_RELAY_HOST=127.0.0.1 LOG_DIR=$out/slurm_tree timeout 120 \
  "$src/deploy/mpi-run.sh" 4 "$out/server_int8.yaml" "$out/client.yaml" \
  "$out/relay.yaml" > "$out/mpi.log" 2>&1 || fail "mpi-run.sh, a tree"
check "$out/slurm_tree" server relay1 relay2 client1 client2 client3 client4
/usr/bin/python3 - "$out/slurm_tree" <<'PY' || fail "the tree's reports"
import json, sys
d = sys.argv[1]
root = json.load(open(f"{d}/server.json"))
for r in root["rounds"]:
    # Each relay's sum weighs its two clients.
    assert dict(r["relay_weights"]) == {"Relay1": 2, "Relay2": 2}, r
for name in ("server", "relay1", "relay2"):  # int8 downloads at each level
    r = json.load(open(f"{d}/{name}.json"))
    assert all(x["compression_down"] > 3.5 for x in r["rounds"]), (name, r["rounds"])
    # the clients' uploads to the relays compressed, the relays' sums whole
    up = [x["compression_up"] for x in r["rounds"]]
    assert all((u or 1) < 1.01 if name == "server" else u > 3.5 for u in up), (name, up)
for k, relay in ((1, 1), (2, 2), (3, 1), (4, 2)):
    log = open(f"{d}/relay{relay}.log").read()
    assert f"Client{k}" in log, (k, relay)
PY
SLURM_PROCID=0 SLURM_NTASKS=2 FEDCAF_SERVER=127.0.0.1:$port FEDCAF_RELAYS=1 \
  "$src/deploy/rank-exec.sh" "$out/server.yaml" "$out/client.yaml" \
  "$out/relay.yaml" > "$out/few.log" 2>&1 && fail "rank-exec.sh ran a tree of 1 relay in 2 ranks"
grep -q "too few for a root, 1 relays" "$out/few.log" ||
  fail "rank-exec.sh: no reason for refusing 2 ranks for a tree: $(cat "$out/few.log")"
echo "mpi-run.sh: a tree of 7 ranks: a root, 2 relays, 2 clients under each"

# A remote shell that runs the command here: `fake_ssh HOST CMD...`.
printf '#!/bin/sh\nshift\nexec "$@"\n' > "$out/fake_ssh"
chmod +x "$out/fake_ssh"
{
  echo "# role host config args"
  echo "server hostA $out/server.yaml"
  for i in 1 2 3; do
    echo "client host$i $out/client.yaml --set client_id=Client$i --set data_configs.dataset_kwargs.client_id=$((i - 1))"
  done
} > "$out/hosts"
SSH=$out/fake_ssh FEDCAF=$fedcaf LOG_DIR=$out/hosts_run timeout 120 \
  "$src/deploy/run-hosts.sh" "$out/hosts" > "$out/hosts.log" 2>&1 ||
  fail "run-hosts.sh"
check "$out/hosts_run" server client1 client2 client3
echo "run-hosts.sh: 4 processes through a remote shell, logs and reports fetched"
echo "passed"
