#!/usr/bin/env bash
# A client process that restarts under its id before the server has seen
# its old connection go (kill -9, then started again at once: the old
# socket's end may not have reached the server yet). Without tokens the
# server refuses a Hello for an id whose connection it still sees alive
# ("already registered": a stranger must not take a registered client's
# place); the new process does not give up at that, it backs off and says
# Hello again, as a client that lost its server does.
#
#  1. A name really in use (the old process stays alive): the newcomer gives
#     up after its reconnect_grace_s, with a line naming the refusal, and
#     the old client is not disturbed.
#  2. The restart: the old process stays alive until the new one has been
#     refused once, then is killed; the new one takes its place and the run
#     completes with it.
#
#   restarted_client_test.sh FEDCAF
set -u
fedcaf=$1
. "$(dirname "$0")/lib.sh"
port=$(free_port)

cat > "$out/server.yaml" <<EOF
server_configs:
  num_clients: 2
  num_global_epochs: 2
  scheduler_kwargs: {round_deadline_s: 60}
  comm_configs:
    grpc_configs: {server_uri: 127.0.0.1:$port}
    stream_configs: {chunk_bytes: 65536, window: 2, heartbeat_s: 0.5, connection_timeout_s: 5}
client_configs:
  train_configs: {trainer: dummy, add: 0.5, add_by_index: true}
  model_configs: {name: synthetic, num_tensors: 4, total_bytes: 1048576, seed: 5}
EOF
client() { # ID INDEX GRACE
  cat > "$out/$1-$3.yaml" <<EOF
client_id: $1
data_configs:
  dataset_kwargs: {num_clients: 2, client_id: $2}
comm_configs:
  grpc_configs: {server_uri: 127.0.0.1:$port}
  stream_configs: {heartbeat_s: 0.5, reconnect_grace_s: $3}
EOF
}
client C1 0 30; client C1 0 2; client C2 1 30

timeout 120 "$fedcaf" server -c "$out/server.yaml" --report "$out/server.json" \
  > "$out/server.log" 2>&1 & pids+=($!); server=$!
wait_for "$out/server.log" "listening on" 30 || fail "the server did not start"
# The first C1 registers; the server waits for C2 before round 1.
timeout 120 "$fedcaf" client -c "$out/C1-30.yaml" > "$out/old.log" 2>&1 & pids+=($!); old=$!
wait_for "$out/old.log" "registered" 30 || fail "C1 did not register: $(tail -n 2 "$out/old.log")"

# 1. The name in use: the newcomer (grace 2 s) is refused, retries, gives up.
start=$(date +%s.%N)
timeout 60 "$fedcaf" client -c "$out/C1-2.yaml" > "$out/dup.log" 2>&1
rc=$?
took=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
if [ $rc -eq 1 ] && [ "$(grep -c "already registered" "$out/dup.log")" -ge 2 ] &&
   grep -q "not back within 2000 ms" "$out/dup.log" && kill -0 $old 2> /dev/null; then
  pass "1. a second process under a live client's id said Hello again for its reconnect_grace_s (${took} s), then exited 1: $(tail -n 1 "$out/dup.log" | cut -c1-200)"
else
  fail "1. the duplicate: rc $rc after ${took} s: $(tail -n 3 "$out/dup.log")"
fi

# 2. The restart: the new C1 is refused while the old one lives, then the
# old one is killed and the new one takes its place.
timeout 120 "$fedcaf" client -c "$out/C1-30.yaml" --report "$out/new.json" > "$out/new.log" 2>&1 & pids+=($!); new=$!
wait_for "$out/new.log" "already registered" 30 || fail "2. the new C1 was not refused while the old one lived"
pkill -9 -P $old; kill -9 $old 2> /dev/null
timeout 120 "$fedcaf" client -c "$out/C2-30.yaml" > "$out/C2.log" 2>&1 & pids+=($!); c2=$!
wait $server; server_rc=$?
wait $new; new_rc=$?
wait $c2
"$py" - "$out" "$server_rc" "$new_rc" <<'PY' && pass "2. C1 restarted while its old connection still looked alive: refused, it said Hello again, took its place, and the run completed with it" || fail "2. the restart: server rc $server_rc, new C1 rc $new_rc: $(tail -n 3 "$out/new.log")"
import json, sys
out, server_rc, new_rc = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
assert server_rc == 0 and new_rc == 0, (server_rc, new_rc)
s = json.load(open(f"{out}/server.json"))
assert s["status"] == "completed", s["status"]
assert [r["clients"] for r in s["rounds"]] == [2, 2], s["rounds"]
n = json.load(open(f"{out}/new.json"))
assert n["status"] == "completed", n["status"]
PY
finish
