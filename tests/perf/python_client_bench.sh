#!/usr/bin/env bash
# The Python client against the C++ client, in one run on loopback: a
# server and 2 clients, FedAvg, 3 rounds, a synthetic float32 model of S
# bytes (configs/synthetic_dummy.yaml), no training: each client adds 0.5 to
# every element (Python: in place on the arrays that view the received
# model, then task.send of those same arrays; C++: the dummy trainer).
# Prints each client's peak RSS (from /usr/bin/time -v) as a multiple of S,
# the mean round time on each side, and their ratios.
#
#   tests/perf/python_client_bench.sh [FEDCAF] [SIZE_MIB] [PYTHON]
#   tests/perf/python_client_bench.sh build/fedcaf 1024 /usr/bin/python3
set -u
fedcaf=${1:-build/fedcaf}
mib=${2:-1024}
python=${3:-/usr/bin/python3}
src=$(cd "$(dirname "$0")/../.." && pwd)
pydir=$(cd "$(dirname "$fedcaf")" && pwd)/python
out=$(mktemp -d); pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$out"' EXIT
bytes=$((mib << 20))

# run KIND: one server and two clients of KIND (python | cpp); writes
# $out/KIND.server.json and $out/KIND.client_I.time
run() {
  local kind=$1 port=$(( 20000 + RANDOM % 20000 ))
  local trainer=dummy; [ "$kind" = python ] && trainer=python
  local uri=127.0.0.1:$port
  timeout 900 "$fedcaf" server -c "$src/configs/synthetic_dummy.yaml" \
    --set client_configs.model_configs.total_bytes=$bytes \
    --set client_configs.train_configs.trainer=$trainer \
    --set server_configs.memory_mode=window \
    --set server_configs.federated_evaluation=false \
    --set server_configs.comm_configs.grpc_configs.server_uri=$uri \
    --report "$out/$kind.server.json" > "$out/$kind.server.log" 2>&1 &
  local server=$!; pids+=($server)
  local clients=()
  for i in 1 2; do
    local set_uri="comm_configs.grpc_configs.server_uri=$uri"
    if [ "$kind" = python ]; then
      PYTHONPATH=$pydir /usr/bin/time -v -o "$out/$kind.client_$i.time" \
        timeout 900 "$python" - "$src/configs/client_$i.yaml" "$uri" \
        > "$out/$kind.client_$i.log" 2>&1 <<'PY' &
import sys
import fedcaf
client = fedcaf.Client(sys.argv[1], set={"comm_configs.grpc_configs.server_uri": sys.argv[2]})
for task in client.tasks():
    arrays = task.arrays
    for a in arrays.values():
        a += 0.5  # in place: the update is the received memory itself
    task.send(arrays, num_samples=1)
PY
    else
      /usr/bin/time -v -o "$out/$kind.client_$i.time" timeout 900 \
        "$fedcaf" client -c "$src/configs/client_$i.yaml" --set "$set_uri" \
        > "$out/$kind.client_$i.log" 2>&1 &
    fi
    clients+=($!); pids+=($!)
  done
  local rc=0
  wait $server || rc=$?
  for c in "${clients[@]}"; do wait $c || rc=$?; done
  if [ $rc -ne 0 ]; then
    echo "$kind run failed"; cat "$out/$kind".*.log; exit 1
  fi
}

run python
run cpp
"$python" - "$out" "$bytes" <<'PY'
import json, re, sys
out, size = sys.argv[1], int(sys.argv[2])
def peak(path):
    text = open(path).read()
    return int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", text).group(1)) * 1024
def seconds(kind):
    r = json.load(open(f"{out}/{kind}.server.json"))
    assert r["ok"], r["failure"]
    return sum(x["wall_seconds"] for x in r["rounds"]) / len(r["rounds"])
print(f"model {size / 2**30:.2f} GiB, 2 clients, 3 rounds")
for kind in ("python", "cpp"):
    rss = [peak(f"{out}/{kind}.client_{i}.time") / size for i in (1, 2)]
    print(f"{kind:>6}: client peak RSS / model {max(rss):.3f}, "
          f"{seconds(kind):.2f} s per round")
py_rss = max(peak(f"{out}/python.client_{i}.time") for i in (1, 2)) / size
print(f"python client peak RSS / model: {py_rss:.3f} (goal <= 1.3)")
print(f"round time python / C++ client: {seconds('python') / seconds('cpp'):.3f} (goal <= 1.5)")
PY
