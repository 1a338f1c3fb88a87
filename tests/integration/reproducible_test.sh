#!/usr/bin/env bash
# Sums that do not depend on the order updates arrive in, in every memory
# mode, with real processes over loopback:
#
#   runs     `fedcaf server` and N `fedcaf client` processes (N = 3 and 5),
#            FedAdam, the dummy trainer (add_by_index, and noise: updates
#            that are no multiples of a power of two), a synthetic model of
#            4 MiB in chunks of 256 KiB, 5 rounds, in ram, window and disk
#            mode, each run twice, the second time with every chunk's
#            checks, fold and settling on 3 threads (fold_threads: 3): every
#            round's model byte-identical between the two runs (the
#            clients' chunks arrive in another order each time).
#   modes    the runs of ram, window and disk modes with as many clients:
#            every round's model byte-identical (one exact grid).
#   resume   ram mode, 3 clients, checkpoints: the server SIGKILLed once
#            round 3's checkpoint is written and started again with
#            --resume; rounds 4-6 byte-identical to the uninterrupted run's
#            (no noise here: a client's noise moves on each time it trains,
#            and the clients train a round again after the kill; the
#            synthetic model's values and add_by_index still make float32
#            sums that depend on their order).
#
#   reproducible_test.sh FEDCAF
set -u
fedcaf=$1
. "$(dirname "$0")/lib.sh"

# config FILE N MODE PORT [EXTRA SERVER LINES]
config() {
  cat > "$1" <<YAML
server_configs:
  num_clients: $2
  num_global_epochs: ${ROUNDS:-5}
  aggregator: FedAdamAggregator
  memory_mode: $3
  storage_dir: $out
  scheduler_kwargs: {round_deadline_s: 120}
  comm_configs:
    grpc_configs: {server_uri: 127.0.0.1:$4}
    stream_configs: {chunk_bytes: 262144, window: 4, heartbeat_s: 0.5,
                     connection_timeout_s: 2, reconnect_grace_s: 60}
$5
client_configs:
  train_configs: {trainer: dummy, add: 0.001, add_by_index: true, noise: ${NOISE:-0.01}}
  model_configs: {name: synthetic, num_tensors: 8, total_bytes: 4194304, seed: 7}
data_configs:
  dataset_kwargs: {num_clients: $2}
YAML
}

clients=()
start_clients() { # NAME N PORT
  clients=()
  local i
  for i in $(seq 1 "$2"); do
    timeout 300 "$fedcaf" client -c /dev/null --set client_id=Client$i \
      --set data_configs.dataset_kwargs.num_clients="$2" \
      --set data_configs.dataset_kwargs.client_id=$(( i - 1 )) \
      --set comm_configs.grpc_configs.server_uri=127.0.0.1:"$3" \
      --set comm_configs.stream_configs.reconnect_grace_s=60 \
      > "$out/$1_c$i.log" 2>&1 &
    pids+=($!); clients+=($!)
  done
}

wait_clients() { # NAME
  local c rc=0
  for c in "${clients[@]}"; do wait "$c" || rc=1; done
  [ $rc -eq 0 ] || { fail "$1: a client failed"; tail -n 3 "$out/$1"_c*.log; }
}

run() { # NAME N MODE THREADS: one run; its models $out/NAME-{round}.safetensors
  local port; port=$(free_port)
  config "$out/$1.yaml" "$2" "$3" "$port" "  fold_threads: $4"
  start_clients "$1" "$2" "$port"
  timeout 300 "$fedcaf" server -c "$out/$1.yaml" --report "$out/$1.json" \
    --set "server_configs.save_global_model=$out/$1-{round}.safetensors" \
    > "$out/$1.log" 2>&1 || fail "$1: the server failed: $(tail -n 2 "$out/$1.log")"
  wait_clients "$1"
}

same_models() { # A B ROUNDS...: every round's model byte-identical
  local r
  for r in "${@:3}"; do
    [ -s "$out/$1-$r.safetensors" ] || return 1
    cmp -s "$out/$1-$r.safetensors" "$out/$2-$r.safetensors" || return 1
  done
}

# -- runs: each mode, 3 and 5 clients, twice ---------------------------------
for mode in ram window disk; do
  for n in 3 5; do
    run "${mode}${n}a" "$n" "$mode" 1
    run "${mode}${n}b" "$n" "$mode" 3
    if same_models "${mode}${n}a" "${mode}${n}b" 1 2 3 4 5; then
      pass "$mode mode, $n clients: two runs' models byte-identical in every round (1-5), the second folding on 3 threads"
    else
      fail "$mode mode, $n clients: the two runs' models differ ($(for r in 1 2 3 4 5; do cmp -s "$out/${mode}${n}a-$r.safetensors" "$out/${mode}${n}b-$r.safetensors" || printf 'round %s ' $r; done))"
    fi
  done
done

# -- across modes: one exact grid, the same models -----------------------------
for n in 3 5; do
  if same_models "ram${n}a" "window${n}a" 1 2 3 4 5 &&
     same_models "ram${n}a" "disk${n}a" 1 2 3 4 5; then
    pass "$n clients: ram, window and disk modes' models byte-identical in every round (1-5): every mode sums on one exact grid"
  else
    fail "$n clients: the memory modes' models differ (window: $(same_models "ram${n}a" "window${n}a" 1 2 3 4 5 && echo same || echo other), disk: $(same_models "ram${n}a" "disk${n}a" 1 2 3 4 5 && echo same || echo other))"
  fi
done

# -- resume: ram mode, killed after round 3's checkpoint ----------------------
ROUNDS=6
NOISE=0
port=$(free_port)
config "$out/ref.yaml" 3 ram "$port" ""
start_clients ref 3 "$port"
timeout 300 "$fedcaf" server -c "$out/ref.yaml" --report "$out/ref.json" \
  --set "server_configs.save_global_model=$out/ref-{round}.safetensors" \
  > "$out/ref.log" 2>&1 || fail "resume: the uninterrupted run failed"
wait_clients ref
port=$(free_port)
config "$out/cut.yaml" 3 ram "$port" "  checkpoint: {dir: $out/ckpt, keep: 2}"
start_clients cut 3 "$port"
"$fedcaf" server -c "$out/cut.yaml" --report "$out/cut.json" \
  --set "server_configs.save_global_model=$out/cut-{round}.safetensors" \
  > "$out/cut_s1.log" 2>&1 &
server=$!; pids+=($server)
for t in $(seq 600); do
  ls "$out/ckpt" 2> /dev/null | grep -q '^round-0*3' && break
  sleep 0.1
done
kill -9 "$server" 2> /dev/null
wait "$server" 2> /dev/null
newest=$(ls "$out/ckpt" | grep '^round-' | sort | tail -n 1)
timeout 300 "$fedcaf" server -c "$out/cut.yaml" --resume "$out/ckpt" \
  --report "$out/cut.json" \
  --set "server_configs.save_global_model=$out/cut-{round}.safetensors" \
  > "$out/cut_s2.log" 2>&1 || fail "resume: the resumed server failed: $(tail -n 2 "$out/cut_s2.log")"
wait_clients cut
if grep -q "resuming from" "$out/cut_s2.log" && same_models ref cut 4 5 6; then
  pass "resume: ram mode, SIGKILLed after round 3's checkpoint ($newest) and resumed: rounds 4-6 byte-identical to the uninterrupted run's"
else
  fail "resume: the resumed ram-mode run's models differ from the uninterrupted run's (or it did not resume)"
fi
finish
