#!/usr/bin/env bash
# Python clients that leave: a real `fedcaf server` (a small synthetic
# model, trainer python, min_clients 1, the default reconnect grace of 30 s)
# and four tests/integration/python_departure.py clients on 127.0.0.1, made
# without a YAML file (fedcaf.Client(server_uri=..., client_id=...)).
# Client2's loop raises ValueError at round 3, uncaught; Client3 sends an
# update of the wrong shape at round 3, uncaught; Client4 gets SIGTERM
# mid-run. Each says goodbye: the server logs "<id> left the run: <why>"
# within 1 s (the exception's type and message; a wrong model naming the
# tensor; SIGTERM), drops it at once and the rounds go on with Client1
# without waiting for the grace. Each prints its `fedcaf:` line and exits
# non-zero (1, 1, 143).
#
#   python_departures_test.sh FEDCAF SOURCE_DIR PYDIR PYTHON
set -u
fedcaf=$1; src=$2; pydir=$3; python=$4
export PYTHONPATH=$pydir
. "$(dirname "$0")/lib.sh"
port=$(free_port); uri="127.0.0.1:$port"; clients=()
timeout 120 "$fedcaf" server -c "$src/configs/synthetic_dummy.yaml" \
  --set server_configs.comm_configs.grpc_configs.server_uri=$uri \
  --set server_configs.num_clients=4 --set server_configs.num_global_epochs=40 \
  --set server_configs.scheduler_kwargs.min_clients=1 \
  --set client_configs.train_configs.trainer=python \
  --set client_configs.model_configs.total_bytes=4096 \
  --set client_configs.model_configs.num_tensors=4 \
  --report "$out/server.json" > "$out/server.log" 2>&1 &
server=$!; pids+=("$server")
modes=(stay raise wrong wait)
for k in 1 2 3 4; do
  timeout 120 "$python" "$src/tests/integration/python_departure.py" \
    "${modes[$((k - 1))]}" "$uri" "Client$k" > "$out/c$k.log" 2>&1 &
  clients+=($!); pids+=($!)
done

# gone K CODE PATTERN: ClientK exits CODE with its `fedcaf:` line, and the
# server logs "ClientK left the run: PATTERN" within 1 s of its exit.
gone() {
  local k=$1 code=$2 pattern=$3 rc=0
  wait "${clients[$((k - 1))]}" || rc=$?
  local t0; t0=$(date +%s.%N)
  [ "$rc" -eq "$code" ] && pass "Client$k exited $rc" ||
    { fail "Client$k exited $rc, not $code"; cat "$out/c$k.log"; }
  grep -q "^fedcaf: left the run (.*): said goodbye to the server" "$out/c$k.log" &&
    pass "Client$k said: $(grep '^fedcaf: left' "$out/c$k.log" | head -1)" ||
    fail "Client$k has no fedcaf: goodbye line"
  if wait_for "$out/server.log" "Client$k left the run: $pattern" 1; then
    local t1; t1=$(date +%s.%N)
    pass "the server, $("$py" -c "print(f'{$t1 - $t0:.2f}')") s after Client$k's exit: $(grep -o "Client$k left the run: .*" "$out/server.log" | head -1 | cut -c1-200)"
  else
    fail "the server did not say why Client$k left within 1 s of its exit"
    grep "Client$k" "$out/server.log" | tail -3
  fi
}
gone 2 1 "an exception in its own code: ValueError: loss is nan at step 17"
gone 3 1 "a wrong model: manifest_mismatch: task.send: tensor '.*' has shape \\[3,"
wait_for "$out/server.log" "round 8/40" 30 || fail "the run did not reach round 8"
t0=$(date +%s.%N)
kill -TERM "${clients[3]}"
gone 4 143 "terminated: SIGTERM"
wait "$server" && pass "the run completed with Client1" ||
  { fail "the server failed"; tail -5 "$out/server.log"; }
wait "${clients[0]}" && pass "Client1 stayed to the end" || fail "Client1 failed"
grep -q "dropped Client[234]" "$out/server.log" &&
  fail "a client that said goodbye was dropped after the grace" ||
  pass "nobody waited for a grace"
"$py" - "$out/server.json" <<'PY' || fail "the report"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["ok"], r["failure"]
print(f"ok: {len(r['rounds'])} rounds in {r['total_seconds']:.1f} s "
      "(the grace is 30 s)")
PY
finish
