#!/usr/bin/env bash
# fedcaf across hosts: a server and clients as separate processes, each on
# its own host (a network namespace with its own address, see
# deploy/netns.sh) where this machine allows it, else on 127.0.0.1.
#
#  1. TLS with client certificates and tokens, 3 clients, 3 rounds: the
#     global model equals the in-process run's, byte for byte; a client with
#     a wrong token, one with a certificate from another CA, and a plain TCP
#     client are refused, each with a log line naming its address.
#  2. kill -9 of a client mid-upload, partial_updates: discard: the run goes
#     on with min_clients, and every later global model equals the average
#     of the clients that completed (no trace of the killed client's
#     partial update).
#  3. (namespaces only) every link shaped to 20 MB/s with a model that takes
#     longer than idle_timeout to cross, one client's cable pulled for 4 s
#     mid-download and another's mid-upload: the run completes, no timeout
#     fires on the slow links, the cut clients resume and resend far less
#     than the model.
#
#   remote_test.sh FEDCAF SOURCE_DIR [SCENARIOS, default 123]
set -u
fedcaf=$1; src=$2; scenarios=${3:-123}
py=/usr/bin/python3
out=$(mktemp -d)
prefix="fc$$"
pids=()
. "$src/deploy/netns.sh"

cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2> /dev/null; done
  [ "${netns:-0}" = 1 ] && netns_down "$prefix"
  rm -rf "$out"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; for f in "$out"/*.log; do echo "== $f"; tail -25 "$f"; done; exit 1; }

if [ -n "${FEDCAF_NO_NETNS:-}" ]; then
  why="FEDCAF_NO_NETNS is set"; netns=0; server_ip=127.0.0.1
  echo "SKIP network namespaces ($why): processes on 127.0.0.1 instead"
elif why=$(netns_can); then
  netns=1
  netns_up "$prefix" 4 || fail "could not build the namespaces"
  server_ip=10.91.0.1
  echo "hosts: network namespaces ${prefix}s, ${prefix}c1..c4 (10.91.0.0/24)"
else
  netns=0
  server_ip=127.0.0.1
  echo "SKIP network namespaces ($why): processes on 127.0.0.1 instead"
fi
# host NODE CMD...: run on host NODE (s, c1, ...).
host() {
  local node=$1; shift
  if [ "$netns" = 1 ]; then on "$prefix" "$node" "$@"; else "$@"; fi
}
port=$(( 20000 + RANDOM % 20000 ))

"$src/deploy/make-certs.sh" "$out/certs" "$server_ip" Client1 Client2 Client3 Client4 > /dev/null
"$src/deploy/make-certs.sh" "$out/other" "$server_ip" Client3 > /dev/null

# server_config FILE NAME: a server of 3 clients on a synthetic 16 MiB model;
# client i adds 0.5 * (i + 1) per round, so every update differs.
server_config() {
  cat > "$1" <<EOF
server_configs:
  num_clients: 3
  num_global_epochs: 3
  scheduler: SyncScheduler
  scheduler_kwargs: {min_clients: 2}
  aggregator: FedAvgAggregator
  save_global_model: $out/$2_{round}.safetensors
  comm_configs:
    grpc_configs:
      server_uri: $server_ip:$port
      use_ssl: true
      server_certificate: $out/certs/server.pem
      server_certificate_key: $out/certs/server.key
      root_certificate: $out/certs/ca.pem
      use_authenticator: true
      authenticator: NaiveAuthenticator
      authenticator_args:
        tokens: {Client1: token-one, Client2: token-two, Client3: token-three}
    stream_configs:
      chunk_bytes: 262144
      window: 4
      idle_timeout_s: 20
      heartbeat_s: 0.5
      connection_timeout_s: 2
      reconnect_grace_s: 2
client_configs:
  train_configs: {trainer: dummy, add: 0.5, add_by_index: true}
  model_configs: {name: synthetic, num_tensors: 8, total_bytes: 16777216, seed: 7}
data_configs:
  dataset_kwargs: {num_clients: 3}
EOF
}

# client_config FILE I: Client<I> with its certificate and token.
client_config() {
  local tokens=(none token-one token-two token-three)
  cat > "$1" <<EOF
client_id: Client$2
data_configs:
  dataset_kwargs: {num_clients: 3, client_id: $(( $2 - 1 ))}
comm_configs:
  grpc_configs:
    server_uri: $server_ip:$port
    use_ssl: true
    client_certificate: $out/certs/Client$2.pem
    client_certificate_key: $out/certs/Client$2.key
    root_certificate: $out/certs/ca.pem
    use_authenticator: true
    authenticator_args: {auth_token: ${tokens[$2]}}
  stream_configs: {idle_timeout_s: 20, heartbeat_s: 0.5, connection_timeout_s: 2, reconnect_grace_s: 20}
EOF
}

# wait_for FILE PATTERN SECONDS
wait_for() {
  local i
  for i in $(seq 1 $(( $3 * 10 ))); do
    grep -q "$2" "$1" 2> /dev/null && return 0
    sleep 0.1
  done
  return 1
}

start_server() { # NAME CONFIG [--set ...]
  local name=$1 cfg=$2; shift 2
  host s timeout 300 "$fedcaf" server -c "$cfg" "$@" --report "$out/$name.json" \
    > "$out/$name.log" 2>&1 &
  server_pid=$!; pids+=($server_pid)
  wait_for "$out/$name.log" "listening on" 30 || fail "$name did not start"
}

start_client() { # NAME HOST CONFIG [--set ...]
  local name=$1 node=$2 cfg=$3; shift 3
  host "$node" timeout 300 "$fedcaf" client -c "$cfg" "$@" --report "$out/$name.json" \
    > "$out/$name.log" 2>&1 &
  last_pid=$!; pids+=($last_pid)
}

for i in 1 2 3; do client_config "$out/client$i.yaml" $i; done

# -- 1. TLS, tokens, refusals, and the same model as in one process ----------
if [[ $scenarios == *1* ]]; then
server_config "$out/tls.yaml" tls
start_server tls "$out/tls.yaml"
quick=(--set comm_configs.stream_configs.idle_timeout_s=2)
host c4 timeout 60 "$fedcaf" client -c "$out/client3.yaml" \
  --set comm_configs.grpc_configs.authenticator_args.auth_token=guess \
  > "$out/bad_token.log" 2>&1 && fail "a client with a wrong token was let in"
host c4 timeout 60 "$fedcaf" client -c "$out/client3.yaml" "${quick[@]}" \
  --set comm_configs.grpc_configs.client_certificate=$out/other/Client3.pem \
  --set comm_configs.grpc_configs.client_certificate_key=$out/other/Client3.key \
  > "$out/bad_ca.log" 2>&1 && fail "a certificate from another CA was let in"
host c4 timeout 60 "$fedcaf" client -c "$out/client3.yaml" "${quick[@]}" \
  --set comm_configs.grpc_configs.use_ssl=false \
  > "$out/plain.log" 2>&1 && fail "a plain TCP client was let in"
for i in 1 2 3; do start_client tls_c$i c$i "$out/client$i.yaml"; done
wait $server_pid || fail "the TLS server failed"
for p in "${pids[@]}"; do wait "$p" 2> /dev/null; done
pids=()
grep -q "refused: not_authorized: Client3 from .*: unknown client id or wrong token" "$out/tls.log" ||
  fail "no log line for the wrong token"
[ "$(grep -c "refused: not_authorized: TLS handshake failed.*(peer [0-9]" "$out/tls.log")" -ge 2 ] ||
  fail "no log lines for the refused TLS handshakes"
grep -q "certificate verify failed" "$out/tls.log" || fail "the foreign CA was not named"
grep -q "wrong version number" "$out/tls.log" || fail "the plain client was not named"
grep "refused" "$out/tls.log" | sort -u -k2 | head -8
$py - "$out/tls.json" <<'PY' || fail "clean closes after done were counted as refusals"
import json, sys
r = json.load(open(sys.argv[1]))
# The wrong token, the foreign CA and the plain client: three refusals; the
# three clients leaving after done (TLS close_notify) are none.
assert r["refusals"] == 3, r["refusals"]
print("   refusals in the report: 3 (the three bad clients; clean closes none)")
PY

timeout 300 "$fedcaf" simulate -c "$out/tls.yaml" \
  --set "server_configs.save_global_model=$out/local_{round}.safetensors" \
  > "$out/local.log" 2>&1 || fail "the in-process run failed"
for r in 1 2 3; do
  cmp -s "$out/tls_$r.safetensors" "$out/local_$r.safetensors" ||
    fail "round $r: the TLS run's global model differs from the in-process run's"
done
echo "1. TLS + tokens, 3 clients on 3 hosts: 3 rounds, global models identical to the in-process run"
fi

# -- 2. kill -9 mid-upload -------------------------------------------------
# In both memory modes: ram (a model-sized sum) and window (positions
# averaged into the global model in place). partial_updates: discard (the
# default keeps what a dropped client delivered): the survivors send again
# and the model is exactly their average.
for mode in ram window; do
if [[ $scenarios == *2* ]]; then
rm -f "$out"/kill*
server_config "$out/kill.yaml" kill
start_server kill "$out/kill.yaml" --set server_configs.memory_mode=$mode \
  --set server_configs.aggregator_kwargs.partial_updates=discard
[ "$netns" = 1 ] && netns_rate "$prefix" 3 64mbit # an upload of about 2 s
for i in 1 2 3; do start_client kill_c$i c$i "$out/client$i.yaml"; done
victim=$last_pid
wait_for "$out/kill_c3.log" "round 2: trained" 120 || fail "client 3 never trained round 2"
[ "$netns" = 1 ] && sleep 0.7
pkill -9 -P "$victim" 2> /dev/null; kill -9 "$victim" 2> /dev/null
# The fedcaf process itself (under timeout and, with namespaces, ip netns exec).
for p in $(pgrep -f "client -c $out/client3.yaml"); do kill -9 "$p"; done
wait $server_pid || fail "the run did not go on without the killed client"
for p in "${pids[@]}"; do wait "$p" 2> /dev/null; done
pids=()
[ "$netns" = 1 ] && netns_rate "$prefix" 3 10gbit
grep -q "dropped Client3" "$out/kill.log" || fail "client 3 was not dropped"
if grep -q "dropped mid-upload" "$out/kill.log"; then
  echo "   (client 3 died mid-upload; the others sent their updates again)"
elif [ "$netns" = 1 ]; then
  fail "client 3 was not killed mid-upload"
fi
$py - "$out" "$mode" <<'PY' || fail "$mode: the model after the kill is not the survivors' average"
import json, struct, sys
import numpy as np
out = sys.argv[1]
def load(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    header.pop("__metadata__", None)
    return {k: np.frombuffer(data[v["data_offsets"][0]:v["data_offsets"][1]], np.float32)
            for k, v in header.items()}
g = [load(f"{out}/kill_{r}.safetensors") for r in (1, 2, 3)]
report = json.load(open(f"{out}/kill.json"))
rounds = report["rounds"]
# Client i adds 0.5 * i: each global model is the previous one plus the mean
# of the adds of the clients the round names as contributors, exactly.
assert rounds[0]["missing_clients"] == [], rounds[0]
assert rounds[2]["missing_clients"] == ["Client3"], rounds
for r in (1, 2):
    ids = {1, 2, 3} - {int(c[-1]) for c in rounds[r]["missing_clients"]}
    assert rounds[r]["clients"] == len(ids), rounds[r]
    want = sum(0.5 * i for i in ids) / len(ids)
    for name in g[r]:
        d = g[r][name].astype(np.float64) - g[r - 1][name]
        assert np.all(d == want), (r + 1, name, want, d.min(), d.max())
print(f"2. {sys.argv[2]} mode: kill -9 of Client3 in round 2: the rounds "
      "without it are exactly the average of Client1 and Client2; the report "
      "names Client3 missing")
PY
fi
done

# -- 3. slow links and a pulled cable (namespaces only) ------------------------
if [[ $scenarios != *3* ]]; then
  echo "passed"
  exit 0
fi
if [ "$netns" = 0 ]; then
  echo "SKIP 3. slow link and cable pull: needs network namespaces ($why)"
  echo "passed"
  exit 0
fi
server_config "$out/slow.yaml" slow
for i in 1 2 3; do netns_rate "$prefix" $i 160mbit; done # 20 MB/s
slow=(--set client_configs.model_configs.total_bytes=50331648
      --set server_configs.comm_configs.stream_configs.idle_timeout_s=1.5
      --set server_configs.comm_configs.stream_configs.reconnect_grace_s=20)
start_server slow "$out/slow.yaml" "${slow[@]}"
cslow=(--set comm_configs.stream_configs.idle_timeout_s=1.5)
for i in 1 2 3; do start_client slow_c$i c$i "$out/client$i.yaml" "${cslow[@]}"; done
wait_for "$out/slow.log" "round 1/3" 120 || fail "round 1 did not finish over the slow links"
sleep 1
netns_link "$prefix" 2 down
sleep 4
netns_link "$prefix" 2 up
# And client 3's cable mid-upload in round 3.
wait_for "$out/slow_c3.log" "round 3: trained" 120 || fail "client 3 never trained round 3"
sleep 0.5
netns_link "$prefix" 3 down
sleep 4
netns_link "$prefix" 3 up
wait $server_pid || fail "the slow-link run failed"
for p in "${pids[@]}"; do wait "$p" || fail "a client of the slow-link run failed"; done
pids=()
# A resume over a new connection is not a refusal: no takeover is logged
# as one (what a pulled cable cuts off, an upload's silence, still may be).
grep -q "refused.*another connection took over" "$out/slow.log" &&
  fail "a resume was logged as a refusal"
$py - "$out" <<'PY' || fail "the slow-link run's checks failed"
import json, sys
out = sys.argv[1]
model = 50331648
server = json.load(open(f"{out}/slow.json"))
c2 = json.load(open(f"{out}/slow_c2.json"))
assert server["ok"] and [r["clients"] for r in server["rounds"]] == [3, 3, 3], server["rounds"]
assert c2["ok"] and c2["resumes"] >= 1, (c2["failure"], c2["resumes"])
assert c2["bytes_resent"] < model / 10, c2["bytes_resent"]
c1 = json.load(open(f"{out}/slow_c1.json"))  # a link that only was slow
assert c1["ok"] and c1["resumes"] == 0 and c1["retries"] == 0, c1["resumes"]
c3 = json.load(open(f"{out}/slow_c3.json"))  # cut mid-upload
assert c3["ok"] and c3["resumes"] >= 1, (c3["failure"], c3["resumes"])
assert c3["bytes_resent"] < model / 10, c3["bytes_resent"]
slowest = max(r["download_seconds"] for r in c2["rounds"])
assert slowest > 1.5, f"a download took {slowest:.1f} s, not longer than idle_timeout"
print(f"3. 48 MiB over 20 MB/s links, idle_timeout 1.5 s: longest download "
      f"{slowest:.1f} s, no timeout; Client2's cable pulled for 4 s: "
      f"{c2['resumes']} resume(s), {c2['bytes_resent'] / 2**20:.2f} MiB fetched "
      f"again; Client3's cable pulled mid-upload: {c3['resumes']} resume(s), "
      f"{c3['bytes_resent'] / 2**20:.2f} MiB sent again, of a "
      f"{model / 2**20:.0f} MiB model")
PY
echo "passed"
