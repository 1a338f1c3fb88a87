#!/usr/bin/env bash
# Review reproduction (not in ctest): a registered peer that fetches a
# window of large chunks and never reads them. The server's gateway refuses
# it ("the peer read nothing for ... ms (connection_timeout_s)") but, the
# refusal coming from its timer, stops ticking: the closing grace (2 s) is
# never applied, and the connection, its gateway and the chunks it holds
# stay until the peer itself closes. COUNT connections in turn (each Hello
# takes the session over from the last, already refused) pile up.
#
#   stall_read_repro.sh FEDCAF HOSTILE_PEER [COUNT [OVERFLOW]]
# OVERFLOW > 0: 1 s after the window, that many fetches past it, refused from the
# frame (too_many_requests): the gateway keeps ticking and closes after its
# 2 s grace, gracefully (CAF writes what it holds first): still open.
# Exits 0 iff the server closed every stalled connection.
set -u
fedcaf=${1:?FEDCAF}; hostile=${2:?HOSTILE_PEER}; count=${3:-3}; overflow=${4:-0}
out=$(mktemp -d); spid=""; apid=""
trap '[ -n "$apid" ] && kill $apid 2>/dev/null; [ -n "$spid" ] && kill $spid 2>/dev/null; rm -rf "$out"' EXIT
cat > "$out/server.yaml" <<YAML
server_configs:
  num_clients: 1
  num_global_epochs: 1
  scheduler_kwargs: {min_clients: 1}
  aggregator: FedAvgAggregator
  memory_mode: ram
  comm_configs:
    grpc_configs:
      server_uri: 127.0.0.1:0
      max_message_size: 33554432
      use_authenticator: true
      authenticator_args: {tokens: {Mallory1: evil-1}}
    stream_configs: {chunk_bytes: 16777216, window: 4, idle_timeout_s: 60,
                     heartbeat_s: 0.5, connection_timeout_s: 3,
                     reconnect_grace_s: 60, handshake_timeout_s: 2}
client_configs:
  train_configs: {trainer: dummy, add: 0.5}
  model_configs: {name: synthetic, num_tensors: 4, total_bytes: 67108864, seed: 7}
data_configs:
  dataset_kwargs: {num_clients: 1}
YAML
"$fedcaf" server -c "$out/server.yaml" > "$out/server.log" 2>&1 &
spid=$!
port=""
for _ in $(seq 100); do
  port=$(grep -o "listening on 127.0.0.1:[0-9]*" "$out/server.log" | grep -o "[0-9]*$")
  [ -n "$port" ] && break; sleep 0.1
done
[ -n "$port" ] || { echo "the server did not listen"; exit 2; }
echo "server RSS before: $(grep VmRSS /proc/$spid/status)"
timeout 200 "$hostile" --port "$port" --attack stall_read --id Mallory1 \
  --token evil-1 --hold-s "${HOLD_S:-6}" --count "$count" --overflow "$overflow" --timeout-s 150 \
  --until-file "$out/until" > "$out/attack.log" 2>&1 &
apid=$!
for _ in $(seq 1500); do [ -e "$out/until.ready" ] && break; sleep 0.1; done
sleep "${SETTLE_S:-0}" # past every closing grace (2 s)
echo "server RSS with the stalled connections held: $(grep VmRSS /proc/$spid/status)"
echo "server-side ESTABLISHED: $(ss -tn state established "( sport = :$port )" | tail -n +2 | wc -l)"
echo "refusals: $(grep -c 'refused: ' "$out/server.log") ($(grep -o 'refused: [a-z_]*: [^(]*' "$out/server.log" | sort | uniq -c | tr '\n' ';'))"
touch "$out/until"; wait $apid; rc=$?; apid=""
grep -E "still ESTABLISHED|closed its socket|verdict" "$out/attack.log" | cut -c1-200
exit $rc
