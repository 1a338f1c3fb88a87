#!/usr/bin/env bash
# The deploy/ launchers, each running a real server and 3 clients on this
# host: run-local.sh (one client config as a template), rank-exec.sh under
# the environment Slurm's srun gives each task (rank 0 server, ranks 1..3
# clients), mpi-run.sh a tree of 7 ranks (root, 2 relays, 4 clients) under
# an mpiexec that starts them here, and run-hosts.sh with a remote shell that runs on this host.
# Then Python clients, started as any command: run-local.sh and rank-exec.sh
# with FEDCAF_CLIENT_CMD, run-hosts.sh with `command` lines under a relay
# (tests/integration/launched_client.py; each checked for the client id,
# data partition and server or relay address it was given). They need the
# fedcaf module: from PYDIR, else PYTHONPATH; skipped, saying so, without.
#   deploy_test.sh FEDCAF SOURCE_DIR [PYDIR [PYTHON]]
set -u
fedcaf=$1; src=$2; pydir=${3:-}; python=${4:-}
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

# Python clients, started as any command.
[ -n "$python" ] || python=$py
[ -z "$pydir" ] || export PYTHONPATH=$pydir${PYTHONPATH:+:$PYTHONPATH}
if ! module=$("$python" -c "import fedcaf; print(fedcaf.__file__)" 2> /dev/null); then
  echo "skipped: Python clients (no fedcaf module for $python: give PYDIR, or set PYTHONPATH)"
  echo "passed"; exit 0
fi
cmp -s "$module" "$src/python/fedcaf/__init__.py" ||
  echo "note: the fedcaf module $module is not $src/python/fedcaf/__init__.py (another tree's build, or an older one?)"
# The clients train with their own Python code, on a 4 KiB model.
sed -e 's/{trainer: dummy, add: 0.5}/{trainer: python}/' \
  -e 's/total_bytes: 1048576/total_bytes: 4096/' \
  "$out/server.yaml" > "$out/server_python.yaml"
grep -q "trainer: python" "$out/server_python.yaml" || fail "server_python.yaml"
launched_client="$python $src/tests/integration/launched_client.py"
# launched DIR URI MADE_FROM...: client i (1..N, one MADE_FROM each) wrote
# DIR/Client<i>.json: it was given Client<i>, partition i-1 of N and the
# address URI, in its environment and in its --set arguments where it had
# them; it made its fedcaf.Client from MADE_FROM (arguments or
# environment), trained 2 rounds and its report is ok.
launched() {
  "$python" - "$@" <<'PY' || fail "the Python clients' files in $1"
import json, sys
d, uri, made = sys.argv[1], sys.argv[2], sys.argv[3:]
n = len(made)
for i in range(1, n + 1):
    r = json.load(open(f"{d}/Client{i}.json"))
    want = {"FEDCAF_CLIENT_ID": f"Client{i}", "FEDCAF_PARTITION": str(i - 1),
            "FEDCAF_NUM_PARTITIONS": str(n), "FEDCAF_SERVER_URI": uri}
    got = {k: r["environment"].get(k) for k in want}
    assert got == want, (i, got)
    sets = r["sets"]
    if sets:
        want = {"client_id": f"Client{i}",
                "data_configs.dataset_kwargs.client_id": str(i - 1),
                "data_configs.dataset_kwargs.num_clients": str(n)}
        if "comm_configs.grpc_configs.server_uri" in sets:
            want["comm_configs.grpc_configs.server_uri"] = uri
        assert sets == want, (i, sets)
    assert r["made_from"] == made[i - 1], (i, r["made_from"])
    assert r["rounds_trained"] == 2, (i, r["rounds_trained"])
    rep = r["report"]
    assert rep["ok"] and rep["node"] == f"Client{i}", (i, rep["node"], rep["failure"])
    print(f"  Client{i}: FEDCAF_CLIENT_ID Client{i}, FEDCAF_PARTITION {i - 1}, "
          f"FEDCAF_NUM_PARTITIONS {n}, FEDCAF_SERVER_URI {uri}; its "
          f"fedcaf.Client made from the {made[i - 1]}, 2 rounds trained, "
          "report ok")
    if sets:
        print(f"    and its arguments: -c {r['config'].split('/')[-1]} "
              + " ".join(f"--set {k}={v}" for k, v in sets.items()))
PY
}

mkdir -p "$out/py_local"
FEDCAF=$fedcaf FEDCAF_CLIENT_CMD="$launched_client $out/py_local" \
  LOG_DIR=$out/local_python timeout 60 "$src/deploy/run-local.sh" 2 \
  "$out/server_python.yaml" "$out/client.yaml" > "$out/local_python.log" 2>&1 ||
  fail "run-local.sh, Python clients"
grep -q "^run complete" "$out/local_python.log" || fail "run-local.sh, Python clients: no 'run complete'"
check "$out/local_python" server
for i in 1 2; do
  grep -q "^launched client Client$i: " "$out/local_python/client$i.log" ||
    fail "run-local.sh did not start the Python client as client$i"
  grep -q "Client$i" "$out/local_python/server.log" || fail "the server did not name Client$i"
done
echo "run-local.sh: 2 Python clients (FEDCAF_CLIENT_CMD), the run complete:"
launched "$out/py_local" "127.0.0.1:$port" arguments environment

mkdir -p "$out/py_slurm"
for rank in 0 1 2; do
  SLURM_PROCID=$rank SLURM_NTASKS=3 FEDCAF_SERVER=127.0.0.1:$port FEDCAF=$fedcaf \
    FEDCAF_CLIENT_CMD="$launched_client $out/py_slurm" LOG_DIR=$out/slurm_python \
    timeout 60 "$src/deploy/rank-exec.sh" "$out/server_python.yaml" "$out/client.yaml" &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || fail "rank-exec.sh, Python clients"; done
pids=()
check "$out/slurm_python" server
echo "rank-exec.sh: ranks 0..2 as srun starts them, 2 Python clients (FEDCAF_CLIENT_CMD):"
launched "$out/py_slurm" "127.0.0.1:$port" arguments environment

# A tree through run-hosts.sh: the root, a relay, two `command` lines under
# it, which must be given the relay's address.
mkdir -p "$out/py_hosts"
{
  echo "server hostA $out/server_python.yaml --set server_configs.num_clients=1 --set data_configs.dataset_kwargs.num_clients=1 --set server_configs.relays.RA=2"
  echo "relay hostB $out/relay.yaml --set client_id=RA --set server_configs.comm_configs.grpc_configs.server_uri=127.0.0.1:$relay_port"
  for i in 1 2; do echo "command host$i $launched_client $out/py_hosts"; done
} > "$out/hosts_python"
SSH=$out/fake_ssh FEDCAF=$fedcaf LOG_DIR=$out/hosts_python_run timeout 60 \
  "$src/deploy/run-hosts.sh" "$out/hosts_python" > "$out/hosts_python.log" 2>&1 ||
  fail "run-hosts.sh, Python clients under a relay"
check "$out/hosts_python_run" server relay1
[ ! -e "$out/hosts_python_run/client1.json" ] || fail "run-hosts.sh fetched a report for a command line"
for i in 1 2; do
  grep -q "Client$i" "$out/hosts_python_run/relay1.log" || fail "the relay did not name Client$i"
done
echo "run-hosts.sh: a root, a relay and 2 Python clients as 'command' lines under it:"
launched "$out/py_hosts" "127.0.0.1:$relay_port" environment environment
echo "passed"
