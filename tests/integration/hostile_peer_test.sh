#!/usr/bin/env bash
# Hostile peers against real `fedcaf server` processes on 127.0.0.1, while
# two honest `fedcaf client` processes train a synthetic 8 MiB model with the
# dummy trainer (client i adds 0.5 (i + 1) per round: exact, reproducible).
# The attacker is tests/integration/hostile_peer_test.cpp (hostile_peer): one
# attack per process, exit 0 iff the server answered as specified on the
# wire. Runs:
#
#   ref  only the honest clients, ram and window memory modes: the reference
#        global models; C runs its own first (ram mode, the same
#        compression: the encoded deltas are as reproducible).
#   A    before authentication, while round 1 is open: max_unauthenticated
#        (8) idle or half-open connections (nothing, half a header, a header
#        and half a body), 4 more (each must make the oldest give way), then
#        a registered client's Hello, which must get in at once; it joins
#        round 1 and never offers until the attacks are over (then it leaves
#        and is dropped; min_clients 2). Meanwhile: a Hello sent one byte per
#        100 ms and, one connection each, a 1 GiB header, a header just over
#        the 64 KiB Hello limit, random bytes, a valid header over garbage, a
#        Hello without request id, a frame of a kind the protocol does not
#        have, an Accept (only the server sends those), and a Hello whose
#        client id forges a log line and clears the terminal.
#   T    mutual TLS: a real ClientHello sent one byte per 100 ms while a
#        welcomed client waits for the second.
#   B1   registered attackers (own tokens; num_clients = 2 honest + 5,
#        min_clients 2), in ram mode: a fetch flood and a credit flood of
#        3 x window + 1 each, a frame of an unknown kind, an Accept, a
#        header over max_message_size.
#   B2   (window mode, num_clients 4) an accomplice offers and holds its
#        stream open (so the honest streams wait, open, for its chunks);
#        the attacker sends chunk 0 of the accomplice's stream (valid in all
#        but its sender), then over new connections the next chunk, the end
#        and a credit of an honest client's stream (ids are guessable).
#   B3   (window mode) an attacker that offers in every round, then sends
#        nothing but heartbeats.
#   B4   (ram mode) an attacker that uploads its whole update as an honest
#        client would, chunks of 1000.0 but one NaN in the third; if the
#        server took it, it would be in the model.
#   B5   (ram mode) an update of finite values that would overflow the
#        round's float32 sum (3e38), and an attacker that offers every
#        300 ms but never sends a chunk (it must not keep the round open);
#        connections that take the same session over one after another
#        (each taken over is closed; past 8 in 10 s, refused);
#        200 requests refused one at a time (wrong_round).
#   I    (ram, then window mode) an update of 1e30 everywhere: finite and
#        within the sum's bound, refused by the default update bound
#        (max_update_ratio) at its first chunk. I_int8 (ram mode, int8
#        uploads): int8 chunks whose first block's scale is 1e35 (finite),
#        refused as poisoned_update.
#   C    compressed uploads (client_configs.comm_configs.compression,
#        direction up), ram mode, all in round 1. C_int8 (method int8): an
#        offer naming fp16 (manifest_mismatch); int8 chunks one byte short
#        from the third (out_of_range, dropped mid-upload); once that one is
#        out, int8 chunks whose first block's scale is NaN from the third
#        (poisoned_update: the whole update). C_zfp (method zfp): chunks of
#        random bytes one more than zfp's bound from the third
#        (out_of_range); once that one is out, random bytes within the bound
#        from the third (out_of_range or poisoned_update).
#   L    the live view (--http), the server at ulimit -n 256: for 12 s a
#        200 MiB request line, 300 connections held open, 8 requests sent a
#        byte a second, 8 clients that pipeline GETs and never read (each
#        closed by the server: at the 5 s write timeout, or after 100
#        requests where loopback's buffers took 100 responses)
#        (tests/integration/live_view_attack.py), while a normal GET every
#        250 ms must be answered, the server's RSS may grow by under 16 MiB
#        and its descriptors by the view's cap; meanwhile 25 Hellos on the
#        fedcaf port must each be answered and the honest clients register.
#
#   G    (ram mode) online token guessing from 127.0.0.2: an unknown id
#        and a wrong token must get one answer; of 300 wrong tokens for
#        Client1, each on a new connection, only the first few are heard,
#        the rest refused unheard (too_many_requests) during the back-off,
#        with one log line per burst; the honest clients (127.0.0.1,
#        Client1 among them) get in at once meanwhile.
#
# For every run: each attack's verdict, each refusal in the server's log with
# its code and the attacker's address, the server exits 0 after all rounds,
# the honest clients exit 0, the server's peak RSS stays under the bound
# (the peak of the reference run in the same memory mode, with the same
# compression and chunk size, + 2 x model + 16 MiB), and every saved global model is
# byte-identical to that reference's.
#
#   hostile_peer_test.sh FEDCAF HOSTILE_PEER SOURCE_DIR
# (HOSTILE_KEEP_LOGS=1 keeps the logs and models for a look afterwards;
# HOSTILE_RUNS="A B2" runs only those, after the references.)
set -u
fedcaf=${1:-}; hostile=${2:-}; src=${3:-}
[ -x "$fedcaf" ] && [ -x "$hostile" ] && [ -d "$src" ] || {
  echo "usage: $0 FEDCAF HOSTILE_PEER SOURCE_DIR"; exit 2; }
out=$(mktemp -d)
pids=()
started=$SECONDS
cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2> /dev/null; done
  if [ -n "${HOSTILE_KEEP_LOGS:-}" ]; then echo "logs kept in $out"; else rm -rf "$out"; fi
}
trap cleanup EXIT

model_bytes=$(( 8 << 20 ))
max_message_bytes=$(( 1 << 20 ))
handshake_s=2
max_unauth=8
rounds=3
log_limit_kib=20480 # every process's output is cut at 20 MiB (ulimit -f)

passed=0; failed=0
pass() { echo "PASS: $*"; passed=$(( passed + 1 )); }
# Failures are recapped at the end, where a log cut in the middle (as CI
# shows a long one: its head and its tail) still shows them.
failures=""
fail() {
  echo "FAIL: $*"; failed=$(( failed + 1 ))
  failures+="  FAIL: ${*:0:300}"$'\n'
}

# wait_count FILE PATTERN N SECONDS: returns 0 once FILE holds N lines
# with PATTERN.
wait_count() {
  local i n
  for (( i = 0; i < $4 * 10; i++ )); do
    n=$(grep -c -- "$2" "$1" 2> /dev/null)
    [ "${n:-0}" -ge "$3" ] && return 0
    sleep 0.1
  done
  return 1
}

# excerpt FILE LINES: the last LINES lines of a log, each cut to 300 bytes.
excerpt() { tail -n "$2" "$1" 2> /dev/null | cut -c1-300 | sed 's/^/      /'; }

# wait_for FILE PATTERN SECONDS: returns 0 once FILE holds PATTERN.
wait_for() {
  local i
  for (( i = 0; i < $3 * 10; i++ )); do
    grep -q -- "$2" "$1" 2> /dev/null && return 0
    sleep 0.1
  done
  return 1
}

# -- configs -------------------------------------------------------------------

tokens="{Client1: honest-one, Client2: honest-two"
for i in 1 2 3 4 5 6 7; do tokens+=", Mallory$i: evil-$i"; done
tokens+="}"

# server_config FILE NAME NUM_CLIENTS MEMORY_MODE ROUNDS
server_config() {
  cat > "$1" <<EOF
server_configs:
  num_clients: $3
  num_global_epochs: $5
  scheduler: SyncScheduler
  scheduler_kwargs: {min_clients: 2}
  aggregator: FedAvgAggregator
  aggregator_kwargs: {client_weights_mode: equal}
  memory_mode: $4
  save_global_model: $out/$2_{round}.safetensors
  comm_configs:
    grpc_configs:
      server_uri: 127.0.0.1:0
      max_message_size: $max_message_bytes
      use_authenticator: true
      authenticator_args:
        tokens: $tokens
    stream_configs:
      chunk_bytes: 262144
      window: 4
      idle_timeout_s: 2
      heartbeat_s: 0.5
      connection_timeout_s: 3
      reconnect_grace_s: 1
      handshake_timeout_s: $handshake_s
      max_unauthenticated: $max_unauth
      # Every attacker here is 127.0.0.1: each refusal's line is checked,
      # so the per-host pacing of refusal lines is off (its own run: F).
      refusal_log_lines: 1000000
client_configs:
  train_configs: {trainer: dummy, add: 0.5, add_by_index: true}
  model_configs: {name: synthetic, num_tensors: 8, total_bytes: $model_bytes, seed: 7}
data_configs:
  dataset_kwargs: {num_clients: $3}
EOF
}

# client_config FILE I TOKEN: honest Client<I>, patient enough to outwait
# every attack (its own idle timeout and reconnect grace are 20 s).
client_config() {
  cat > "$1" <<EOF
client_id: Client$2
data_configs:
  dataset_kwargs: {num_clients: 2, client_id: $(( $2 - 1 ))}
comm_configs:
  grpc_configs:
    server_uri: 127.0.0.1:1
    use_authenticator: true
    authenticator_args: {auth_token: $3}
  stream_configs: {idle_timeout_s: 20, heartbeat_s: 0.5, connection_timeout_s: 3, reconnect_grace_s: 20}
EOF
}
client_config "$out/client1.yaml" 1 honest-one
client_config "$out/client2.yaml" 2 honest-two

# -- processes -----------------------------------------------------------------

# start_server RUN CONFIG [ARGS...]: sets server_pid and port (the server
# binds port 0).
start_server() {
  local run=$1 cfg=$2; shift 2
  ( ulimit -f $log_limit_kib
    exec timeout 40 "$fedcaf" server -c "$cfg" "$@" --report "$out/$run.json" ) \
    > "$out/$run.log" 2>&1 &
  server_pid=$!; pids+=($server_pid)
  port=
  wait_for "$out/$run.log" "listening on" 30 &&
    port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' \
             "$out/$run.log" | head -1)
  [ -n "$port" ] && return 0
  fail "$run: the server did not start"
  excerpt "$out/$run.log" 10
  kill "$server_pid" 2> /dev/null; wait "$server_pid" 2> /dev/null
  return 1
}

# start_client RUN I [ARGS...]: honest Client<I>; adds to client_pids.
start_client() {
  local run=$1 i=$2; shift 2
  ( ulimit -f $log_limit_kib
    exec timeout 40 "$fedcaf" client -c "$out/client$i.yaml" \
      --set comm_configs.grpc_configs.server_uri=127.0.0.1:$port "$@" \
      --report "$out/${run}_client$i.json" ) > "$out/${run}_client$i.log" 2>&1 &
  client_pids+=($!); pids+=($!)
}

# start_clients RUN: both honest clients; sets client_pids.
start_clients() {
  client_pids=()
  start_client "$1" 1
  start_client "$1" 2
}

declare -A attack_pid attack_rc
attack_names=()
# attack RUN NAME ARGS...: one hostile_peer process in the background; its
# output goes to $out/RUN_NAME.out.
attack() {
  local run=$1 name=$2; shift 2
  timeout 35 "$hostile" --port "$port" --handshake-s $handshake_s "$@" \
    > "$out/${run}_$name.out" 2>&1 &
  attack_pid[$run/$name]=$!; pids+=($!)
  attack_names+=("$run/$name")
}

# finish_attack RUN NAME: waits for that attacker.
finish_attack() {
  wait "${attack_pid[$1/$2]}"; attack_rc[$1/$2]=$?
}

# finish_attacks: waits for every attacker started so far.
finish_attacks() {
  local k
  for k in "${attack_names[@]}"; do
    [ -n "${attack_rc[$k]:-}" ] || finish_attack "${k%%/*}" "${k#*/}"
  done
}

# finish_run RUN: waits for the server and the honest clients.
finish_run() {
  wait "$server_pid"; server_rc=$?
  client_rcs=()
  local p
  for p in "${client_pids[@]}"; do wait "$p"; client_rcs+=($?); done
}

# -- checks --------------------------------------------------------------------

# check_verdict RUN NAME: the attacker saw the server behave as specified.
check_verdict() {
  local f="$out/$1_$2.out" rc=${attack_rc[$1/$2]}
  local line; line=$(grep "verdict:" "$f" | tail -1)
  if [ "$rc" = 0 ]; then
    pass "$1 $2: ${line#*verdict: }"
  else
    fail "$1 $2 (exit $rc): ${line:-no verdict}"
    grep -v "verdict:" "$f" > "$f.rest"; excerpt "$f.rest" 12
  fi
}

# check_refused RUN NAME CODE [LABEL_PREFIX]: for every connection the
# attacker opened (whose label starts with LABEL_PREFIX), the server logged
# "refused: CODE: ..." with that connection's address.
check_refused() {
  local run=$1 name=$2 code=$3 prefix=${4:-} label addr n=0 missing=()
  while read -r label addr; do
    [[ $label == "$prefix"* ]] || continue
    n=$(( n + 1 ))
    grep -Eq "refused: $code: .*${addr//./\\.}([^0-9]|\$)" "$out/$run.log" ||
      missing+=("$label $addr")
  done < <(sed -n 's/.*: conn \([^ ]*\) \(127\.0\.0\.1:[0-9]*\)$/\1 \2/p' \
             "$out/${run}_$name.out")
  if [ $n -gt 0 ] && [ ${#missing[@]} = 0 ]; then
    pass "$run $name: $n refusal(s) '$code' logged with the peer address"
    return
  fi
  fail "$run $name: no 'refused: $code' line for ${missing[*]:-any connection}"
  local m
  for m in "${missing[@]}"; do # what the log says about that address
    addr=${m#* }
    if grep -Eq "${addr//./\\.}([^0-9]|\$)" "$out/$run.log"; then
      grep -E "${addr//./\\.}([^0-9]|\$)" "$out/$run.log" > "$out/$run.about"
      excerpt "$out/$run.about" 3
    else
      echo "      (the log never names $addr)"
    fi
  done
}

# rss_of RUN: the server's peak RSS in bytes, from its report.
rss_of() {
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["peak_rss_bytes"])' \
    "$out/$1.json" 2> /dev/null || echo 0
}

# check_run RUN ROUNDS REF: exit statuses, rounds, RSS bound, models (where
# an attacker's rejected update left checked chunks in round 1's sum:
# check_kept_prefix), against
# the reference run ref_REF (REF: its memory mode, or its compression).
check_run() {
  local run=$1 rounds=$2 ref=$3 kept
  local got; got=$(python3 - "$out/$run.json" <<'PY' 2>&1
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except OSError:
    sys.exit(print("no report"))
print(f'{len(r["rounds"])} rounds, failure: {r.get("failure") or "none"}')
PY
)
  if [ "$server_rc" = 0 ] && [ "$got" = "$rounds rounds, failure: none" ]; then
    pass "$run: the server exited 0 after all $rounds rounds"
  else
    fail "$run: server exit $server_rc; its report: $got"
    excerpt "$out/$run.log" 15
  fi
  if [ "${client_rcs[*]}" = "0 0" ]; then
    pass "$run: both honest clients exited 0"
  else
    fail "$run: honest clients exited ${client_rcs[*]}"
    excerpt "$out/${run}_client1.log" 5; excerpt "$out/${run}_client2.log" 5
  fi
  local peak base bound
  peak=$(rss_of "$run"); base=$(rss_of "ref_$ref")
  bound=$(( base + 2 * model_bytes + (16 << 20) ))
  if [ "$peak" -gt 0 ] && [ "$base" -gt 0 ] && [ "$peak" -le "$bound" ]; then
    pass "$run: peak RSS $(( peak >> 20 )) MiB <= bound $(( bound >> 20 )) MiB (reference $(( base >> 20 )) MiB + 2 x model + 16 MiB)"
  else
    fail "$run: peak RSS $(( peak >> 20 )) MiB, bound $(( bound >> 20 )) MiB (reference $(( base >> 20 )) MiB)"
  fi
  # An update rejected after chunks were folded leaves them in the sum
  # (each passed every check): the scheduler says how many.
  kept=$(sed -n "s/.*round 1: the \([0-9]*\) chunks of .* folded before its refusal stay.*/\1/p" \
    "$out/$run.log" | sort -n | tail -1)
  if [ -n "$kept" ]; then
    check_kept_prefix "$run" "$rounds" "$ref" "$kept"
    return
  fi
  local r differ=()
  for (( r = 1; r <= rounds; r++ )); do
    cmp -s "$out/${run}_$r.safetensors" "$out/ref_${ref}_$r.safetensors" ||
      differ+=($r)
  done
  if [ ${#differ[@]} = 0 ]; then
    pass "$run: the global models of rounds 1-$rounds equal the honest reference byte for byte"
  else
    fail "$run: the global models of rounds ${differ[*]} differ from the honest reference"
    [ -f "$out/${run}_${differ[0]}.safetensors" ] ||
      { echo "      (round ${differ[0]} was not saved)"; return; }
    python3 - "$out/${run}_${differ[0]}.safetensors" \
      "$out/ref_${ref}_${differ[0]}.safetensors" <<'PY' 2>&1 | sed 's/^/      /'
import json, struct, sys
def load(p):
    with open(p, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]; h = json.loads(f.read(n)); d = f.read()
    h.pop("__metadata__", None)
    return {k: d[v["data_offsets"][0]:v["data_offsets"][1]] for k, v in h.items()}
a, b = load(sys.argv[1]), load(sys.argv[2])
for k in sorted(b):
    x = struct.unpack(f"<{len(a[k]) // 4}f", a[k]) if k in a else ()
    y = struct.unpack(f"<{len(b[k]) // 4}f", b[k])
    bad = [i for i in range(min(len(x), len(y))) if x[i] != y[i]]
    if bad or len(x) != len(y):
        i = bad[0] if bad else 0
        print(f"{k}: {len(bad)} elements differ, e.g. [{i}] {x[i] if x else None} vs {y[i]}")
        break
PY
  fi
}

# check_kept_prefix RUN ROUNDS REF K: a rejected update's first K chunks
# (its checked ones, at most) stayed in round 1's sum: round 1's model
# equals the honest reference byte for byte past K chunks (256 KiB each,
# in model order), and every later round's is the reference's (the next
# round starts from round 1's model, so compared as a whole only where
# round 1 was equal). Then the honest clients uploaded once each:
# their bytes sent within 1.05 x the reference's.
check_kept_prefix() {
  local run=$1 rounds=$2 ref=$3 k=$4 got
  got=$(python3 - "$out/${run}_1.safetensors" "$out/ref_${ref}_1.safetensors" \
    $(( k * 262144 )) <<'PY' 2>&1
import struct, sys
def data(p):
    with open(p, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]; f.read(n); return f.read()
a, b, k = data(sys.argv[1]), data(sys.argv[2]), int(sys.argv[3])
if len(a) != len(b):
    sys.exit(print(f"sizes differ: {len(a)} vs {len(b)}"))
n = len(a) // 4
x, y = struct.unpack(f"<{n}f", a), struct.unpack(f"<{n}f", b)
bad = [i for i in range(n) if x[i] != y[i]]
past = [i for i in bad if i * 4 >= k]
print(("ok " if not past else "over ") +
      f"{len(bad)} of {n} elements differ, all within the first {k} bytes"
      if not past else f"{len(past)} elements past the first {k} bytes differ, e.g. [{past[0]}]")
PY
)
  if [[ $got == ok* ]]; then
    pass "$run: round 1's model equals the honest reference past the rejected update's first $k chunks (${got#ok })"
  else
    fail "$run: round 1's model: ${got#over }"
  fi
  check_honest_bytes "$run" "$ref"
}

# check_honest_bytes RUN REF: the honest clients' bytes sent in RUN within
# 1.05 x theirs in the reference (nobody uploaded again for an attacker).
check_honest_bytes() {
  local got
  got=$(python3 - "$out/$1_client1.json" "$out/$1_client2.json" \
    "$out/ref_$2_client1.json" "$out/ref_$2_client2.json" <<'PY' 2>&1
import json, sys
run = sum(json.load(open(p))["bytes_sent"] for p in sys.argv[1:3])
ref = sum(json.load(open(p))["bytes_sent"] for p in sys.argv[3:5])
print(("ok " if run <= 1.05 * ref else "over ") + f"{run / ref:.4f} x the reference's ({run} / {ref} bytes)")
PY
)
  if [[ $got == ok* ]]; then
    pass "$1: the honest clients uploaded once: ${got#ok }"
  else
    fail "$1: the honest clients uploaded again: ${got#over }"
  fi
}

# -- the reference: only the honest clients ----------------------------------------

# run_reference REF MODE [ARGS...]: the honest clients alone (run ref_REF,
# memory_mode MODE, the server's extra ARGS); exits the test iff it fails.
run_reference() {
  local ref=$1 mode=$2; shift 2
  server_config "$out/ref_$ref.yaml" "ref_$ref" 2 "$mode" $rounds
  start_server "ref_$ref" "$out/ref_$ref.yaml" "$@" || exit 1
  start_clients "ref_$ref"
  # A server whose model it does not run never loads the LibTorch plugin
  # (src/torch_plugin.hpp): none of LibTorch is mapped.
  local srv; srv=$(pgrep -P "$server_pid" | head -1)
  if [ -n "$srv" ] && [ -r "/proc/$srv/maps" ] && ! grep -q libtorch "/proc/$srv/maps"; then
    pass "ref_$ref: the server of a synthetic model maps no LibTorch"
  else
    fail "ref_$ref: LibTorch is mapped in the server (pid ${srv:-?})"
  fi
  finish_run
  if [ "$server_rc" = 0 ] && [ -f "$out/ref_${ref}_$rounds.safetensors" ]; then
    echo "reference ref_$ref ($mode mode): $rounds rounds, peak RSS $(( $(rss_of "ref_$ref") >> 20 )) MiB"
    return
  fi
  fail "the reference run ref_$ref failed (exit $server_rc)"
  excerpt "$out/ref_$ref.log" 15
  echo "$passed passed, $failed failed"
  exit 1
}

# -- A: before authentication, while the honest clients train ---------------------

run_a() {
  server_config "$out/A.yaml" A 3 ram $rounds
  start_server A "$out/A.yaml" || return
  start_clients A
  wait_count "$out/A.log" "registered Client" 2 30
  # 8 idle or half-open connections take every place for connections not
  # yet welcomed, 4 more arrive (each makes the oldest give way). Then a
  # third registered client says Hello: it must get in at once (making the
  # oldest give way, too). Round 1 starts; that client never offers, so the
  # round stays open until the attacks are over; then it leaves, is dropped
  # after reconnect_grace_s, and the rounds go on with the honest clients.
  attack A idle_flood --attack idle_flood --held $max_unauth --extra 4 \
    --expect timeout
  wait_count "$out/A_idle_flood.out" "conn extra" 4 10
  sleep 0.3
  attack A hold_round --attack hold_round $(creds 1) \
    --until-file "$out/A.attacks_done"
  finish_attack A idle_flood
  # A Hello one byte per 100 ms, meanwhile the others one after another,
  # each to be refused on its first frame.
  attack A slow_hello --attack slow_hello --trickle-ms 100 --expect timeout
  run_one oversized_1GiB --attack oversized_header \
    --frame-bytes $(( 1 << 30 )) --expect frame_too_large
  run_one oversized_hello --attack oversized_header \
    --frame-bytes $(( (64 << 10) + 8 )) --expect frame_too_large
  run_one garbage --attack garbage --expect malformed_frame
  run_one garbage_body --attack garbage_body --expect malformed_frame
  run_one zero_request_id --attack zero_request_id --id Client1 \
    --token honest-one --expect malformed_frame
  run_one unknown_kind --attack unknown_kind --expect unexpected_message
  run_one server_kind --attack server_kind --expect not_authenticated
  run_one evaluation_first --attack evaluation_first --expect not_authenticated
  run_one log_injection --attack log_injection --expect malformed_frame
  run_one utf8_id --attack utf8_id --expect malformed_frame
  finish_attack A slow_hello
  touch "$out/A.attacks_done"
  finish_attacks
  finish_run
  echo "-- A: before authentication, in an open round 1 (port $port)"
  local k
  for k in hold_round idle_flood slow_hello oversized_1GiB oversized_hello \
           garbage garbage_body zero_request_id unknown_kind server_kind \
           evaluation_first log_injection utf8_id; do
    check_verdict A $k
  done
  # A client id with newlines and a terminal escape: refused at Hello (client
  # ids are printable ASCII), the refusal logged on one line, escaped; no
  # line of the log is the forged one.
  check_refused A log_injection malformed_frame
  if grep -q "^07:00:00.000 server: registered Client1" "$out/A.log" ||
     grep -q $'\x1b' "$out/A.log"; then
    fail "A log_injection: a forged line or a raw escape is in the server log"
  else
    pass "A log_injection: no forged line and no raw escape in the server log"
  fi
  check_ended A idle_flood
  check_let_in A
  check_refused A slow_hello timeout
  check_refused A oversized_1GiB frame_too_large
  check_refused A oversized_hello frame_too_large
  check_refused A garbage malformed_frame
  check_refused A garbage_body malformed_frame
  check_refused A zero_request_id malformed_frame
  check_refused A unknown_kind unexpected_message
  check_refused A server_kind not_authenticated
  check_refused A evaluation_first not_authenticated
  check_run A $rounds ram
}

# check_ended RUN NAME: every connection the attacker reported as
# "ended LABEL ADDRESS CODE" has a "refused: CODE" line with its address.
check_ended() {
  local run=$1 name=$2 label addr code n=0 missing=()
  while read -r label addr code; do
    n=$(( n + 1 ))
    grep -Eq "refused: $code: .*${addr//./\\.}([^0-9]|\$)" "$out/$run.log" ||
      missing+=("$label $addr ($code)")
  done < <(sed -n 's/.*: ended \([^ ]*\) \(127\.0\.0\.1:[0-9]*\) \([a-z_]*\)$/\1 \2 \3/p' \
             "$out/${run}_$name.out")
  if [ $n -gt 0 ] && [ ${#missing[@]} = 0 ]; then
    pass "$run $name: $n refusals logged, each with its code and the peer address"
  else
    fail "$run $name: no refusal line for ${missing[*]:-any connection}"
  fi
}

# check_let_in RUN: with every place for unwelcomed connections taken, the
# 4 extra ones and then Mallory1's Hello each made the oldest give way, and
# Mallory1 was welcomed before any of the held ones timed out.
check_let_in() {
  local run=$1 gave_way reg first_timeout
  gave_way=$(grep -c ": ended .* too_many_requests\$" "$out/${run}_idle_flood.out")
  reg=$(grep -n "registered Mallory1" "$out/$run.log" | head -1 | cut -d: -f1)
  first_timeout=$(grep -n "refused: timeout: no Hello" "$out/$run.log" |
                    head -1 | cut -d: -f1)
  if [ "$gave_way" = 5 ] && [ -n "$reg" ] && [ -n "$first_timeout" ] &&
     [ "$reg" -lt "$first_timeout" ]; then
    pass "$run: with all $max_unauth places taken, a valid Hello got in at once (5 oldest gave way)"
  else
    fail "$run: $gave_way connections gave way (expected 5); Mallory1 registered at log line ${reg:-never}, the first handshake timeout at line ${first_timeout:-never}"
  fi
}

# run_one NAME ARGS...: an attack of run A, waited for.
run_one() {
  attack A "$1" "${@:2}"
  finish_attack A "$1"
}

# creds I: the registered identity Mallory<I>.
creds() { echo --registered --id "Mallory$1" --token "evil-$1"; }

# -- T: a slow TLS handshake ----------------------------------------------------------

# tls_args SIDE [NAME]: --set arguments for mutual TLS with the test CA.
tls_args() {
  local g=comm_configs.grpc_configs c=$out/certs
  if [ "$1" = server ]; then
    g=server_configs.$g
    echo --set $g.use_ssl=true --set $g.server_certificate=$c/server.pem \
      --set $g.server_certificate_key=$c/server.key --set $g.root_certificate=$c/ca.pem
  else
    echo --set $g.use_ssl=true --set $g.client_certificate=$c/$2.pem \
      --set $g.client_certificate_key=$c/$2.key --set $g.root_certificate=$c/ca.pem
  fi
}

run_t() {
  "$src/deploy/make-certs.sh" "$out/certs" 127.0.0.1 Client1 Client2 \
    > "$out/certs.log" 2>&1 || { fail "T: deploy/make-certs.sh failed"; return; }
  server_config "$out/T.yaml" T 2 ram $rounds
  start_server T "$out/T.yaml" $(tls_args server) || return
  # Client1 is welcomed and waits for Client2; meanwhile a ClientHello
  # arrives one byte per 100 ms; Client2 comes after.
  client_pids=()
  start_client T 1 $(tls_args client Client1)
  wait_for "$out/T.log" "registered Client1" 30
  attack T slow_tls --attack slow_tls --trickle-ms 100
  finish_attack T slow_tls
  start_client T 2 $(tls_args client Client2)
  finish_run
  echo "-- T: TLS (port $port)"
  check_verdict T slow_tls
  check_refused T slow_tls timeout
  check_run T $rounds ram
}

# -- B1: registered attackers, ram mode ----------------------------------------------

run_b1() {
  server_config "$out/B1.yaml" B1 8 ram $rounds
  start_server B1 "$out/B1.yaml" || return
  attack B1 fetch_flood --attack fetch_flood $(creds 1) \
    --expect too_many_requests
  attack B1 unknown_kind --attack unknown_kind $(creds 3) \
    --expect unexpected_message
  attack B1 server_kind --attack server_kind $(creds 4) \
    --expect unexpected_message
  attack B1 secagg_keys --attack secagg_keys $(creds 2) \
    --expect unexpected_message
  attack B1 oversized --attack oversized_header $(creds 5) \
    --frame-bytes $(( max_message_bytes + 8 )) --expect frame_too_large
  attack B1 credit_flood --attack credit_flood $(creds 6) \
    --expect too_many_requests
  start_clients B1
  finish_attacks
  finish_run
  echo "-- B1: registered attackers, ram mode (port $port)"
  local k
  for k in fetch_flood credit_flood unknown_kind server_kind oversized \
           secagg_keys; do
    check_verdict B1 $k
  done
  check_refused B1 secagg_keys unexpected_message
  check_refused B1 fetch_flood too_many_requests
  check_refused B1 credit_flood too_many_requests
  check_refused B1 unknown_kind unexpected_message
  check_refused B1 server_kind unexpected_message
  check_refused B1 oversized frame_too_large
  check_run B1 $rounds ram
}

# -- B2: another client's stream, window mode ------------------------------------------

run_b2() {
  server_config "$out/B2.yaml" B2 4 window $rounds
  # The accomplice's stream must stay open through the attack (1.5 s).
  start_server B2 "$out/B2.yaml" \
    --set server_configs.comm_configs.stream_configs.idle_timeout_s=5 || return
  attack B2 hijack_stream --attack hijack_stream $(creds 1) \
    --accomplice-id Mallory2 --accomplice-token evil-2 --delay-s 1.5 \
    --expect not_authorized
  start_clients B2
  finish_attacks
  finish_run
  echo "-- B2: another client's stream, window mode (port $port)"
  check_verdict B2 hijack_stream
  check_refused B2 hijack_stream not_authorized hijack
  check_run B2 $rounds window
}

# -- B3: offer, then silence, window mode --------------------------------------------------

run_b3() {
  server_config "$out/B3.yaml" B3 3 window $rounds
  start_server B3 "$out/B3.yaml" || return
  # Three rounds of idle_timeout_s (2 s) each, and some: the attacker gives
  # up (and the server then drops it) after 20 s.
  attack B3 offer_silent --attack offer_silent $(creds 1) --timeout-s 20
  start_clients B3
  finish_attacks
  finish_run
  echo "-- B3: offer, then silence, window mode (port $port)"
  check_verdict B3 offer_silent
  # A refusal for the silence: a timeout, or the update refused (for a
  # timeout).
  check_refused B3 offer_silent "(timeout|poisoned_update: .*timeout)"
  local abandoned
  abandoned=$(grep -E -m1 "aggregator: .*(Mallory1|abandon)" "$out/B3.log")
  if [ -n "$abandoned" ]; then
    pass "B3 offer_silent: the aggregator logged the abandoned upload: ${abandoned:0:160}"
  else
    fail "B3 offer_silent: no aggregator line names Mallory1 or an abandoned upload"
    grep -E "aggregator|scheduler|Mallory1" "$out/B3.log" > "$out/B3.why"
    excerpt "$out/B3.why" 8
  fi
  check_run B3 $rounds window
}

# -- B4: a NaN update, ram mode ----------------------------------------------------

run_b4() {
  server_config "$out/B4.yaml" B4 3 ram $rounds
  start_server B4 "$out/B4.yaml" || return
  attack B4 nan_update --attack nan_update $(creds 2) --finite-chunks 2 \
    --expect poisoned_update
  start_clients B4
  finish_attacks
  finish_run
  echo "-- B4: a NaN update, ram mode (port $port)"
  check_verdict B4 nan_update
  check_refused B4 nan_update poisoned_update
  check_run B4 $rounds ram
}

# -- B6: another updateId after 3 chunks, window mode ------------------------------
# A restarted process that trained again: its first update's 3 chunks are
# credited (window mode: once the honest clients delivered those positions
# too, so they are averaged), then another updateId is offered: refused,
# the first rejected. Its 3 chunks stay where they went; nobody uploads
# again (check_run: check_kept_prefix).

run_b6() {
  server_config "$out/B6.yaml" B6 3 window $rounds
  start_server B6 "$out/B6.yaml" || return
  attack B6 update_switch --attack update_switch $(creds 2) --finite-chunks 3
  start_clients B6
  finish_attacks
  finish_run
  echo "-- B6: another updateId after 3 chunks, window mode (port $port)"
  check_verdict B6 update_switch
  check_run B6 $rounds window
}

# -- S: a registered peer that stops reading, ram mode ------------------------------
# It fetches a window of 4 MiB chunks and reads none: refused for not
# reading after connection_timeout_s (3 s), its connection is reset once
# the closing grace (2 s) is over (what it did not read is dropped), never
# held open by the peer (nor, taking its session over again and again, a
# pile of such connections: a connection taken over closes the same way).

run_s() {
  local big=(
    --set server_configs.comm_configs.stream_configs.chunk_bytes=4194304
    --set server_configs.comm_configs.grpc_configs.max_message_size=8388608)
  # Its own reference: honest clients streaming 4 MiB chunks hold more in
  # flight than with the others' 256 KiB (2 chunks each way per client).
  run_reference ram_4mib ram "${big[@]}"
  server_config "$out/S.yaml" S 3 ram $rounds
  start_server S "$out/S.yaml" "${big[@]}" || return
  attack S stall_read --attack stall_read $(creds 7) --count 1 --hold-s 9
  start_clients S
  finish_attacks
  finish_run
  echo "-- S: a registered peer that stops reading, ram mode (port $port)"
  check_verdict S stall_read
  check_refused S stall_read timeout
  check_run S $rounds ram_4mib
}

# -- B5: a huge update, and offers without chunks, ram mode --------------------------
# (Apart from B4: a rejected update with chunks in the sum makes the round
# collect every update again, which would reset these attackers' streams.)

run_b5() {
  server_config "$out/B5.yaml" B5 7 ram $rounds
  start_server B5 "$out/B5.yaml" || return
  # Finite values that would overflow the round's float32 sum.
  attack B5 huge_update --attack huge_update $(creds 3) \
    --expect poisoned_update
  # Offers again and again, never a chunk: rejected for silence after
  # idle_timeout_s + reconnect_grace_s (3 s), not kept open.
  attack B5 reoffer_keepalive --attack reoffer_keepalive $(creds 4) \
    --timeout-s 15 --expect timeout
  # New connections, each taking its session over from the one before: the
  # server closes each one taken over, and refuses past 8 in 10 s.
  attack B5 takeover_flood --attack takeover_flood $(creds 5) \
    --expect too_many_requests
  # 200 requests refused without closing (an offer for round 77), one at
  # a time: past 64 in 10 s the connection is closed.
  attack B5 refusal_flood --attack refusal_flood $(creds 6) \
    --expect too_many_requests
  # Evaluations: of a model not served, accepted once, then again and
  # again refused without closing: past 64 in 10 s the connection closes.
  attack B5 evaluation_abuse --attack evaluation_abuse $(creds 7) \
    --expect too_many_requests
  start_clients B5
  finish_attacks
  finish_run
  echo "-- B5: a huge update, and offers without chunks, ram mode (port $port)"
  local k
  for k in huge_update reoffer_keepalive takeover_flood refusal_flood \
           evaluation_abuse; do
    check_verdict B5 $k
  done
  # Each connection taken over: closed, logged with its address (a resume,
  # not a refusal); then the Hello past the limit: refused, logged with its
  # address.
  local took
  took=$(grep -Ec "gateway: closing the connection of Mallory5 \(peer 127\.0\.0\.1:[0-9]+\): it resumed on another connection" "$out/B5.log")
  if [ "$took" -ge 8 ] &&
     grep -Eq "refused: too_many_requests: Mallory5 from 127\.0\.0\.1:[0-9]+: more than 8 new connections" "$out/B5.log"; then
    pass "B5 takeover_flood: $took connections taken over closed, then too_many_requests, each logged with the peer address"
  else
    fail "B5 takeover_flood: $took takeover closes logged, or no too_many_requests line"
  fi
  check_refused B5 refusal_flood too_many_requests
  check_refused B5 evaluation_abuse too_many_requests
  check_refused B5 huge_update poisoned_update
  check_refused B5 reoffer_keepalive timeout
  check_run B5 $rounds ram
}

# -- C: compressed uploads (int8, then zfp), ram mode --------------------------------

# compression METHOD: --set arguments for uploads compressed by METHOD.
compression() {
  local z=client_configs.comm_configs.compression
  echo --set $z.method=$1 --set $z.direction=up
}

run_c_int8() {
  run_reference int8 ram $(compression int8)
  server_config "$out/C_int8.yaml" C_int8 5 ram $rounds
  start_server C_int8 "$out/C_int8.yaml" $(compression int8) || return
  # All in round 1. An update dropped or rejected with chunks in the sum
  # makes the round collect every update again, resetting the others'
  # streams: the NaN scale holds the round (it has not offered) until the
  # others are refused and Mallory2, dropped mid-upload, is out.
  attack C_int8 wrong_encoding --attack wrong_encoding $(creds 1) \
    --encoding 1 --expect manifest_mismatch
  attack C_int8 short_chunk --attack short_chunk $(creds 2) \
    --expect out_of_range
  attack C_int8 int8_nan_scale --attack int8_nan_scale $(creds 3) \
    --until-file "$out/C_int8.go" --expect poisoned_update
  start_clients C_int8
  finish_attack C_int8 wrong_encoding
  finish_attack C_int8 short_chunk
  wait_for "$out/C_int8.log" "dropped Mallory2" 10
  touch "$out/C_int8.go"
  finish_attacks
  finish_run
  echo "-- C_int8: int8 uploads, ram mode (port $port)"
  local k
  for k in wrong_encoding short_chunk int8_nan_scale; do
    check_verdict C_int8 $k
  done
  check_refused C_int8 wrong_encoding manifest_mismatch
  check_refused C_int8 short_chunk out_of_range
  check_refused C_int8 int8_nan_scale poisoned_update
  check_run C_int8 $rounds int8
}

run_c_zfp() {
  run_reference zfp ram $(compression zfp)
  server_config "$out/C_zfp.yaml" C_zfp 4 ram $rounds
  start_server C_zfp "$out/C_zfp.yaml" $(compression zfp) || return
  # As in C_int8: the garbage waits until Mallory1 is refused and out.
  attack C_zfp zfp_over_bound --attack zfp_over_bound $(creds 1) \
    --expect out_of_range
  attack C_zfp zfp_garbage --attack zfp_garbage $(creds 2) \
    --until-file "$out/C_zfp.go" --expect "out_of_range|poisoned_update"
  start_clients C_zfp
  finish_attack C_zfp zfp_over_bound
  wait_for "$out/C_zfp.log" "dropped Mallory1" 10
  touch "$out/C_zfp.go"
  finish_attacks
  finish_run
  echo "-- C_zfp: zfp uploads, ram mode (port $port)"
  check_verdict C_zfp zfp_over_bound
  check_verdict C_zfp zfp_garbage
  check_refused C_zfp zfp_over_bound out_of_range
  check_refused C_zfp zfp_garbage "(out_of_range|poisoned_update)"
  check_run C_zfp $rounds zfp
}

# -- L: the live view (--http) under attack, ulimit -n 256 ---------------------------

run_l() {
  server_config "$out/L.yaml" L 3 ram $rounds
  # The server runs with 256 descriptors at most, its live view on.
  printf '#!/bin/sh\nulimit -n 256 || exit 2\nexec "%s" "$@"\n' "$fedcaf" \
    > "$out/fedcaf_nofile256"
  chmod +x "$out/fedcaf_nofile256"
  local real=$fedcaf started
  fedcaf=$out/fedcaf_nofile256
  start_server L "$out/L.yaml" --http 127.0.0.1:0; started=$?
  fedcaf=$real
  [ $started = 0 ] || return
  local url srv
  wait_for "$out/L.log" "live view at" 10
  url=$(sed -n 's/.*live view at \(http:[^ ]*\).*/\1/p' "$out/L.log" | head -1)
  srv=$(pgrep -P "$server_pid" | head -1)
  # 12 s of attacks on the view: a 200 MiB request line, 300 connections
  # held open, 8 requests at a byte a second, 8 clients that never read,
  # and a normal GET every 250 ms. Meanwhile the fedcaf port: 25 Hellos
  # one after another (an unknown id: each must be answered, refused), the
  # honest clients register, and Mallory1 holds round 1 open until the
  # attacks are over.
  timeout 40 python3 "$src/tests/integration/live_view_attack.py" \
    --url "$url" --pid "${srv:-0}" --seconds 12 > "$out/L_live_view.out" 2>&1 &
  attack_pid[L/live_view]=$!; pids+=($!); attack_names+=(L/live_view)
  sleep 1
  attack L hellos --attack hellos --count 25 --id Stranger --token none \
    --source 127.0.0.3
  start_clients L
  attack L hold_round --attack hold_round $(creds 1) \
    --until-file "$out/L.attacks_done"
  finish_attack L live_view
  finish_attack L hellos
  touch "$out/L.attacks_done"
  finish_attacks
  finish_run
  echo "-- L: the live view under attack, ulimit -n 256 ($url, port $port)"
  grep -E "live_view_attack: (line|flood|server RSS|normal GETs)" \
    "$out/L_live_view.out" | sed 's/^/      /'
  check_verdict L live_view
  check_verdict L hellos
  grep -E "answered [0-9]+ of" "$out/L_hellos.out" | sed 's/^/      /'
  check_refused L live_view "414 URI Too Long" line
  check_refused L live_view timeout slow
  check_run L $rounds ram
}

# -- D: every round ends, against the shipped configs/server.yaml ---------------------
# The shipped server config, with overrides only for the synthetic model,
# the port, three clients (min_clients 2), the saved models and the test's
# short timeouts (idle_timeout_s + reconnect_grace_s: 3 s). D_never: a
# registered client that joins every round and never offers (round
# deadline 4 s). D_drip_ram, D_drip_window: a client that offers, then
# sends one chunk every 2.5 s (just under the idle timeout): cut off at the
# round deadline (4 s). D_rate (window mode, the shipped round deadline):
# the same drip, ended by the minimum rate (the shipped 64 KiB/s over a
# rate_window_s of 4 s). Each round must end by its deadline (+ 1.5 s for
# the honest clients to upload again where the cut-off update had chunks
# in the sum), the attacker's refusal logged with its address, the models
# equal to the honest reference.

deadline_s=4

# shipped_server RUN MODE [ARGS...]: configs/server.yaml with the overrides.
shipped_server() {
  local run=$1 mode=$2; shift 2
  local s=server_configs c=server_configs.comm_configs.stream_configs
  start_server "$run" "$src/configs/server.yaml" \
    --set $s.comm_configs.grpc_configs.server_uri=127.0.0.1:0 \
    --set $s.num_clients=3 --set $s.memory_mode="$mode" \
    --set $s.save_global_model="$out/${run}_{round}.safetensors" \
    --set "client_configs.train_configs={trainer: dummy, add: 0.5, add_by_index: true}" \
    --set "client_configs.model_configs={name: synthetic, num_tensors: 8, total_bytes: $model_bytes, seed: 7}" \
    --set data_configs.dataset_kwargs.num_clients=3 \
    --set $c.heartbeat_s=0.5 --set $c.connection_timeout_s=3 \
    --set $c.idle_timeout_s=2 --set $c.reconnect_grace_s=1 "$@"
}

# check_rounds_within RUN LIMIT_S [FROM]: every round of RUN's report from
# round FROM (1) on took at most LIMIT_S seconds (wall_seconds: from its
# start to its model).
check_rounds_within() {
  local got
  got=$(python3 - "$out/$1.json" "$2" "${3:-1}" <<'PY' 2>&1
import json, sys
r = json.load(open(sys.argv[1]))
walls = [x["wall_seconds"] for x in r["rounds"] if x["round"] >= int(sys.argv[3])]
print(("ok " if walls and max(walls) <= float(sys.argv[2]) else "over ") +
      ", ".join(f"{w:.2f}" for w in walls))
PY
)
  if [[ $got == ok* ]]; then
    pass "$1: every round from ${3:-1} on ended within $2 s (round times ${got#ok } s)"
  else
    fail "$1: a round took longer than $2 s: ${got#over }"
  fi
}

run_d_never() {
  shipped_server D_never ram \
    --set server_configs.scheduler_kwargs.round_deadline_s=$deadline_s || return
  attack D_never never_offer --attack never_offer $(creds 1) --timeout-s 30
  wait_for "$out/D_never.log" "registered Mallory1" 10
  start_clients D_never
  finish_attacks
  finish_run
  echo "-- D_never: a client that never offers, shipped config, deadline ${deadline_s} s (port $port)"
  check_verdict D_never never_offer
  check_refused D_never never_offer timeout
  check_rounds_within D_never "$deadline_s.5"
  # min_clients is the default (3 clients: 2); the client that never
  # offered is not chosen again while silent: no round after the first
  # waits for the deadline.
  check_rounds_within D_never 2 2
  if grep -q "without an update from Mallory1 (1 round missed in a row: not chosen again" "$out/D_never.log"; then
    pass "D_never: the server said it passes Mallory1 over"
  else
    fail "D_never: no line passing Mallory1 over"
  fi
  check_run D_never $rounds ram
}

# run_d_drip RUN MODE [SERVER_ARGS...]: the slow drip against MODE.
run_d_drip() {
  local run=$1 mode=$2; shift 2
  shipped_server "$run" "$mode" "$@" || return
  attack "$run" slow_drip --attack slow_drip $(creds 1) --drip-s 2.5 \
    --expect timeout --timeout-s 30
  wait_for "$out/$run.log" "registered Mallory1" 10
  start_clients "$run"
  finish_attacks
  finish_run
  echo "-- $run: a slow drip (a chunk every 2.5 s), $mode mode, shipped config (port $port)"
  check_verdict "$run" slow_drip
  check_refused "$run" slow_drip timeout
  check_rounds_within "$run" $(( deadline_s + 1 )).5
  check_run "$run" $rounds "$mode"
}

run_d() {
  run_d_never
  local d=server_configs.scheduler_kwargs.round_deadline_s
  run_d_drip D_drip_ram ram --set $d=$deadline_s
  run_d_drip D_drip_window window --set $d=$deadline_s
  run_d_drip D_rate window \
    --set server_configs.comm_configs.stream_configs.rate_window_s=4
  if grep -q "refused: timeout: Mallory1: its update was rejected: too slow: .*min_rate_bytes_per_s" "$out/D_rate.log"; then
    pass "D_rate: the drip was ended by the minimum rate"
  else
    fail "D_rate: no 'too slow' refusal in the log"
  fi
}

# -- I: an update of 1e30 everywhere, ram and window modes ---------------------------
# Finite and within what the sum holds: only the default bound on an
# update's distance (max_update_ratio 10 x the global model's norm) refuses
# it, at its first chunk, in either memory mode.

run_i() {
  local mode
  for mode in ram window; do
    server_config "$out/I_$mode.yaml" "I_$mode" 3 $mode $rounds
    start_server "I_$mode" "$out/I_$mode.yaml" || continue
    attack "I_$mode" big_update --attack big_update $(creds 1) \
      --expect poisoned_update
    start_clients "I_$mode"
    finish_attacks
    finish_run
    echo "-- I_$mode: an update of 1e30 everywhere, $mode mode (port $port)"
    check_verdict "I_$mode" big_update
    check_refused "I_$mode" big_update poisoned_update
    check_run "I_$mode" $rounds $mode
  done
}

# An int8 block of scale 1e35: finite, refused by the same bound.
run_i_int8() {
  [ -f "$out/ref_int8_$rounds.safetensors" ] ||
    run_reference int8 ram $(compression int8)
  server_config "$out/I_int8.yaml" I_int8 3 ram $rounds
  start_server I_int8 "$out/I_int8.yaml" $(compression int8) || return
  attack I_int8 int8_huge_scale --attack int8_huge_scale $(creds 1) \
    --expect poisoned_update
  start_clients I_int8
  finish_attacks
  finish_run
  echo "-- I_int8: int8 blocks of scale 1e35, ram mode (port $port)"
  check_verdict I_int8 int8_huge_scale
  check_refused I_int8 int8_huge_scale poisoned_update
  check_run I_int8 $rounds int8
}

# -- G, G_same: online token guessing from another address, and from the honest
# clients' own (127.0.0.1), ram mode -------------------------------------

# run_g RUN SOURCE LIMIT_MS: the guesser, from SOURCE, goes first, for
# Client1's id. Once the server throttles its Hellos, the honest clients
# (127.0.0.1, Client1 among them) start: they must get in within LIMIT_MS
# (a right token is admitted whatever others send from its address or
# any other), and the rounds run as in the reference.
run_g() {
  local run=$1 source=$2 limit_ms=$3
  server_config "$out/$run.yaml" "$run" 2 ram $rounds
  start_server "$run" "$out/$run.yaml" || return
  attack "$run" token_guess --attack token_guess --id Client1 \
    --source "$source" --attempts 300 --timeout-s 15
  wait_for "$out/$run.log" "refused: $source: 5 failed Hellos" 10
  local t0 t1; t0=$(date +%s%N)
  start_clients "$run"
  wait_count "$out/$run.log" "registered Client" 2 10; t1=$(date +%s%N)
  finish_attacks
  finish_run
  echo "-- $run: token guessing from $source (port $port)"
  check_verdict "$run" token_guess
  local ms=$(( (t1 - t0) / 1000000 ))
  if [ "$(grep -c "registered Client" "$out/$run.log")" -ge 2 ] && [ $ms -lt "$limit_ms" ]; then
    pass "$run: both honest clients got in $ms ms after they started, while $source guessed"
  else
    fail "$run: the honest clients did not get in within $limit_ms ms ($ms ms)"
  fi
  # From another host: one line for the first failed Hello of the window,
  # then one per burst, however many guesses came: a handful of lines.
  if [ "$source" != 127.0.0.1 ]; then
    local lines; lines=$(grep -c "${source//./\\.}" "$out/$run.log")
    if [ "$lines" -ge 2 ] && [ "$lines" -le 6 ]; then
      pass "$run: $lines log lines name $source for 302 failed Hellos"
    else
      fail "$run: $lines log lines name $source (expected 2 to 6)"
      excerpt "$out/$run.log" 10
    fi
  fi
  check_run "$run" $rounds ram
}

run_reference ram ram
run_reference window window
for r in ${HOSTILE_RUNS:-A T B1 B2 B3 B4 B5 B6 S C D F G G_same I I_int8 L}; do
  case $r in
    A) run_a ;; T) run_t ;; B1) run_b1 ;; B2) run_b2 ;; B3) run_b3 ;; S) run_s ;;
    B4) run_b4 ;; B5) run_b5 ;; B6) run_b6 ;; C) run_c_int8; run_c_zfp ;;
    D) run_d ;; F) run_f ;; G) run_g G 127.0.0.2 5000 ;;
    G_same) run_g G_same 127.0.0.1 2000 ;; I) run_i ;;
    I_int8) run_i_int8 ;; L) run_l ;;
    *) fail "no run named $r" ;;
  esac
done
echo "runtime $(( SECONDS - started )) s"
[ -n "$failures" ] && printf 'the failed checks, again:\n%s' "$failures"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
