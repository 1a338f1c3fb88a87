#!/usr/bin/env bash
# TrimmedMeanAggregator and MedianAggregator equal NumPy's coordinate-wise
# rules over what the clients uploaded, in ram and window modes for chunks
# of 64 B, 4000 B and 1 MiB, and in disk mode: `fedcaf server` and five Python clients over
# real sockets, one of them uploading -10 x the model it received, 2 rounds
# of a 166 kB synthetic model in 6 tensors (chunks split and pack them). The
# default bound on an update's distance (max_update_ratio) is off: -10 x the
# model lies 11 x its norm away, and the rule, not the bound, must meet it.
set -u
fedcaf=$1; src=$2; pydir=$3; python=${4:-/usr/bin/python3}
export FEDCAF_PYTHON=$pydir PYTHONPATH=$pydir
. "$(dirname "$0")/lib.sh"
check=$src/tests/integration/robust_check.py

# run DIR RULE MODE CHUNK: the server and clients 1-4 honest, 5 an attacker.
run() {
  local dir=$1 rule=$2 mode=$3 chunk=$4; mkdir -p "$dir"
  local port=$(free_port) rc=0 clients=()
  local uri="127.0.0.1:$port"
  timeout 300 "$fedcaf" server -c "$src/configs/synthetic_dummy.yaml" \
    --set server_configs.comm_configs.grpc_configs.server_uri=$uri \
    --set server_configs.num_clients=5 --set server_configs.num_global_epochs=2 \
    --set server_configs.aggregator=$rule \
    --set server_configs.aggregator_kwargs.max_update_ratio=0 \
    --set server_configs.memory_mode=$mode --set server_configs.storage_dir="$dir" \
    --set server_configs.comm_configs.stream_configs.chunk_bytes=$chunk \
    --set client_configs.train_configs.trainer=python \
    --set client_configs.model_configs.total_bytes=166000 \
    --set client_configs.model_configs.num_tensors=6 \
    --set server_configs.save_global_model="$dir/global-{round}.safetensors" \
    --report "$dir/server.json" > "$dir/server.log" 2>&1 & pids+=($!)
  local server=$!
  for k in 1 2 3 4 5; do
    local role=honest; [ $k = 5 ] && role=attacker
    timeout 300 "$python" "$check" client "$src/configs/client_1.yaml" "$uri" \
      $k "$dir" $role > "$dir/client_$k.log" 2>&1 & pids+=($!); clients+=($!)
  done
  wait $server || rc=$?
  for c in "${clients[@]}"; do wait $c || rc=$?; done
  if [ $rc -ne 0 ]; then
    echo "FAIL: $rule $mode $chunk: a process exited non-zero"
    cat "$dir/server.log" "$dir"/client_*.log; exit 1
  fi
}

for setting in ram:64 ram:4000 ram:1048576 window:64 window:4000 \
               window:1048576 disk:4000; do
  mode=${setting%:*}; chunk=${setting#*:}
  # The two rules' runs at once (each its own port and folder).
  runs=()
  for rule in TrimmedMeanAggregator MedianAggregator; do
    run "$out/$rule-$mode-$chunk" $rule $mode $chunk & runs+=($!)
  done
  for r in "${runs[@]}"; do wait "$r" || exit 1; done
  for rule in TrimmedMeanAggregator MedianAggregator; do
    echo "== $rule, memory_mode $mode, chunk_bytes $chunk"
    dir=$out/$rule-$mode-$chunk
    "$python" "$check" check "$dir" $rule 2 1,2,3,4,-5 0.2 ||
      { cat "$dir/server.log"; exit 1; }
    grep -h "values dropped" "$dir/server.log" | head -1
  done
done
echo "robust rules: every run equals NumPy"
