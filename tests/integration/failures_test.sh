#!/usr/bin/env bash
# Every failure is one clear line, on the side that has to act, at once:
#
#  1. --http on a busy port, in simulate and server: "fedcaf: <why>" naming
#     the address and the reason, exit 1, before any run starts.
#  2. A client refused during the TLS handshake says why on its own side
#     and exits 1 at once (not after reconnect_grace_s): a plain client
#     against a TLS server, a client certificate from another CA, a
#     certificate for another client id, a server certificate the client
#     does not trust, a TLS client against a plain server. The server logs
#     one line per refused client.
#  3. SIGINT and SIGTERM end a server mid-round and a simulation mid-round
#     (in training, and in the server's evaluation) with exit 1 and the
#     report written ("interrupted"); the interrupt lines reach --log-file.
#
# Each check prints the line, the exit code and the seconds to it. The
# seconds are asserted only against a generous bound (3 s; the aim is 1 s).
# The server's evaluation stops between two batches of val_batch_size
# (1000) test images, which take 0.3 s on an idle 2-core machine and up to
# 2 s on a loaded one: that case gets 6 s.
#
#   failures_test.sh FEDCAF SOURCE_DIR
set -u
fedcaf=$1; src=$2
. "$(dirname "$0")/lib.sh"
bound_s=3

now() { date +%s.%N; }
seconds_since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }
within_bound() { awk -v s="$1" -v b="$bound_s" 'BEGIN { exit !(s < b) }'; }

# run_measured NAME CMD...: runs CMD (at most 60 s), its stderr in
# $out/NAME.log (stdout in NAME.out); sets rc, took (seconds) and last (the
# last line on stderr).
run_measured() {
  local name=$1; shift
  local start; start=$(now)
  timeout 60 "$@" > "$out/$name.out" 2> "$out/$name.log"
  rc=$?; took=$(seconds_since "$start")
  last=$(tail -n 1 "$out/$name.log")
}

# expect NAME WANT-EXIT PATTERN [ABSENT]: the last line of NAME's stderr
# matches the extended regex PATTERN (whole line), the exit code is
# WANT-EXIT, the time is within the bound, and ABSENT (a regex) is nowhere
# in its output.
expect() {
  local name=$1 want=$2 pattern=$3 absent=${4:-}
  echo "$name: ${took} s, exit $rc: $last"
  [ "$rc" -eq "$want" ] || { fail "$name: exit $rc, not $want"; return; }
  grep -Eqx -- "$pattern" <<<"$last" ||
    { fail "$name: the last line is not /$pattern/"; cat "$out/$name.log"; return; }
  if [ -n "$absent" ] && cat "$out/$name.log" "$out/$name.out" 2> /dev/null | grep -Eq -- "$absent"; then
    fail "$name: /$absent/ in its output"; cat "$out/$name.log"; return
  fi
  within_bound "$took" || { fail "$name: $took s, the bound is $bound_s s"; return; }
  pass "$name"
}

# -- 1. --http on a busy port -------------------------------------------------
busy=$(free_port)
"$py" -c '
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(); print("bound", flush=True)
time.sleep(600)' "$busy" > "$out/holder.log" 2>&1 &
pids+=($!)
wait_for "$out/holder.log" bound 10 || fail "the port holder did not start"
busy_line="fedcaf: io_error: --http: cannot listen on 127.0.0.1:$busy: port $busy is already in use \(another server running\?\)"

run_measured http_simulate "$fedcaf" simulate --http "127.0.0.1:$busy" \
  --set client_configs.train_configs.trainer=dummy
expect http_simulate 1 "$busy_line" "simulating|registered"

# server_config FILE PORT [LINES]: a server of one client and one round (the
# dummy trainer, a 4 KiB model) on 127.0.0.1:PORT; LINES go into its
# grpc_configs.
server_config() {
  cat > "$1" <<EOF
server_configs:
  num_clients: 1
  num_global_epochs: 1
  scheduler_kwargs: {round_deadline_s: 60}
  comm_configs:
    grpc_configs:
      server_uri: 127.0.0.1:$2
${3:-}
client_configs:
  train_configs: {trainer: dummy}
  model_configs: {name: synthetic, num_tensors: 2, total_bytes: 4096}
EOF
}
port=$(free_port)
server_config "$out/plain_server.yaml" "$port"
run_measured http_server "$fedcaf" server -c "$out/plain_server.yaml" --http "$busy"
expect http_server 1 "$busy_line" "listening on"

# -- 2. refused at the TLS handshake: the client says why, at once ------------
"$src/deploy/make-certs.sh" "$out/certs" 127.0.0.1 Client1 Client2 > /dev/null
"$src/deploy/make-certs.sh" "$out/other" 127.0.0.1 Client1 > /dev/null
tls_port=$(free_port)
server_config "$out/tls_server.yaml" "$tls_port" "\
      use_ssl: true
      server_certificate: $out/certs/server.pem
      server_certificate_key: $out/certs/server.key
      root_certificate: $out/certs/ca.pem"
# A client that would wait long for a server that is away: a refusal must
# not look like one.
cat > "$out/client.yaml" <<EOF
client_id: Client1
data_configs:
  dataset_kwargs: {num_clients: 1, client_id: 0}
comm_configs:
  grpc_configs:
    server_uri: 127.0.0.1:$tls_port
    use_ssl: true
    client_certificate: $out/certs/Client1.pem
    client_certificate_key: $out/certs/Client1.key
    root_certificate: $out/certs/ca.pem
  stream_configs: {reconnect_grace_s: 30}
EOF
timeout 120 "$fedcaf" server -c "$out/tls_server.yaml" > "$out/tls_server.log" 2>&1 &
tls_pid=$!; pids+=($tls_pid)
timeout 120 "$fedcaf" server -c "$out/plain_server.yaml" > "$out/plain_server.log" 2>&1 &
plain_pid=$!; pids+=($plain_pid)
wait_for "$out/tls_server.log" "listening on" 30 || fail "the TLS server did not start"
wait_for "$out/plain_server.log" "listening on" 30 || fail "the plain server did not start"
grpc=comm_configs.grpc_configs
retrying="reconnecting|not back within|trying again"
at="the server at 127.0.0.1:$tls_port"

run_measured tls_plain_client "$fedcaf" client -c "$out/client.yaml" --set $grpc.use_ssl=false
expect tls_plain_client 1 "fedcaf: not_authorized: $at refused the connection: it accepts TLS only: set comm_configs.grpc_configs.use_ssl: true, with client_certificate, client_certificate_key and root_certificate" "$retrying"

run_measured tls_other_ca "$fedcaf" client -c "$out/client.yaml" \
  --set $grpc.client_certificate=$out/other/Client1.pem \
  --set $grpc.client_certificate_key=$out/other/Client1.key
expect tls_other_ca 1 "fedcaf: not_authorized: $at: TLS handshake failed: the server refused this client's certificate \(TLS alert 'unknown CA'\): client_certificate must be signed by the CA in the server's root_certificate; .*" "$retrying"

run_measured tls_other_id "$fedcaf" client -c "$out/client.yaml" \
  --set $grpc.client_certificate=$out/certs/Client2.pem \
  --set $grpc.client_certificate_key=$out/certs/Client2.key
expect tls_other_id 1 "fedcaf: not_authorized: Client1 from 127\.0\.0\.1:[0-9]+: its client certificate is for 'Client2'" "$retrying"

run_measured tls_untrusted_server "$fedcaf" client -c "$out/client.yaml" \
  --set $grpc.root_certificate=$out/other/ca.pem
expect tls_untrusted_server 1 "fedcaf: not_authorized: $at: TLS handshake failed: the server's certificate is not trusted: .* \(root_certificate must be the CA that signed it, and it must name 127\.0\.0\.1\); .*certificate verify failed" "$retrying"

run_measured tls_to_plain_server "$fedcaf" client -c "$out/client.yaml" \
  --set $grpc.server_uri=127.0.0.1:$port
expect tls_to_plain_server 1 "fedcaf: not_authorized: the server at 127.0.0.1:$port: TLS handshake failed: the server does not speak TLS \(its answer is no TLS record\): use_ssl must be on at both ends or off at both, and server_uri must name the fedcaf port; .*" "$retrying"

# The servers: one line per refused client, naming its address.
refused_on() { grep -c "refused" "$1"; }
n=$(refused_on "$out/tls_server.log")
if [ "$n" -eq 4 ]; then pass "the TLS server logged 4 lines for 4 refused clients"
else fail "the TLS server logged $n refusal lines for 4 refused clients"; fi
for why in "TLS handshake failed: the peer does not speak TLS \(a client without use_ssl\?\).*\(peer 127\.0\.0\.1:[0-9]+\)" \
           "TLS handshake failed: the client's certificate is not trusted: .*certificate verify failed \(peer 127\.0\.0\.1:[0-9]+\)" \
           "its client certificate is for 'Client2'" \
           "TLS handshake failed: the client refused this server's certificate \(TLS alert 'unknown CA'\).*\(peer 127\.0\.0\.1:[0-9]+\)"; do
  grep -Eq -- "$why" "$out/tls_server.log" || fail "no server line /$why/"
done
n=$(refused_on "$out/plain_server.log")
if [ "$n" -eq 1 ] && grep -q "the peer speaks TLS, and this end does not (use_ssl is off here) (peer 127.0.0.1:" "$out/plain_server.log"; then
  pass "the plain server logged one line for the TLS client"
else
  fail "the plain server logged $n refusal lines"; grep refused "$out/plain_server.log"
fi
grep "refused" "$out/tls_server.log" "$out/plain_server.log" | sed 's/^/   /'
kill "$tls_pid" "$plain_pid" 2> /dev/null
wait "$tls_pid" "$plain_pid" 2> /dev/null

# -- 3. SIGINT and SIGTERM mid-round -------------------------------------------
# start_run NAME CMD...: starts CMD (at most 120 s) in the background, its
# stderr in $out/NAME.log; $run_pid is timeout(1)'s pid.
start_run() {
  local name=$1; shift
  timeout 120 "$@" > "$out/$name.out" 2> "$out/$name.log" &
  run_pid=$!; pids+=($run_pid)
}

# interrupted NAME SIGNAL: sends SIGNAL to the run NAME (started by
# start_run) and checks its exit, its last line, its report and its log
# file. The signal goes to fedcaf itself: timeout(1), signalled, would pass
# it on to its child and its process group, and a second signal means
# "stop at once".
interrupted() {
  local name=$1 sig=$2 start child
  child=$(pgrep -P "$run_pid")
  start=$(now)
  kill -"$sig" "$child"
  wait "$run_pid"; rc=$?
  took=$(seconds_since "$start")
  last=$(tail -n 1 "$out/$name.log")
  expect "$name" 1 "fedcaf: interrupted by SIG$sig"
  grep -q "^fedcaf: SIG$sig: ending the run and writing the report" "$out/$name.log" ||
    fail "$name: no interrupt line on stderr"
  "$py" - "$out/$name.json" <<'PY' || fail "$name: the report"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["status"] == "interrupted", r["status"]
print("   report:", r["status"], "-", r["failure"], "-", len(r["rounds"]), "rounds")
PY
  grep -Eq "W fedcaf: SIG$sig: ending the run and writing the report" "$out/$name.file.log" &&
    grep -Eq "E fedcaf: interrupted by SIG$sig" "$out/$name.file.log" ||
    { fail "$name: the interrupt lines are not in --log-file"; tail -5 "$out/$name.file.log"; }
}

# (a) A server mid-round: its two clients train with LibTorch for far
# longer than the test (mode step, 10^6 steps).
sig_port=$(free_port)
sed -e "s/127.0.0.1:$port/127.0.0.1:$sig_port/" -e 's/num_clients: 1/num_clients: 2/' \
  -e 's/num_global_epochs: 1/num_global_epochs: 3/' \
  -e 's/train_configs: {trainer: dummy}/train_configs: {mode: step, num_local_steps: 1000000, num_threads: 1}/' \
  -e '/model_configs/d' "$out/plain_server.yaml" > "$out/sig_server.yaml"
echo "data_configs: {dataset_kwargs: {num_clients: 2}}" >> "$out/sig_server.yaml"
for i in 1 2; do
  cat > "$out/sig_client$i.yaml" <<EOF
client_id: Client$i
train_configs: {num_threads: 1}
data_configs:
  dataset_kwargs: {num_clients: 2, client_id: $(( i - 1 ))}
comm_configs:
  grpc_configs: {server_uri: 127.0.0.1:$sig_port}
EOF
done
for sig in INT TERM; do
  name=server_sig$sig
  start_run "$name" "$fedcaf" server -c "$out/sig_server.yaml" \
    --report "$out/$name.json" --log-file "$out/$name.file.log"
  wait_for "$out/$name.log" "listening on" 30 || fail "$name: the server did not start"
  clients=()
  for i in 1 2; do
    timeout 120 "$fedcaf" client -c "$out/sig_client$i.yaml" > "$out/${name}_c$i.log" 2>&1 &
    clients+=($!); pids+=($!)
  done
  wait_for "$out/${name}_c1.log" "registered as client" 60 &&
    wait_for "$out/${name}_c2.log" "registered as client" 60 || fail "$name: no clients"
  sleep 1 # they download the model and train
  interrupted "$name" "$sig"
  kill "${clients[@]}" 2> /dev/null # still training: they stop there
  wait "${clients[@]}" 2> /dev/null
done

# (b) A simulation in training (LibTorch, 10^6 steps), and one in the
# server's evaluation of a round (the dummy trainer: the round is the
# evaluation of the CNN on 10 000 test images).
for sig in INT TERM; do
  name=simulate_training_sig$sig
  start_run "$name" "$fedcaf" simulate \
    --set client_configs.train_configs.mode=step \
    --set client_configs.train_configs.num_local_steps=1000000 \
    --report "$out/$name.json" --log-file "$out/$name.file.log"
  wait_for "$out/$name.log" "Client1: registered" 60 &&
    wait_for "$out/$name.log" "Client2: registered" 60 || fail "$name: no clients"
  sleep 1
  interrupted "$name" "$sig"
done
bound_s=6
name=simulate_evaluation_sigINT
start_run "$name" "$fedcaf" simulate --set client_configs.train_configs.trainer=dummy \
  --report "$out/$name.json" --log-file "$out/$name.file.log"
wait_for "$out/$name.log" "Client1: round 1: trained" 60 &&
  wait_for "$out/$name.log" "Client2: round 1: trained" 60 || fail "$name: no round"
sleep 0.3
if grep -q "^round 1/" "$out/$name.out"; then
  echo "   (the evaluation of round 1 ended before the signal: the timing below is not the evaluation's)"
fi
interrupted "$name" INT

finish
