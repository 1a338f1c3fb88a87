#!/usr/bin/env bash
# The server's end stops remote training at the next step. A real `fedcaf
# server` (the CNN on Fashion-MNIST, configs/server.yaml) with long local
# epochs (num_local_epochs 20: minutes a round) and two remote clients on
# 127.0.0.1: a `fedcaf client` (LibTorch, stopped between two optimizer
# steps) and a Python client (examples-style loop that reads
# task.cancelled between its steps). Once both train, the server gets
# SIGINT: each client ends within 2 s of the signal (before: at the end of
# its epoch) as a run the server ended does ("the server ended the run:
# interrupted by SIGINT"); neither says goodbye (it did not leave).
#
#   server_end_test.sh FEDCAF SOURCE_DIR [PYTHONPATH PYTHON]
# Without PYTHONPATH (no Python module built) only the C++ client runs.
set -u
fedcaf=$1; src=$2; pypath=${3:-}; python=${4:-}
data=/usr/share/datasets/fashion-mnist
[ -e "$data/train-images-idx3-ubyte.gz" ] || { echo "skipped: no $data"; exit 77; }
. "$(dirname "$0")/lib.sh"
port=$(free_port); uri="127.0.0.1:$port"
now_s() { date +%s.%N; }

n=1; [ -n "$pypath" ] && n=2
timeout 300 "$fedcaf" server -c "$src/configs/server.yaml" \
  --set "server_configs.num_clients=$n" --set server_configs.num_global_epochs=3 \
  --set "server_configs.comm_configs.grpc_configs.server_uri=$uri" \
  --set client_configs.train_configs.num_local_epochs=20 \
  --report "$out/server.json" > "$out/server.log" 2>&1 &
server=$!; pids+=("$server")
timeout 300 "$fedcaf" client -c "$src/configs/client_1.yaml" \
  --set "data_configs.dataset_kwargs.num_clients=$n" \
  --set "comm_configs.grpc_configs.server_uri=$uri" > "$out/cpp.log" 2>&1 &
cpp=$!; pids+=("$cpp")
if [ -n "$pypath" ]; then
  cat > "$out/loop.py" <<'PY'
import sys, time
import fedcaf
uri = sys.argv[1]
client = fedcaf.Client(server_uri=uri, client_id="Client2")
steps = 0
for task in client.tasks():
    if task.evaluate_only:
        continue
    print("training round", task.round, flush=True)
    for step in range(100000):  # a long local epoch: 0.01 s a step
        if task.cancelled:
            print(f"cancelled after {step} steps", flush=True)
            break
        time.sleep(0.01)
        steps += 1
    else:
        task.send({n: a for n, a in task.arrays.items()}, 1)
print("the run ended", flush=True)
PY
  (cd "$out" && PYTHONPATH="$pypath" exec timeout 300 "$python" loop.py "$uri") \
    > "$out/py.log" 2>&1 &
  py_client=$!; pids+=("$py_client")
fi

# Both train: the C++ client registered (its round starts once all did,
# and its model downloads in well under a second), the Python loop says
# it trains.
wait_for "$out/cpp.log" "registered as client" 120 || fail "the C++ client never registered"
[ -z "$pypath" ] || wait_for "$out/py.log" "training round 1" 120 ||
  fail "the Python client never trained"
sleep 3
t0=$(now_s)
kill -INT "$server"
ended() { # PID: waits; sets rc and secs
  rc=0
  wait "$1" || rc=$?
  secs=$(awk -v a="$t0" -v b="$(now_s)" 'BEGIN { printf "%.2f", b - a }')
}
ended "$cpp"
if [ "$rc" -ne 0 ] && awk -v s="$secs" 'BEGIN { exit !(s < 2.0) }' &&
   grep -q "^fedcaf: .*the server ended the run: interrupted by SIGINT" "$out/cpp.log" &&
   ! grep -q "goodbye\|cancelled" "$out/cpp.log"; then
  pass "fedcaf client stopped training and ended $secs s after the server's SIGINT (exit $rc): $(tail -1 "$out/cpp.log" | cut -c1-150)"
else
  fail "fedcaf client: exit $rc, $secs s after the server's SIGINT"
  tail -5 "$out/cpp.log"
fi
if [ -n "$pypath" ]; then
  ended "$py_client"
  if awk -v s="$secs" 'BEGIN { exit !(s < 2.0) }' &&
     grep -q "^cancelled after [0-9]* steps" "$out/py.log" &&
     grep -q "the server ended the run: interrupted by SIGINT" "$out/py.log" &&
     ! grep -q "goodbye" "$out/py.log"; then
    pass "the Python loop read task.cancelled and ended $secs s after the server's SIGINT (exit $rc): $(grep '^cancelled' "$out/py.log")"
  else
    fail "the Python client: exit $rc, $secs s after the server's SIGINT"
    tail -5 "$out/py.log"
  fi
fi
wait "$server"
grep -q "left the run" "$out/server.log" &&
  fail "the server logged a departure: $(grep 'left the run' "$out/server.log")" ||
  pass "no client said goodbye: the run's end ended them"
finish
