#!/usr/bin/env bash
# Quiet at scale: what a simulate of many clients prints.
#
#   flat   `fedcaf simulate` of 5,000 clients, 8 a round, 3 rounds (a
#          population: only the drawn ones register, 8 a round): the
#          server's registrations are at most ten lines and then sums (at
#          most one a second), the clients' own lines the first ten's; the
#          whole output stays under 60 lines (one line per registration, as
#          it once was: over 10,000).
#   tree   5,000 clients under 4 simulated relays (simulated_relays): only
#          the root's round lines on stdout (3), the relays' round and
#          registration lines in the log at debug level, under 40 lines in
#          all; the process is gone within a second of its last round line.
#
#   quiet_scale_test.sh FEDCAF
set -u
fedcaf=$1
. "$(dirname "$0")/lib.sh"

config() { # FILE CLIENTS RELAYS
  cat > "$1" <<EOF
server_configs:
  num_clients: $2
  num_global_epochs: 3
  simulated_relays: $3
  scheduler_kwargs: {clients_per_round: 8}
client_configs:
  train_configs: {trainer: dummy, add: 0.5}
  model_configs: {name: synthetic, num_tensors: 4, total_bytes: 65536, seed: 5}
EOF
}
now_s() { date +%s.%N; }

config "$out/flat.yaml" 5000 0
timeout 300 "$fedcaf" simulate -c "$out/flat.yaml" > "$out/flat.out" 2> "$out/flat.err"
rc=$?
lines=$(cat "$out/flat.out" "$out/flat.err" | wc -l)
each=$(grep -c "server: registered Client[0-9]* from" "$out/flat.err")
sums=$(grep -c "server: registered [0-9,]* more clients" "$out/flat.err")
own=$(grep -c "Client[0-9]*: registered as client" "$out/flat.err")
if [ $rc -eq 0 ] && [ "$each" -le 10 ] && [ "$own" -le 10 ] && [ "$lines" -lt 60 ]; then
  pass "flat: 5,000 clients, $lines lines in all: $each registrations one line each, $sums sums ($(grep -m1 "more clients" "$out/flat.err" | cut -d' ' -f4-)), $own clients' own lines"
else
  fail "flat: exit $rc, $lines lines, $each registration lines, $sums sums, $own clients' lines"
  head -30 "$out/flat.err"
fi

config "$out/tree.yaml" 5000 4
start=$(now_s)
# Each stdout line stamped as it comes; the exit's time after the last.
(timeout 300 "$fedcaf" simulate -c "$out/tree.yaml" 2> "$out/tree.err"; echo "exit $?") |
  while IFS= read -r line; do echo "$(now_s) $line"; done > "$out/tree.out"
last_round=$(grep " round [0-9]*/3 " "$out/tree.out" | tail -1 | cut -d' ' -f1)
ended=$(grep " exit " "$out/tree.out" | cut -d' ' -f1)
rc=$(grep " exit " "$out/tree.out" | awk '{ print $3 }')
rounds=$(grep -c " round [0-9]*/3 " "$out/tree.out")
lines=$(( $(wc -l < "$out/tree.out") - 1 + $(wc -l < "$out/tree.err") ))
teardown=$(awk -v a="${last_round:-0}" -v b="${ended:-0}" 'BEGIN { printf "%.2f", b - a }')
if [ "$rc" = 0 ] && [ "$rounds" -eq 3 ] && [ "$lines" -lt 40 ] &&
   ! grep -q "relay: .* updates summed\|Relay[0-9]*: round" "$out/tree.err" &&
   awk -v t="$teardown" 'BEGIN { exit !(t < 1.0) }'; then
  pass "tree: 5,000 clients under 4 relays, $lines lines in all, the root's $rounds round lines alone on stdout; exit $teardown s after the last round line"
else
  fail "tree: exit $rc, $rounds round lines, $lines lines, exit $teardown s after the last round line"
  cut -d' ' -f2- "$out/tree.out"; head -30 "$out/tree.err"
fi
finish
