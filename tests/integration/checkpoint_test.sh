#!/usr/bin/env bash
# A run that survives its server (server_configs.checkpoint, --resume):
#
#   exact    `fedcaf server` and five `fedcaf client` processes, FedAdam
#            (whose moments matter), 3 of 5 clients sampled a round, the
#            dummy trainer with add_by_index, window mode, 10 rounds. The
#            server is SIGKILLed at FEDCAF_CKPT_KILLS (20) random instants
#            in turn (registration, downloads, uploads, aggregation,
#            checkpoint writing) and started again with --resume each time;
#            the clients only reconnect. The final model is byte-identical
#            to an uninterrupted run's, the report holds rounds 1-10 once
#            each and names the rounds it resumed from.
#   dp       the same with FedAvg and DP-FedAvg's server noise (5 kills):
#            the same model bytes and the same epsilon after every round.
#   torn     a partial checkpoint (a write cut short), a newest one with
#            64 KiB of its model zeroed and one with another round's model
#            planted (both of the same size) are passed over by their
#            digests, each said in the log, for the one before; the run
#            ends with the same model.
#   config   a changed key is refused, naming it; --resume-force lets a
#            deadline change, not the learning rate.
#   full     (needs mount namespaces) a checkpoint dir on a 6 MiB tmpfs: the
#            second checkpoint of a 4 MiB model does not fit. on_error stop:
#            one line, exit 1, the report written (failed), the first
#            checkpoint intact; on_error continue: the run completes.
#
#   checkpoint_test.sh FEDCAF
set -u
fedcaf=$1
kills=${FEDCAF_CKPT_KILLS:-20}
. "$(dirname "$0")/lib.sh"
port=$(free_port)

# The tokens in a file of their own, so that a checkpoint's config (which
# never holds a secret) is enough to resume from (alone, more).
printf 'Client%d: t%d\n' 1 1 2 2 3 3 4 4 5 5 > "$out/tokens.yaml"

# server_config FILE AGGREGATOR [EXTRA KWARGS]: 5 clients, 3 a round.
server_config() {
  cat > "$1" <<EOF
server_configs:
  num_clients: 5
  num_global_epochs: 10
  scheduler: SyncScheduler
  scheduler_kwargs: {clients_per_round: 3, seed: 7, round_deadline_s: 120}
  aggregator: $2
  aggregator_kwargs: {client_weights_mode: equal${3:-}}
  memory_mode: window
  checkpoint: {dir: $out/ckpt, keep: 3}
  comm_configs:
    grpc_configs:
      server_uri: 127.0.0.1:$port
      use_authenticator: true
      authenticator: NaiveAuthenticator
      authenticator_args: {tokens_file: $out/tokens.yaml}
    stream_configs: {chunk_bytes: 65536, window: 4, heartbeat_s: 0.5,
                     connection_timeout_s: 2, reconnect_grace_s: 60}
client_configs:
  train_configs: {trainer: dummy, add: 0.5, add_by_index: true}
  model_configs: {name: synthetic, num_tensors: 8, total_bytes: 16777216, seed: 7}
data_configs:
  dataset_kwargs: {num_clients: 5}
EOF
}

for i in 1 2 3 4 5; do
  cat > "$out/c$i.yaml" <<EOF
client_id: Client$i
data_configs:
  dataset_kwargs: {num_clients: 5, client_id: $(( i - 1 ))}
comm_configs:
  grpc_configs:
    server_uri: 127.0.0.1:$port
    use_authenticator: true
    authenticator_args: {auth_token: t$i}
  stream_configs: {heartbeat_s: 0.5, connection_timeout_s: 2, reconnect_grace_s: 60}
EOF
done

clients=()
start_clients() { # NAME
  clients=()
  local i
  for i in 1 2 3 4 5; do
    timeout 300 "$fedcaf" client -c "$out/c$i.yaml" > "$out/$1_c$i.log" 2>&1 &
    pids+=($!); clients+=($!)
  done
}

wait_clients() { # NAME: every client exited 0
  local c rc=0
  for c in "${clients[@]}"; do wait "$c" || rc=1; done
  [ $rc -eq 0 ] || { fail "$1: a client failed"; tail -n 3 "$out/$1"_c*.log; }
}

# reference NAME CONFIG: an uninterrupted run; its models $out/NAME-{round}.
reference() {
  rm -rf "$out/ckpt"
  start_clients "$1"
  timeout 300 "$fedcaf" server -c "$2" --report "$out/$1.json" \
    --set "server_configs.save_global_model=$out/$1-{round}.safetensors" \
    > "$out/$1.log" 2>&1 || fail "$1: the uninterrupted run failed"
  wait_clients "$1"
}

newest_checkpoint() { # the round of the newest complete checkpoint, 0 if none
  local r
  r=$(ls "$out/ckpt" 2> /dev/null | grep '^round-' | sort | tail -n 1)
  r=${r#round-}; r=${r%%.*}
  echo $(( 10#${r:-0} ))
}

# killed NAME CONFIG KILLS: the same, its server SIGKILLed KILLS times at
# random instants and resumed; sets $restarts.
killed() {
  local name=$1 cfg=$2 left=$3 n=0 rc server args
  rm -rf "$out/ckpt"
  start_clients "$name"
  restarts=0
  while [ $n -lt 60 ]; do
    args=()
    if ls "$out/ckpt" 2> /dev/null | grep -q '^round-'; then
      args=(--resume "$out/ckpt")
    fi
    "$fedcaf" server -c "$cfg" "${args[@]}" --report "$out/$name.json" \
      --set "server_configs.save_global_model=$out/$name-{round}.safetensors" \
      > "$out/${name}_s$n.log" 2>&1 &
    server=$!; pids+=($server)
    if [ "$left" -gt 0 ]; then
      # The kills are spread over the run: the k-th of K waits (up to 60 s)
      # for the checkpoint of round (k-1)*5/K, so the run gets past its first
      # checkpoint even where writing one (fsync of 144 MiB) takes seconds.
      # Then, once the clients are back (or after 10 s), 0 to 0.49 s more: a
      # round in any phase (a round of 48 MiB takes about 0.2 s here), its
      # checkpoint included; now and then registration itself. A run more
      # than a round ahead of its target is killed as it starts (while it
      # reads its checkpoint), so all K kills land before round 10.
      local t target=$(( restarts * 5 / $3 ))
      if [ "$(newest_checkpoint)" -le $(( target + 1 )) ]; then
        for t in $(seq 600); do
          [ "$(newest_checkpoint)" -ge "$target" ] && break
          kill -0 "$server" 2> /dev/null || break
          sleep 0.1
        done
        for t in $(seq 100); do
          [ "$(grep -c "registered Client" "$out/${name}_s$n.log")" -ge 5 ] && break
          [ $(( RANDOM % 40 )) -eq 0 ] && break
          sleep 0.1
        done
        sleep "0.$(printf '%02d' $(( RANDOM % 50 )))"
      fi
      if kill -9 "$server" 2> /dev/null; then
        left=$(( left - 1 )); restarts=$(( restarts + 1 ))
      fi
    fi
    wait "$server" 2> /dev/null; rc=$?
    n=$(( n + 1 ))
    [ $rc -eq 0 ] && break
    # Killed after its last checkpoint: nothing is left to run.
    grep -q "the run is complete" "$out/${name}_s$(( n - 1 )).log" && break
    [ $rc -eq 137 ] || { fail "$name: server run $n exited $rc"; tail -n 3 "$out/${name}_s$(( n - 1 )).log"; return 1; }
  done
  wait_clients "$name"
}

# -- exact: FedAdam, 20 kills -------------------------------------------------
server_config "$out/adam.yaml" FedAdamAggregator
reference ref_adam "$out/adam.yaml"
killed adam "$out/adam.yaml" "$kills"
[ "$restarts" -eq "$kills" ] || fail "exact: only $restarts of $kills kills landed before the run ended"
if cmp -s "$out/adam-10.safetensors" "$out/ref_adam-10.safetensors"; then
  pass "exact: FedAdam, 3 of 5 sampled, server SIGKILLed $restarts times and resumed: the final model is byte-identical to the uninterrupted run's"
else
  fail "exact: the final model after $restarts kills differs from the uninterrupted run's"
fi
"$py" - "$out" <<'PY' && pass "exact: the report holds rounds 1-10 once each and the rounds it resumed from" || fail "exact: the report"
import glob, json, os, sys
out = sys.argv[1]
r = json.load(open(f"{out}/adam.json"))
rounds = [x["round"] for x in r["rounds"]]
assert rounds == list(range(1, 11)), rounds
assert r["status"] in ("completed", "running"), r["status"]
logs = sorted(glob.glob(f"{out}/adam_s*.log"), key=lambda p: int(p.split("_s")[-1][:-4]))
resumed = [int(line.split("round-")[1][:6]) for p in logs for line in open(p)
           if "resuming from" in line]
# Each resume that got as far as a checkpoint of its own is on record, in
# order; the last run's is the last.
assert resumed and r["resumed_from"] == sorted(set(r["resumed_from"])), r["resumed_from"]
assert set(r["resumed_from"]) <= set(resumed) and r["resumed_from"][-1] == resumed[-1], (r["resumed_from"], resumed)
print(f"   {len(resumed)} resumes (from rounds {resumed}); the report names {r['resumed_from']}")
PY

# -- dp: FedAvg with DP-FedAvg's noise, 5 kills --------------------------------
server_config "$out/dp.yaml" FedAvgAggregator \
  ", dp_fedavg: {clip_norm: 1000, noise_multiplier: 0.3, seed: 11}"
reference ref_dp "$out/dp.yaml"
killed dp "$out/dp.yaml" 5
"$py" - "$out" <<'PY' && pass "dp: after $restarts kills the same model bytes and the same epsilon after every round" || fail "dp: model or epsilon differ"
import json, sys, filecmp
out = sys.argv[1]
assert filecmp.cmp(f"{out}/dp-10.safetensors", f"{out}/ref_dp-10.safetensors", shallow=False)
a = [x["dp_epsilon"] for x in json.load(open(f"{out}/dp.json"))["rounds"]]
b = [x["dp_epsilon"] for x in json.load(open(f"{out}/ref_dp.json"))["rounds"]]
assert a == b and len(a) == 10 and a[-1] > 0, (a, b)
print(f"   epsilon after round 10: {a[-1]:.4f}")
PY

# -- torn: a partial and damaged checkpoints are passed over ------------------
# The FedAdam reference's checkpoints: rounds 8, 9 and 10 (keep: 3). Round
# 10's model has 64 KiB zeroed in place and round 9's is round 8's planted
# in its place: both keep their sizes, their digests refuse them.
reference torn_ref "$out/adam.yaml"
mkdir -p "$out/torn"
cp -r "$out/ckpt/round-000008" "$out/ckpt/round-000009" \
  "$out/ckpt/round-000010" "$out/torn/"
mkdir "$out/torn/.round-000011.partial"
head -c 1000 "$out/ckpt/round-000010/model.safetensors" > "$out/torn/.round-000011.partial/model.safetensors"
dd if=/dev/zero of="$out/torn/round-000010/model.safetensors" bs=64K \
  seek=16 count=1 conv=notrunc status=none
cp "$out/ckpt/round-000008/model.safetensors" "$out/torn/round-000009/model.safetensors"
start_clients torn
timeout 300 "$fedcaf" server -c "$out/adam.yaml" --resume "$out/torn" \
  --set "server_configs.checkpoint.dir=$out/torn" --resume-force \
  --set "server_configs.save_global_model=$out/torn-{round}.safetensors" \
  > "$out/torn.log" 2>&1 || fail "torn: the resumed run failed"
wait_clients torn
if grep -q "round-000011.partial is not complete" "$out/torn.log" &&
   grep -q "round-000010/model.safetensors: its bytes are not those written.*passed over" "$out/torn.log" &&
   grep -q "round-000009/model.safetensors: its bytes are not those written.*passed over" "$out/torn.log" &&
   grep -q "resuming from .*round-000008" "$out/torn.log" &&
   cmp -s "$out/torn-10.safetensors" "$out/torn_ref-10.safetensors"; then
  pass "torn: the partial checkpoint, a zeroed and a planted one (same sizes) were passed over, each logged by its digest; resumed from round 8 to the same final model"
else
  fail "torn: $(grep -h 'checkpoint\|resuming' "$out/torn.log" | head -4)"
fi

# -- config: a changed key is refused, naming it ------------------------------
lr=server_configs.aggregator_kwargs.server_learning_rate
"$fedcaf" server -c "$out/adam.yaml" --resume "$out/torn" --set "$lr=0.5" \
  > "$out/changed.log" 2>&1
rc=$?
if [ $rc -ne 0 ] && grep -q "^fedcaf: .*the config differs from the checkpoint's .* in $lr" "$out/changed.log"; then
  pass "config: a changed learning rate is refused (exit $rc), naming $lr"
else
  fail "config: exit $rc, $(cat "$out/changed.log")"
fi
"$fedcaf" server -c "$out/adam.yaml" --resume "$out/torn" --set "$lr=0.5" \
  --resume-force > "$out/forced.log" 2>&1
rc=$?
grep -q "cannot change mid-run; only rounds, deadlines, timeouts, ports and paths may" "$out/forced.log" && [ $rc -ne 0 ] &&
  pass "config: --resume-force does not let the learning rate change" ||
  fail "config: --resume-force let $lr change (exit $rc)"

# -- alone: --resume DIR without -c runs the checkpoint's own config ----------
# From the reference's round 8, outputs moved with --set: rounds 9 and 10
# give the uninterrupted run's final model; then --set num_global_epochs=12
# extends the run from its round 10; a changed rule is refused with why.
mkdir -p "$out/alone"
cp -r "$out/ckpt/round-000008" "$out/alone/"
start_clients alone
timeout 300 "$fedcaf" server --resume "$out/alone" \
  --set "server_configs.checkpoint.dir=$out/alone" \
  --set "server_configs.save_global_model=$out/alone-{round}.safetensors" \
  > "$out/alone.log" 2>&1 || fail "alone: the resumed run failed: $(tail -n 2 "$out/alone.log")"
wait_clients alone
cmp -s "$out/alone-10.safetensors" "$out/torn_ref-10.safetensors" &&
  pass "alone: --resume DIR without -c ran rounds 9-10 with the checkpoint's config: the uninterrupted run's final model" ||
  fail "alone: the final model differs"
start_clients more
timeout 300 "$fedcaf" server --resume "$out/alone" \
  --set server_configs.num_global_epochs=12 \
  --set "server_configs.save_global_model=$out/more-{round}.safetensors" \
  > "$out/more.log" 2>&1 || fail "more: the extended run failed: $(tail -n 2 "$out/more.log")"
wait_clients more
if grep -q "resuming from .*round-000010: round 10 of 12" "$out/more.log" &&
   [ -s "$out/more-12.safetensors" ] && [ ! -e "$out/more-10.safetensors" ]; then
  pass "more: --resume DIR --set server_configs.num_global_epochs=12 ran rounds 11-12 from round 10"
else
  fail "more: $(grep -h 'resuming\|fedcaf:' "$out/more.log" | head -3)"
fi
"$fedcaf" server --resume "$out/alone" --set "$lr=0.5" > "$out/alone_lr.log" 2>&1
rc=$?
grep -q "^fedcaf: .*--set differs from the checkpoint's .* in $lr: what the run computes .* cannot change mid-run" "$out/alone_lr.log" && [ $rc -ne 0 ] &&
  pass "alone: --set of the learning rate refused: $(cut -c1-160 "$out/alone_lr.log")" ||
  fail "alone: $lr changed (exit $rc): $(cat "$out/alone_lr.log")"

# -- full: a checkpoint dir on a small tmpfs ------------------------------------
if unshare -rm true 2> /dev/null; then
  cat > "$out/full.yaml" <<EOF
server_configs:
  num_clients: 2
  num_global_epochs: 3
  aggregator: FedAvgAggregator
  checkpoint: {dir: $out/small, keep: 2}
client_configs:
  train_configs: {trainer: dummy, add: 0.5}
  model_configs: {name: synthetic, num_tensors: 4, total_bytes: 4194304, seed: 7}
EOF
  mkdir -p "$out/small"
  for policy in stop continue; do
    rm -rf "$out/small"/* "$out/full_$policy.json"
    unshare -rm sh -c 'mount -t tmpfs -o size=6m tmpfs "$1" && shift && exec "$@"' \
      sh "$out/small" timeout 120 "$fedcaf" simulate -c "$out/full.yaml" \
      --set "server_configs.checkpoint.on_error=$policy" \
      --report "$out/full_$policy.json" > "$out/full_$policy.log" 2>&1
    echo "$? $(tail -n 1 "$out/full_$policy.log")" > "$out/full_$policy.rc"
  done
  if grep -q "^1 fedcaf: .*the checkpoint of round 2 could not be written: .*No space left on device" "$out/full_stop.rc" &&
     "$py" - "$out" <<'PY'
import json, sys
out = sys.argv[1]
stop = json.load(open(f"{out}/full_stop.json"))
assert stop["status"] == "failed" and len(stop["rounds"]) == 2, (stop["status"], len(stop["rounds"]))
go = json.load(open(f"{out}/full_continue.json"))
assert go["status"] == "completed" and len(go["rounds"]) == 3, go["status"]
PY
  then
    pass "full: on_error stop ends with '$(cut -d' ' -f2- "$out/full_stop.rc" | cut -c1-120)...' and a failed report of 2 rounds; continue completes"
  else
    fail "full: $(cat "$out/full_stop.rc" "$out/full_continue.rc")"
  fi
else
  echo "SKIP full: no mount namespaces here (unshare -rm)"
fi
finish
