#!/usr/bin/env bash
# Sharded clients over real processes on loopback: a client of N ranks, each
# a `fedcaf client` with the same client id and `--set shard.rank=R --set
# shard.ranks=N`, each moving only its shard (torch.chunk's dim-0 rows of
# every tensor).
#
#   exact    window mode (and ram, disk), dummy trainer with add_by_index,
#            3 rounds: Client1 as 2 ranks and Client2 as 3 ranks end with a
#            model byte-identical (cmp) to the run with both unsharded; the
#            report counts 2 contributors a round; the ranks of a client
#            fetched and sent the model's bytes once between them.
#   relay    a sharded client under a (ram-mode) relay: the tree's models
#            equal the flat run's, byte for byte; a window-mode relay
#            refuses ranks, saying why.
#   refused  declared slices with a gap or an overlap (the message names the
#            tensor and the rows), a rank count that differs from its
#            client's, a rank already connected, an unsharded Hello.
#   fault    a rank SIGKILLed mid-upload and restarted under its rank: its
#            client sits the round out (the round completes with the other
#            client), and the next round includes it; the same with the rank
#            back only after its grace (dropped, partial_updates: keep).
#
#   tests/integration/sharded_test.sh build/fedcaf
set -u
fedcaf=$1
. "$(dirname "$0")/lib.sh"

child() { pgrep -P "$1" | head -1; } # the fedcaf under a `timeout`

# server NAME PORT MODE [SCHEDULER_KWARGS]: a server config.
server() {
  cat > "$out/$1.yaml" <<EOF
server_configs:
  num_clients: 2
  num_global_epochs: 3
  memory_mode: $3
  storage_dir: $out
  scheduler_kwargs: {round_deadline_s: 60${4:+, $4}}
  comm_configs:
    grpc_configs: {server_uri: 127.0.0.1:$2}
    stream_configs: {chunk_bytes: 4096, window: 3, heartbeat_s: 0.5, connection_timeout_s: 5}
client_configs:
  train_configs: {trainer: dummy, add: 0.5, add_by_index: true}
  model_configs: {name: llama, preset: llama-tiny, dtype: float32}
EOF
}

# client NAME ID INDEX PORT: a client's own config.
client() {
  cat > "$out/$1.yaml" <<EOF
client_id: $2
data_configs:
  dataset_kwargs: {num_clients: 2, client_id: $3}
comm_configs:
  grpc_configs: {server_uri: 127.0.0.1:$4}
  stream_configs: {heartbeat_s: 0.5, reconnect_grace_s: 5}
EOF
}

# run NAME MODE RANKS1 RANKS2 [SERVER ARGS]: a server and its clients,
# Client1 as RANKS1 ranks (1: unsharded), Client2 as RANKS2; models in
# NAME-{round}.
run() {
  local name=$1 mode=$2 ranks1=$3 ranks2=$4 port rc=0 r c n procs=()
  shift 4
  port=$(free_port)
  server "$name" "$port" "$mode"
  client "$name-c1" Client1 0 "$port"
  client "$name-c2" Client2 1 "$port"
  timeout 120 "$fedcaf" server -c "$out/$name.yaml" --report "$out/$name.json" \
    --set "server_configs.save_global_model=$out/$name-{round}.safetensors" "$@" \
    > "$out/$name.log" 2>&1 & pids+=($!); procs+=($!)
  wait_for "$out/$name.log" "listening on" 30 || { fail "$name: no server"; return; }
  for c in 1 2; do
    n=$ranks1; [ $c = 2 ] && n=$ranks2
    if [ "$n" = 1 ]; then
      timeout 120 "$fedcaf" client -c "$out/$name-c$c.yaml" \
        --report "$out/$name-c$c.json" > "$out/$name-c$c.log" 2>&1 & pids+=($!); procs+=($!)
    else
      for r in $(seq 0 $(( n - 1 ))); do
        timeout 120 "$fedcaf" client -c "$out/$name-c$c.yaml" \
          --set shard.rank=$r --set shard.ranks=$n \
          --report "$out/$name-c$c-r$r.json" > "$out/$name-c$c-r$r.log" 2>&1 & pids+=($!); procs+=($!)
      done
    fi
  done
  for p in "${procs[@]}"; do wait "$p" || rc=$?; done
  [ $rc -eq 0 ] || { fail "$name: a process exited $rc"; tail -n 5 "$out/$name"*.log; }
}

# -- exact ----------------------------------------------------------------------
for mode in window ram disk; do
  run "whole-$mode" "$mode" 1 1
  run "shard-$mode" "$mode" 2 3
  same=1
  for r in 1 2 3; do
    cmp -s "$out/whole-$mode-$r.safetensors" "$out/shard-$mode-$r.safetensors" || same=0
  done
  if [ -s "$out/shard-$mode-3.safetensors" ] && [ $same = 1 ] &&
     ! cmp -s "$out/shard-$mode-1.safetensors" "$out/shard-$mode-3.safetensors"; then
    pass "$mode: Client1 as 2 ranks and Client2 as 3: the models of rounds 1-3 are byte-identical to the unsharded run's"
  else
    fail "$mode: the sharded run's models differ from the unsharded run's"
  fi
done
# norm_bound: each rank declares the norm of its part, the server takes the
# client's as the root of their squares summed and scales the whole update.
nb=(--set server_configs.aggregator_kwargs.norm_bound=1.0)
run whole-nb ram 1 1 "${nb[@]}"
run shard-nb ram 2 3 "${nb[@]}"
if cmp -s "$out/whole-nb-3.safetensors" "$out/shard-nb-3.safetensors" &&
   ! cmp -s "$out/whole-nb-3.safetensors" "$out/whole-ram-3.safetensors"; then
  pass "norm_bound: the ranks' declared norms make the client's; the models equal the unsharded run's (scaled)"
else
  fail "norm_bound: the sharded run's model differs (or nothing was scaled)"
fi
if "$py" - "$out" <<'PY'
import json, sys
out = sys.argv[1]
s = json.load(open(f"{out}/shard-window.json"))
w = json.load(open(f"{out}/whole-window.json"))
assert s["ok"] and len(s["rounds"]) == 3, s.get("failure")
for r in s["rounds"]:
    assert r["clients"] == 2 and sorted(r["contributors"]) == ["Client1", "Client2"], r
whole = json.load(open(f"{out}/whole-window-c1.json"))
for c, ranks in (("c1", 2), ("c2", 3)):
    reps = [json.load(open(f"{out}/shard-window-{c}-r{r}.json")) for r in range(ranks)]
    for key in ("bytes_received", "bytes_sent"):
        each = [x[key] for x in reps]
        print(c, key, "by rank", each, "unsharded", whole[key])
        assert abs(sum(each) - whole[key]) <= 0.01 * whole[key], (each, whole[key])
        assert max(each) <= whole[key] * (1.0 / ranks + 0.1), each
PY
then pass "each round counts 2 contributors; the ranks of a client moved the model's bytes once between them"
else fail "the reports"; fi

# -- relay ----------------------------------------------------------------------
# The root in window mode with relay R1 (ram mode) over Client1 as 2 ranks
# and Client2; against the flat window run above (Client1, Client2 whole).
root_port=$(free_port); relay_port=$(free_port)
server root "$root_port" window
sed -i 's/^  num_clients: 2$/  num_clients: 1\n  relays: {R1: 2}/' "$out/root.yaml"
relay_file() { # NAME MODE
  cat > "$out/$1.yaml" <<EOF
client_id: R1
comm_configs:
  grpc_configs: {server_uri: 127.0.0.1:$root_port}
  stream_configs: {heartbeat_s: 0.5, reconnect_grace_s: 30}
server_configs:
  num_clients: 2
  memory_mode: $2
  storage_dir: $out
  scheduler_kwargs: {round_deadline_s: 30, min_clients: 1, on_deadline: wait}
  comm_configs:
    grpc_configs: {server_uri: 127.0.0.1:$relay_port}
    stream_configs: {chunk_bytes: 2048, window: 2, heartbeat_s: 0.5}
EOF
}
relay_file R1 ram
client tree-c1 Client1 0 "$relay_port"
client tree-c2 Client2 1 "$relay_port"
procs=()
timeout 120 "$fedcaf" server -c "$out/root.yaml" --report "$out/root.json" \
  --set "server_configs.save_global_model=$out/tree-{round}.safetensors" \
  > "$out/root.log" 2>&1 & pids+=($!); procs+=($!)
wait_for "$out/root.log" "listening on" 30 || fail "relay: no root"
timeout 120 "$fedcaf" relay -c "$out/R1.yaml" > "$out/R1.log" 2>&1 & pids+=($!); procs+=($!)
wait_for "$out/R1.log" "listening on" 30 || fail "relay: R1 did not start: $(tail -n 2 "$out/R1.log")"
for r in 0 1; do
  timeout 120 "$fedcaf" client -c "$out/tree-c1.yaml" --set shard.rank=$r --set shard.ranks=2 \
    > "$out/tree-r$r.log" 2>&1 & pids+=($!); procs+=($!)
done
timeout 120 "$fedcaf" client -c "$out/tree-c2.yaml" > "$out/tree-c2.log" 2>&1 & pids+=($!); procs+=($!)
rc=0; for p in "${procs[@]}"; do wait "$p" || rc=$?; done
same=1
for r in 1 2 3; do cmp -s "$out/whole-window-$r.safetensors" "$out/tree-$r.safetensors" || same=0; done
if [ $rc -eq 0 ] && [ $same = 1 ]; then
  pass "a sharded client under a relay: the tree's models of rounds 1-3 equal the flat run's"
else
  fail "relay: rc $rc, same $same"; tail -n 5 "$out/root.log" "$out/R1.log"
fi
# A window-mode relay refuses a rank, saying why.
root_port=$(free_port); relay_port=$(free_port)
server root2 "$root_port" window
sed -i 's/^  num_clients: 2$/  num_clients: 1\n  relays: {R1: 2}/' "$out/root2.yaml"
relay_file R1w window
client w-c1 Client1 0 "$relay_port"
timeout 60 "$fedcaf" server -c "$out/root2.yaml" > "$out/root2.log" 2>&1 & pids+=($!); root2=$!
wait_for "$out/root2.log" "listening on" 30 || fail "relay: no second root"
timeout 60 "$fedcaf" relay -c "$out/R1w.yaml" > "$out/R1w.log" 2>&1 & pids+=($!); r1w=$!
wait_for "$out/R1w.log" "listening on" 30 || fail "relay: R1 (window) did not start"
timeout 20 "$fedcaf" client -c "$out/w-c1.yaml" --set shard.rank=0 --set shard.ranks=2 > "$out/w-r0.log" 2>&1
grep -q "sharded clients do not run under a window-mode relay" "$out/w-r0.log" &&
  pass "a window-mode relay refuses a rank, saying why" || fail "window relay: $(tail -n 2 "$out/w-r0.log")"
kill "$(child $r1w)" "$(child $root2)" 2> /dev/null; wait $r1w $root2 2> /dev/null

# -- refused --------------------------------------------------------------------
port=$(free_port)
server refused "$port" window
client refused-c1 Client1 0 "$port"
timeout 60 "$fedcaf" server -c "$out/refused.yaml" > "$out/refused.log" 2>&1 & pids+=($!)
wait_for "$out/refused.log" "listening on" 30 || fail "refused: no server"
timeout 60 "$fedcaf" client -c "$out/refused-c1.yaml" --set shard.rank=0 --set shard.ranks=2 \
  > "$out/r0.log" 2>&1 & pids+=($!); r0=$!
wait_for "$out/r0.log" "registered" 20 || fail "rank 0 did not register"
timeout 20 "$fedcaf" client -c "$out/refused-c1.yaml" --set shard.rank=0 --set shard.ranks=2 \
  --set comm_configs.stream_configs.reconnect_grace_s=1 > "$out/dup.log" 2>&1
grep -q "already registered" "$out/dup.log" && pass "a second rank 0 while rank 0 is connected is refused" ||
  fail "a duplicate rank: $(tail -n 2 "$out/dup.log")"
timeout 20 "$fedcaf" client -c "$out/refused-c1.yaml" --set shard.rank=1 --set shard.ranks=3 \
  > "$out/recount.log" 2>&1
grep -q "registered with 2 ranks; this Hello says 3" "$out/recount.log" &&
  pass "a rank of another rank count is refused" || fail "recount: $(tail -n 2 "$out/recount.log")"
timeout 20 "$fedcaf" client -c "$out/refused-c1.yaml" > "$out/whole.log" 2>&1
grep -q "registered as a sharded client" "$out/whole.log" &&
  pass "an unsharded Hello for a sharded client is refused" || fail "whole: $(tail -n 2 "$out/whole.log")"
kill "$(child $r0)" 2> /dev/null; wait $r0 2> /dev/null
# Declared slices (a tensor-parallel layout): rank 0 holds the first half
# of every tensor's rows, but of one only rows 0-20; rank 1 the second
# halves and of that one rows 21-128 (a gap), or 10-128 (an overlap).
t=model.layers.0.mlp.gate_proj.weight
slices() { # RANK LOW HIGH: the YAML map of the rows rank RANK declares
  "$py" - "$out/shard-window-1.safetensors" "$1" "$t" "$2" "$3" <<'PY'
import json, struct, sys
path, rank, t, low, high = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
with open(path, "rb") as f:
    header = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
rows = {k: (v["shape"] or [1])[0] for k, v in header.items() if k != "__metadata__"}
out = {k: ([0, n // 2] if rank == 0 else [n // 2, n]) for k, n in rows.items()}
out[t] = [int(low), int(high)]
print("{" + ", ".join(f"{k}: [{a}, {b}]" for k, (a, b) in out.items()) + "}")
PY
}
port=$(free_port)
server slices "$port" window
client s-c1 Client1 0 "$port"
timeout 60 "$fedcaf" server -c "$out/slices.yaml" > "$out/slices.log" 2>&1 & pids+=($!)
wait_for "$out/slices.log" "listening on" 30 || fail "slices: no server"
timeout 60 "$fedcaf" client -c "$out/s-c1.yaml" --set shard.rank=0 --set shard.ranks=2 \
  --set "shard.slices=$(slices 0 0 20)" > "$out/s0.log" 2>&1 & pids+=($!); s0=$!
wait_for "$out/s0.log" "registered" 20 || fail "slices: rank 0 did not register: $(tail -n 2 "$out/s0.log")"
timeout 20 "$fedcaf" client -c "$out/s-c1.yaml" --set shard.rank=1 --set shard.ranks=2 \
  --set "shard.slices=$(slices 1 21 128)" > "$out/s1.log" 2>&1
grep -q "shard slices leave a gap: no rank holds rows \[20, 21) of tensor '$t'" "$out/s1.log" &&
  pass "declared slices with a gap are refused, naming the tensor and the rows" ||
  fail "gap: $(tail -n 2 "$out/s1.log")"
timeout 20 "$fedcaf" client -c "$out/s-c1.yaml" --set shard.rank=1 --set shard.ranks=2 \
  --set "shard.slices=$(slices 1 10 128)" > "$out/s2.log" 2>&1
grep -q "shard slices overlap: ranks 0 and 1 both hold rows \[10, 20) of tensor '$t'" "$out/s2.log" &&
  pass "declared slices that overlap are refused, naming the tensor and the rows" ||
  fail "overlap: $(tail -n 2 "$out/s2.log")"
kill "$(child $s0)" 2> /dev/null; wait $s0 2> /dev/null

# -- fault ----------------------------------------------------------------------
# Client2 registers and is stopped (SIGSTOP) before the round: in window mode
# no position settles without it, so Client1's ranks stall mid-upload. Rank
# 1 is SIGKILLed there and started again under its rank; Client2 goes on.
port=$(free_port)
server fault "$port" window "min_clients: 1"
client fault-c1 Client1 0 "$port"
client fault-c2 Client2 1 "$port"
timeout 120 "$fedcaf" server -c "$out/fault.yaml" --report "$out/fault.json" \
  > "$out/fault.log" 2>&1 & pids+=($!); srv=$!
wait_for "$out/fault.log" "listening on" 30 || fail "fault: no server"
timeout 120 "$fedcaf" client -c "$out/fault-c2.yaml" > "$out/f2.log" 2>&1 & pids+=($!); c2=$!
wait_for "$out/f2.log" "registered" 20 || fail "fault: Client2 did not register"
kill -STOP "$(child $c2)"
timeout 120 "$fedcaf" client -c "$out/fault-c1.yaml" --set shard.rank=0 --set shard.ranks=2 \
  > "$out/f-r0.log" 2>&1 & pids+=($!); r0=$!
timeout 120 "$fedcaf" client -c "$out/fault-c1.yaml" --set shard.rank=1 --set shard.ranks=2 \
  > "$out/f-r1.log" 2>&1 & pids+=($!); r1=$!
wait_for "$out/f-r1.log" "round 1: trained" 20 || fail "fault: rank 1 did not train"
sleep 1
kill -9 "$(child $r1)"; wait $r1 2> /dev/null
timeout 120 "$fedcaf" client -c "$out/fault-c1.yaml" --set shard.rank=1 --set shard.ranks=2 \
  > "$out/f-r1b.log" 2>&1 & pids+=($!); r1b=$!
wait_for "$out/fault.log" "rank 1 is back" 20 || fail "fault: rank 1 did not come back"
kill -CONT "$(child $c2)"
rc=0; for p in $srv $c2 $r0 $r1b; do wait $p || rc=$?; done
[ $rc -eq 0 ] || fail "fault: a process exited $rc: $(tail -n 3 "$out/fault.log")"
if "$py" - "$out/fault.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
assert s["ok"], s.get("failure")
got = [sorted(r["contributors"]) for r in s["rounds"]]
print("contributors by round:", got)
assert got == [["Client2"], ["Client1", "Client2"], ["Client1", "Client2"]], got
PY
then pass "a rank killed mid-upload: its client sits round 1 out, the round completes with Client2, and rounds 2-3 include it"
else fail "fault: the report"; cat "$out/fault.log"; fi
# The same with rank 1 not back within the grace (2 s) and partial_updates
# keep: the rank is dropped, its client with it (its delivered chunks kept);
# rank 1 started again brings its client back, for rounds 2 and 3.
port=$(free_port)
server drop "$port" window "min_clients: 1"
sed -i 's/heartbeat_s: 0.5, connection_timeout_s: 5}/heartbeat_s: 0.5, connection_timeout_s: 5, reconnect_grace_s: 2}\n  aggregator_kwargs: {partial_updates: keep}/' "$out/drop.yaml"
client drop-c1 Client1 0 "$port"
client drop-c2 Client2 1 "$port"
timeout 120 "$fedcaf" server -c "$out/drop.yaml" --report "$out/drop.json" \
  > "$out/drop.log" 2>&1 & pids+=($!); srv=$!
wait_for "$out/drop.log" "listening on" 30 || fail "drop: no server"
timeout 120 "$fedcaf" client -c "$out/drop-c2.yaml" > "$out/d2.log" 2>&1 & pids+=($!); c2=$!
wait_for "$out/d2.log" "registered" 20 || fail "drop: Client2 did not register"
kill -STOP "$(child $c2)"
timeout 120 "$fedcaf" client -c "$out/drop-c1.yaml" --set shard.rank=0 --set shard.ranks=2 \
  > "$out/d-r0.log" 2>&1 & pids+=($!); r0=$!
timeout 120 "$fedcaf" client -c "$out/drop-c1.yaml" --set shard.rank=1 --set shard.ranks=2 \
  > "$out/d-r1.log" 2>&1 & pids+=($!); r1=$!
wait_for "$out/d-r1.log" "round 1: trained" 20 || fail "drop: rank 1 did not train"
sleep 1
kill -9 "$(child $r1)"; wait $r1 2> /dev/null
wait_for "$out/drop.log" "dropped Client1" 20 || fail "drop: Client1 was not dropped: $(tail -n 3 "$out/drop.log")"
timeout 120 "$fedcaf" client -c "$out/drop-c1.yaml" --set shard.rank=1 --set shard.ranks=2 \
  > "$out/d-r1b.log" 2>&1 & pids+=($!); r1b=$!
wait_for "$out/d-r1b.log" "registered" 20 || fail "drop: rank 1 did not register again"
sleep 0.5
kill -CONT "$(child $c2)"
rc=0; for p in $srv $c2 $r0 $r1b; do wait $p || rc=$?; done
[ $rc -eq 0 ] || fail "drop: a process exited $rc: $(tail -n 3 "$out/drop.log")"
if "$py" - "$out/drop.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
assert s["ok"], s.get("failure")
got = [sorted(r["contributors"]) for r in s["rounds"]]
print("contributors by round:", got)
assert got[1:] == [["Client1", "Client2"], ["Client1", "Client2"]], got
assert "Client2" in got[0], got
PY
then pass "a rank killed and dropped: its client leaves round 1 (partial_updates: keep), the round completes, and its client is back for rounds 2-3"
else fail "drop: the report"; cat "$out/drop.log"; fi
finish
