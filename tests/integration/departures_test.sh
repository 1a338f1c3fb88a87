#!/usr/bin/env bash
# Departures with a reason: a real `fedcaf server` and four `fedcaf client`
# processes on 127.0.0.1 (a 16 MiB synthetic model, dummy trainer,
# min_clients 2, the default reconnect grace of 30 s). Mid-run, Client4 gets
# SIGTERM and Client3 SIGINT. Each says goodbye and exits 143 and 130 with
# one `fedcaf:` line; the server logs "<id> left the run: terminated:
# SIGTERM" (and interrupted: SIGINT) within 1 s of the signal and drops it
# at once: the rounds after go on with the two others without waiting for
# the grace, and the run completes. Then Client2 gets SIGKILL: no goodbye,
# so the server says what it knows ("closed without a goodbye") and waits
# for the grace, as before.
#
#   departures_test.sh FEDCAF SOURCE_DIR
set -u
fedcaf=$1; src=$2
. "$(dirname "$0")/lib.sh"
port=$(free_port); uri="127.0.0.1:$port"; clients=()
timeout 120 "$fedcaf" server -c "$src/configs/synthetic_dummy.yaml" \
  --set "client_configs.model_configs.total_bytes=$((16 << 20))" \
  --set server_configs.num_clients=4 --set server_configs.num_global_epochs=60 \
  --set server_configs.scheduler_kwargs.min_clients=2 \
  --set "server_configs.comm_configs.grpc_configs.server_uri=$uri" \
  --report "$out/server.json" > "$out/server.log" 2>&1 &
server=$!; pids+=("$server")
for k in 1 2 3 4; do
  "$fedcaf" client -c "$src/configs/client_1.yaml" --set "client_id=Client$k" \
    --set data_configs.dataset_kwargs.num_clients=4 \
    --set "data_configs.dataset_kwargs.client_id=$((k - 1))" \
    --set "comm_configs.grpc_configs.server_uri=$uri" > "$out/c$k.log" 2>&1 &
  clients+=($!); pids+=($!)
done
wait_for "$out/server.log" "round 3/60" 60 || fail "the run did not reach round 3"

# leave K SIGNAL CODE REASON: signals ClientK, checks its exit and line and
# the server's line (within 1 s).
leave() {
  local k=$1 sig=$2 code=$3 reason=$4 rc=0
  local t0; t0=$(date +%s.%N)
  kill "-$sig" "${clients[$((k - 1))]}"
  wait "${clients[$((k - 1))]}" || rc=$?
  [ "$rc" -eq "$code" ] && pass "Client$k exited $rc on SIG$sig" ||
    fail "Client$k exited $rc on SIG$sig, not $code"
  grep -q "^fedcaf: .*said goodbye to the server" "$out/c$k.log" &&
    pass "Client$k said so: $(grep '^fedcaf: .*goodbye' "$out/c$k.log" | head -1)" ||
    fail "Client$k has no fedcaf: goodbye line"
  if wait_for "$out/server.log" "Client$k left the run: $reason: SIG$sig" 5; then
    local t1; t1=$(date +%s.%N)
    local dt; dt=$("$py" -c "print(f'{$t1 - $t0:.2f}')")
    "$py" -c "import sys; sys.exit(0 if $t1 - $t0 <= 1.0 else 1)" &&
      pass "the server logged Client$k's departure ${dt} s after the signal" ||
      fail "the server logged Client$k's departure ${dt} s after the signal"
  else
    fail "the server never said why Client$k left"
  fi
}
leave 4 TERM 143 terminated
leave 3 INT 130 interrupted
# The rounds go on with Client1 and Client2 at once: 5 more rounds in
# far less than the 30 s grace.
last=$(grep -o 'round [0-9]*/60' "$out/server.log" | tail -1 | tr -dc '0-9/' | cut -d/ -f1)
t0=$(date +%s)
if wait_for "$out/server.log" "round $((last + 5))/60" 20; then
  pass "5 rounds after the departures in $(( $(date +%s) - t0 )) s (the grace is 30 s)"
else
  fail "the rounds after the departures waited"
fi
grep -q "dropped Client[34]" "$out/server.log" &&
  fail "a client that said goodbye was dropped only after the grace" ||
  pass "nobody waited for Client3's or Client4's grace"
# Without a goodbye (SIGKILL): what is known, and the grace as before.
kill -KILL "${clients[1]}"
wait_for "$out/server.log" "Client2 lost its connection .closed without a goodbye" 5 &&
  pass "a client killed: $(grep -o 'Client2 lost its connection.*' "$out/server.log" | head -1)" ||
  fail "no line for Client2's lost connection"
kill "$server" "${clients[0]}" 2> /dev/null
finish
