#!/usr/bin/env bash
# An operator's counters after a run with a lost, a rejected, an excluded
# and a refused client: a `fedcaf server` with secure aggregation, tokens
# and --http on 127.0.0.1, seven `fedcaf client` processes:
#
#   Client1-4  honest;
#   Client5    seals garbage shares (FEDCAF_FAULT=secagg_garbage_shares):
#              excluded from rounds 1 and 2, then dropped (excluded_twice);
#   Client6    uploads zeros (secagg_zero_upload): its update is refused
#              (rejected, poisoned_update; or lost, poisoned_update, where
#              its gateway ends the connection with that error before the
#              scheduler's word of the rejection reaches the server, which
#              counts no rejection for a client no longer connected: seen
#              once under CI's load);
#   Client7    killed with SIGKILL once round 1 is published: lost (no
#              goodbye), dropped when its 1 s grace is over (no_resume);
#
# and a stranger whose token is wrong (refused, not_authorized). /metrics,
# scraped while the run goes on, counts each of these by its reason, says
# the run is running, and splits RSS into anonymous and file-backed; after
# the run the report (--report) holds the same counters, final, and the
# page written at the end (--report-html) lists the same events (refused
# Hellos apart, under the peer's address) and says the run completed.
#
#   operator_counters_test.sh FEDCAF SOURCE_DIR
set -u
fedcaf=$1
. "$(dirname "$0")/lib.sh"
port=$(free_port)
http=$(free_port)
n=7
for i in $(seq 1 $n); do echo "Client$i: t$i"; done > "$out/tokens.yaml"

auth() { # TOKEN: a client's grpc_configs keys, one per line
  cat <<EOF
    server_uri: 127.0.0.1:$port
    use_authenticator: true
    authenticator_args: {auth_token: $1}
EOF
}

cat > "$out/server.yaml" <<EOF
server_configs:
  num_clients: $n
  num_global_epochs: 60
  scheduler: SyncScheduler
  scheduler_kwargs: {min_clients: 3, round_deadline_s: 60}
  aggregator: FedAvgAggregator
  secure_aggregation: {enabled: true, threshold: 3}
  comm_configs:
    grpc_configs:
      server_uri: 127.0.0.1:$port
      use_authenticator: true
      authenticator: NaiveAuthenticator
      authenticator_args: {tokens_file: $out/tokens.yaml}
    stream_configs: {chunk_bytes: 65536, heartbeat_s: 0.5,
                     connection_timeout_s: 2, reconnect_grace_s: 1}
client_configs:
  train_configs: {trainer: dummy, add: 0.5, add_by_index: true}
  model_configs: {name: synthetic, num_tensors: 8, total_bytes: 4194304, seed: 7}
data_configs:
  dataset_kwargs: {num_clients: $n}
EOF
client_config() { # ID TOKEN INDEX
  cat <<EOF
client_id: $1
data_configs:
  dataset_kwargs: {num_clients: $n, client_id: $3}
comm_configs:
  grpc_configs:
$(auth "$2")
  stream_configs: {heartbeat_s: 0.5, connection_timeout_s: 2}
EOF
}

timeout 300 "$fedcaf" server -c "$out/server.yaml" --http "127.0.0.1:$http" \
  --report "$out/report.json" --report-html "$out/page.html" \
  > "$out/server.log" 2>&1 &
server=$!; pids+=($server)
clients=()
for i in $(seq 1 $n); do
  client_config "Client$i" "t$i" $((i - 1)) > "$out/c$i.yaml"
  fault=""
  [ $i -eq 5 ] && fault=secagg_garbage_shares
  [ $i -eq 6 ] && fault=secagg_zero_upload
  if [ $i -eq 7 ]; then # no timeout: its own PID is killed
    "$fedcaf" client -c "$out/c$i.yaml" > "$out/c$i.log" 2>&1 &
  else
    FEDCAF_FAULT=$fault timeout 300 "$fedcaf" client -c "$out/c$i.yaml" \
      > "$out/c$i.log" 2>&1 &
  fi
  pids+=($!); clients+=($!)
done
victim=${clients[6]}

# The stranger: a wrong token, refused at its Hello.
client_config Client1 wrong 0 > "$out/stranger.yaml"
timeout 30 "$fedcaf" client -c "$out/stranger.yaml" > "$out/stranger.log" 2>&1
rc=$?
[ $rc -ne 0 ] && grep -q "not_authorized" "$out/stranger.log" &&
  pass "the stranger was refused (exit $rc)" ||
  { fail "the stranger was not refused (exit $rc)"; tail -3 "$out/stranger.log"; }

wait_for "$out/server.log" "round 1/" 120 ||
  { fail "no round 1"; tail -20 "$out/server.log"; finish; }
kill -KILL "$victim"
wait "$victim" 2> /dev/null

# Scrapes /metrics until every expected sample is there (or the run ends);
# the last scrape stays in $out/metrics.txt.
want='fedcaf_clients_lost_total{reason="no_goodbye"}
fedcaf_clients_dropped_total{reason="no_resume"}
fedcaf_clients_dropped_total{reason="excluded_twice"}
fedcaf_clients_excluded_total{reason="secure_aggregation"}
fedcaf_registrations_refused_total{reason="not_authorized"}'
seen=0
for _ in $(seq 1 600); do
  "$py" - "http://127.0.0.1:$http/metrics" > "$out/scrape.txt" 2> /dev/null <<'PY' &&
import sys, urllib.request
sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())
PY
    cp "$out/scrape.txt" "$out/metrics.txt"
  missing=0
  while read -r sample; do
    grep -qF "$sample " "$out/metrics.txt" 2> /dev/null || missing=1
  done <<< "$want"
  grep -qE '^fedcaf_(updates_rejected|clients_lost)_total\{reason="poisoned_update"\} ' \
    "$out/metrics.txt" 2> /dev/null || missing=1 # Client6, either way
  [ $missing -eq 0 ] && { seen=1; break; }
  kill -0 "$server" 2> /dev/null || break
  sleep 0.2
done
if [ $seen -eq 1 ]; then
  pass "/metrics counts each event by its reason"
else
  fail "/metrics lacks some of the events"
  grep -E "_total\{reason" "$out/metrics.txt"
fi
grep -E '^fedcaf_(clients_|updates_|registrations|rounds_failed|resumptions)' "$out/metrics.txt"
value() { awk -v k="$1" '$1 == k { print $2 }' "$out/metrics.txt"; }
[ "$(value 'fedcaf_registrations_total')" = "$n" ] &&
  pass "registrations_total is $n" ||
  fail "registrations_total: $(value fedcaf_registrations_total), not $n"
[ "$(value 'fedcaf_clients_lost_total{reason="no_goodbye"}')" = 1 ] &&
  [ "$(value 'fedcaf_registrations_refused_total{reason="not_authorized"}')" = 1 ] &&
  pass "one lost, one refused" || fail "not one lost and one refused"
[ "$(value 'fedcaf_run_status{status="running"}')" = 1 ] &&
  [ "$(value 'fedcaf_run_status{status="failed"}')" = 0 ] &&
  pass "the run-status gauge says running" || fail "run-status gauge"
anon=$(value fedcaf_rss_anon_bytes); file=$(value fedcaf_rss_file_bytes)
rss=$(value fedcaf_rss_bytes)
"$py" -c "import sys; a,f,r=map(float,sys.argv[1:]); sys.exit(not (a>0 and f>0 and a+f<=r*1.05+(1<<20)))" \
  "${anon:-0}" "${file:-0}" "${rss:-0}" &&
  pass "RSS $rss = $anon anonymous + $file file-backed" ||
  fail "RSS split: rss=$rss anon=$anon file=$file"

rc=0; wait "$server" || rc=$?
for c in "${clients[@]}"; do wait "$c" 2> /dev/null; done
[ $rc -eq 0 ] && pass "the server completed the run" ||
  { fail "the server exited $rc"; tail -5 "$out/server.log"; }
grep -h "Client7 lost its connection" "$out/server.log" | head -1
# The counters after the run: the report's, final.
"$py" - "$out/report.json" <<'PY' && pass "the report's counters after the run" || fail "the report's counters"
import json, sys
events = json.load(open(sys.argv[1]))["events"]
print("report events:", json.dumps(events, sort_keys=True))
n = lambda e, r: events.get(e, {}).get(r, 0)
assert n("registered", "joined") == 7, "registered"
assert n("lost", "no_goodbye") == 1, "one lost without a goodbye (Client7)"
assert n("dropped", "no_resume") >= 1, "Client7 dropped when its grace ended"
assert n("dropped", "excluded_twice") >= 1, "Client5 dropped for lying twice"
assert n("excluded", "secure_aggregation") >= 3, "Client5 twice, Client6"
assert n("rejected", "poisoned_update") + n("lost", "poisoned_update") >= 1, \
    "Client6's zeros"
assert n("refused", "not_authorized") == 1, "the stranger"
assert "left" not in events, "nobody said goodbye"
PY
for e in lost dropped excluded rejected refused registered; do
  grep -q "data-event=\"$e\"" "$out/page.html" &&
    pass "the page's event log shows $e" ||
    fail "the page's event log has no $e"
done
grep -q 'data-status="completed"' "$out/page.html" &&
  pass "the page says completed" || fail "the page's status"
grep -q 'id="rss-split"' "$out/page.html" &&
  pass "the page splits RSS" || fail "no RSS split on the page"
finish
