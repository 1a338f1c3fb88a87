#!/usr/bin/env bash
# Aggregators in a tree (fedcaf relay), real processes over loopback:
#
#   exact    a 3-level tree: the root, relays RA and RB under it, RA1 RA2
#            under RA and RB1 RB2 under RB, two clients under each of those
#            (8 in all, dummy trainer, add_by_index: integer-valued deltas).
#            3 rounds end with a model byte-identical to flat FedAvg of the
#            same 8 clients on one server. The model's values are multiples
#            of 1/8, so every partial sum is exact in float32 (the bound for
#            other values is in docs/design.md). The root runs in window
#            mode, RA and RB1 in window mode, RA2 in disk mode, the rest
#            in ram mode.
#   weight   a relay's offer is one vote of its children's weight: the root
#            report names 2 contributors per round, each partial sum
#            weighing 4; a client that offers a partial sum, and a relay
#            that claims more clients than the root allows, are refused.
#   lost     RB1 (a relay under RB) SIGKILLed while its clients upload: RB's
#            deadline ends the round with RB2's group, the root's round
#            completes, and the run goes on.
#   short    a relay short of its min_clients sits its parent's rounds out
#            (a sum of weight 0) instead of ending, and rejoins.
#   one      the same in one process: simulate with simulated_relays, its
#            models byte-identical to the flat run's; ram mode with noisy
#            updates (relays' int32 sums on the root's grid), in one process
#            and over sockets, byte-identical to flat; sampled, disk mode;
#            int8 downloads and uploads through the relays; DP-FedAvg
#            (clipped at the clients, noise at the root) as flat.
#   secagg   SecAgg+ within a relay's group: its clients mask, the relay
#            unmasks its group's sum and sends it up; the root's models
#            within the fixed point's bound of the exact mean, as one
#            SecAgg+ server's are.
#   refused  a root with relays and a rule that does not decompose into
#            sums (MedianAggregator, FedAsync, secure aggregation) stops at
#            load with one line naming the key; a relay with its own rule
#            is refused the same way.
#
#   tests/integration/tree_test.sh build/fedcaf [python3]
set -u
fedcaf=$1
py=${2:-/usr/bin/python3}
out=$(mktemp -d)
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2> /dev/null; done
  wait 2> /dev/null
  [ -n "${FEDCAF_KEEP:-}" ] && echo "kept $out" || rm -rf "$out"
}
trap cleanup EXIT
passed=0; failed=0
pass() { echo "ok: $1"; passed=$((passed + 1)); }
failures=""
fail() { echo "FAIL: $1"; failed=$((failed + 1)); failures+="  FAIL: ${1:0:300}"$'\n'; }
# The checks' reader of a safetensors file: each tensor as float64.
cat > "$out/tensors.py" <<'PY'
import json, struct
import numpy as np
def load(p):
    b = open(p, "rb").read(); n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n]); d = b[8 + n:]
    return {k: np.frombuffer(d[v["data_offsets"][0]:v["data_offsets"][1]],
                             np.float64 if v["dtype"] == "F64" else np.float32).astype(np.float64)
            for k, v in h.items() if k != "__metadata__"}
PY

"$py" - "$out/init.safetensors" <<'PY'
import json, struct, sys
import numpy as np
rng = np.random.default_rng(7)
tensors = {"a.weight": (64, 33), "a.bias": (64,), "b.weight": (10, 64)}
header, blobs, at = {}, [], 0
for name, shape in tensors.items():
    x = (rng.integers(-512, 512, size=shape) / 8).astype(np.float32)
    b = x.tobytes()
    header[name] = {"dtype": "F32", "shape": list(shape), "data_offsets": [at, at + len(b)]}
    blobs.append(b); at += len(b)
h = json.dumps(header).encode()
h += b" " * (-len(h) % 8)
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
PY

base=$(( 20000 + RANDOM % 20000 ))
root_port=$base
declare -A port=([RA]=$((base + 1)) [RB]=$((base + 2)) [RA1]=$((base + 3))
                 [RA2]=$((base + 4)) [RB1]=$((base + 5)) [RB2]=$((base + 6))
                 [GA]=$((base + 7)) [GB]=$((base + 8)))

client_configs="client_configs:
  train_configs: {trainer: dummy, add: 0.5, add_by_index: true}
  model_configs: {name: safetensors, path: $out/init.safetensors}"

# root NAME NUM_CLIENTS RELAYS(yaml map or {}) [MORE]: a root server config.
root() {
  cat > "$out/$1.yaml" <<EOF
server_configs:
  num_clients: $2
  num_global_epochs: 3
  memory_mode: window
  relays: $3
  scheduler_kwargs: {round_deadline_s: 60}
  comm_configs:
    grpc_configs: {server_uri: 127.0.0.1:$root_port}
    stream_configs: {chunk_bytes: 4096, window: 2, heartbeat_s: 0.5}
$4
$client_configs
EOF
}

# relay NAME PARENT_PORT NUM_CLIENTS RELAYS MODE
relay() {
  cat > "$out/$1.yaml" <<EOF
client_id: $1
comm_configs:
  grpc_configs: {server_uri: 127.0.0.1:$2}
  stream_configs: {heartbeat_s: 0.5, reconnect_grace_s: 60}
server_configs:
  num_clients: $3
  memory_mode: $5
  storage_dir: $out
  relays: $4
  scheduler_kwargs: {round_deadline_s: 20, min_clients: 1, on_deadline: wait}
  comm_configs:
    grpc_configs: {server_uri: 127.0.0.1:${port[$1]}}
    stream_configs: {chunk_bytes: 2048, window: 2, heartbeat_s: 0.5}
EOF
}

# client I PORT
client() {
  cat > "$out/C$1.yaml" <<EOF
client_id: C$1
data_configs:
  dataset_kwargs: {num_clients: 8, client_id: $(( $1 - 1 ))}
comm_configs:
  grpc_configs: {server_uri: 127.0.0.1:$2}
  stream_configs: {heartbeat_s: 0.5, reconnect_grace_s: 60}
EOF
}

same_as_flat() { # NAME: its models of rounds 1-3 equal the flat run's
  local r
  [ -s "$out/$1-3.safetensors" ] || return 1
  for r in 1 2 3; do
    cmp -s "$out/flat-$r.safetensors" "$out/$1-$r.safetensors" || return 1
  done
}

start() { # NAME LOG COMMAND...: in the background, its pid in pid_of[NAME]
  local name=$1 log=$2; shift 2
  timeout 180 "$@" > "$log" 2>&1 &
  pid_of[$name]=$!; pids+=($!)
}
declare -A pid_of
until_in() { # FILE TEXT: waits for TEXT in FILE (at most 60 s)
  local t
  for t in $(seq 600); do grep -q "$2" "$1" && return 0; sleep 0.1; done
  return 1
}

# -- the flat run ---------------------------------------------------------------
root flat 8 "{}" "  save_global_model: $out/flat-{round}.safetensors"
for i in 1 2 3 4 5 6 7 8; do client "$i" "$root_port"; done
start root "$out/flat.log" "$fedcaf" server -c "$out/flat.yaml" --report "$out/flat.json"
for i in 1 2 3 4 5 6 7 8; do
  start "C$i" "$out/flat_C$i.log" "$fedcaf" client -c "$out/C$i.yaml"
done
wait "${pid_of[root]}" || fail "flat: the server failed: $(tail -n 2 "$out/flat.log")"
for i in 1 2 3 4 5 6 7 8; do wait "${pid_of[C$i]}"; done

# -- the tree -------------------------------------------------------------------
root tree 2 "{RA: 4, RB: 4}" "  save_global_model: $out/tree-{round}.safetensors"
relay RA "$root_port" 2 "{RA1: 2, RA2: 2}" window
relay RB "$root_port" 2 "{RB1: 2, RB2: 2}" ram
relay RA1 "${port[RA]}" 2 "{}" ram
relay RA2 "${port[RA]}" 2 "{}" disk
relay RB1 "${port[RB]}" 2 "{}" window
relay RB2 "${port[RB]}" 2 "{}" ram
under=(RA1 RA1 RA2 RA2 RB1 RB1 RB2 RB2)
# Started as deploy/run-hosts.sh starts a tree: one hosts file, every line
# on this machine (host `local`).
{
  echo "server local $out/tree.yaml"
  for r in RA RB RA1 RA2 RB1 RB2; do echo "relay local $out/$r.yaml"; done
  for i in 1 2 3 4 5 6 7 8; do echo "client local $out/C$i.yaml"; done
} > "$out/tree.hosts"
for i in 1 2 3 4 5 6 7 8; do client "$i" "${port[${under[$((i - 1))]}]}"; done
if FEDCAF="$fedcaf" LOG_DIR="$out/hosts" timeout 180 \
    "$(dirname "$0")/../../deploy/run-hosts.sh" "$out/tree.hosts" > "$out/hosts.log" 2>&1; then
  pass "tree: deploy/run-hosts.sh ran the root, 2 relays of 2 relays of 2 clients from one hosts file, every process exiting 0"
else
  fail "tree: run-hosts.sh: $(tail -n 1 "$out/hosts.log"); the root: $(tail -n 3 "$out/hosts/server.log")"
fi
if same_as_flat tree; then
  pass "exact: every round's model of the 3-level tree is byte-identical to flat FedAvg of the same 8 clients"
else
  fail "exact: the tree's models differ from the flat run's"
  "$py" - "$out" <<'PY'
import sys
sys.path.insert(0, "tests/integration")
PY
fi
"$py" - "$out" <<'PY' && pass "weight: the root's rounds name 2 contributors (RA, RB), each a partial sum of 4 clients" || fail "weight: the root's report"
import json, sys
out = sys.argv[1]
r = json.load(open(f"{out}/hosts/server.json"))
assert r["status"] == "completed", r["status"]
assert [x["round"] for x in r["rounds"]] == [1, 2, 3], r["rounds"]
for x in r["rounds"]:
    assert x["clients"] == 2, x
    assert x["relay_weights"] == {"RA": 4, "RB": 4}, x["relay_weights"]
for name in ("relay1", "relay2"):  # RA, RB: the hosts file's first relays
    rr = json.load(open(f"{out}/hosts/{name}.json"))
    assert [x["clients"] for x in rr["rounds"]] == [2, 2, 2], (name, rr["rounds"])
PY

# -- lost: a relay and a client killed mid-round -------------------------------
# The root (2 relays, min_clients 1, a 15 s deadline) and RA, RB (8 s) with
# two clients each, an 8 MiB model sent up in 16 KiB chunks, one at a time. As RA reports round 2 trained (its sum
# made, its offer and upload under way) it is SIGKILLed, and so is C3
# (under RB); RA is started again at once. Round 2 ends at the root's
# deadline with RB's group alone, RB's round with C4 alone (RB's deadline);
# a later round has RA's group again.
cat > "$out/lost.yaml" <<EOF
server_configs:
  num_clients: 2
  num_global_epochs: 5
  relays: {RA: 2, RB: 2}
  scheduler_kwargs: {round_deadline_s: 15, min_clients: 1, on_deadline: wait}
  comm_configs:
    grpc_configs: {server_uri: 127.0.0.1:$root_port}
    stream_configs: {chunk_bytes: 16384, window: 1, heartbeat_s: 0.5, reconnect_grace_s: 20}
client_configs:
  train_configs: {trainer: dummy, add: 0.5, add_by_index: true}
  model_configs: {name: synthetic, num_tensors: 8, total_bytes: 8388608, seed: 3}
EOF
relay RA "$root_port" 2 "{}" window
relay RB "$root_port" 2 "{}" ram
sed -i 's/round_deadline_s: 20/round_deadline_s: 8/; s/chunk_bytes: 2048, window: 2/chunk_bytes: 1048576, window: 4/' "$out/RA.yaml" "$out/RB.yaml"
start root "$out/lost.log" "$fedcaf" server -c "$out/lost.yaml" --report "$out/lost.json"
start RA "$out/lost_RA.log" "$fedcaf" relay -c "$out/RA.yaml"
start RB "$out/lost_RB.log" "$fedcaf" relay -c "$out/RB.yaml" --report "$out/lost_RB.json"
lost_under=(RA RA RB RB)
for i in 1 2 3 4; do
  client "$i" "${port[${lost_under[$((i - 1))]}]}"
  start "C$i" "$out/lost_C$i.log" "$fedcaf" client -c "$out/C$i.yaml"
done
for t in $(seq 600); do
  grep -q "RA: round 2: trained" "$out/lost_RA.log" && break
  sleep 0.02
done
# pid_of holds timeout's pid: the fedcaf processes are its children.
kill -9 $(pgrep -P "${pid_of[RA]}") $(pgrep -P "${pid_of[C3]}") 2> /dev/null
start RA "$out/lost_RA2.log" "$fedcaf" relay -c "$out/RA.yaml"
if wait "${pid_of[root]}"; then
  pass "lost: the root completed 5 rounds with a relay and a client killed mid-round"
else
  fail "lost: the root failed: $(tail -n 3 "$out/lost.log")"
fi
for p in RA RB C1 C2 C4; do wait "${pid_of[$p]}"; done
"$py" - "$out" <<'PY' && pass "lost: RA's round-2 sum is taken whole or not at all (and RB's round goes on without C3); a later round has both relays again" || fail "lost: the reports"
import json, sys
out = sys.argv[1]
r = json.load(open(f"{out}/lost.json"))
assert r["status"] == "completed", r["status"]
clients = [x["clients"] for x in r["rounds"]]
assert len(clients) == 5 and clients[0] == 2, clients
assert 2 in clients[2:], clients
log = open(f"{out}/lost.log").read()
# Cut mid-upload, the restarted RA's new sum is refused with the old one's
# chunks (never resumed: the two are different updates); delivered whole
# before the kill, the first stays and the second is refused.
cut = "nor the rest of this one, this round" in log
whole = "whole already; another one is not taken" in log
# Killed before its first offer reached the root (a slow machine): the
# restarted RA's sum is its only one, taken whole or left to the deadline.
if cut or whole:
    assert clients[1] == (1 if cut else 2), (clients, cut)
else:
    assert clients[1] in (1, 2), clients
print("   RA killed " + ("mid-upload: round 2 went on without its group"
                        if cut else "after its upload: its first sum stayed"
                        if whole else "before its offer reached the root"))
rb = json.load(open(f"{out}/lost_RB.json"))
rb_clients = [x["clients"] for x in rb["rounds"]]
assert rb_clients[0] == 2 and 1 in rb_clients[1:], rb_clients
print(f"   root rounds' contributors {clients}; RB's rounds' clients {rb_clients}")
PY

# -- pace: children that stall or milk a window relay's download -----------------
# A window-mode relay RP (5 children, min_clients 2, idle timeout 4 s) with
# two honest children and three hostile ones (hostile_peer): X fetches
# chunk 0 again and again and nothing else; Z fetches one new chunk every
# 3 s (progress, under the idle timeout, holding its siblings back); Y
# fetches every chunk, then all of them again and again (each gone from
# the relay's cache: fetched again from the root). The relay's download
# goes on without X and Z once each has held the others back for the idle
# timeout; Y is refused past a model of refetches; the root sends RP at
# most 3 x the model (its download and two models of refetches); the
# round has the honest two.
hp=${HOSTILE_PEER:-$(dirname "$fedcaf")/tests/hostile_peer}
if [ -x "$hp" ]; then
  pport=$((base + 11))
  port[RP]=$pport
  root pace 1 "{RP: 3}" ""
  sed -i 's/num_global_epochs: 3/num_global_epochs: 1/' "$out/pace.yaml"
  relay RP "$root_port" 5 "{}" window
  sed -i 's/{round_deadline_s: 20, min_clients: 1, on_deadline: wait}/{round_deadline_s: 40, min_clients: 2}/; s/chunk_bytes: 2048, window: 2,/chunk_bytes: 1024, window: 2, idle_timeout_s: 4,/' "$out/RP.yaml"
  grep -q "idle_timeout_s: 4" "$out/RP.yaml" || fail "pace: RP's config"
  start root "$out/pace.log" "$fedcaf" server -c "$out/pace.yaml" --report "$out/pace.json"
  start RP "$out/pace_RP.log" "$fedcaf" relay -c "$out/RP.yaml" --report "$out/pace_RP.json"
  until_in "$out/pace_RP.log" "listening on" || fail "pace: RP does not listen"
  timeout 120 "$hp" --port "$pport" --registered --id X --token x --attack pace_stall \
    --drip-s 1 --timeout-s 100 > "$out/pace_X.log" 2>&1 &
  pids+=($!)
  timeout 120 "$hp" --port "$pport" --registered --id Z --token z --attack drip_new \
    --drip-s 3 --timeout-s 100 > "$out/pace_Z.log" 2>&1 &
  pids+=($!)
  timeout 120 "$hp" --port "$pport" --registered --id Y --token y --attack refetch_loop \
    --drip-s 0.02 --timeout-s 100 > "$out/pace_Y.log" 2>&1 &
  pids+=($!)
  sleep 0.5
  for i in 1 2; do
    client "$i" "$pport"
    start "C$i" "$out/pace_C$i.log" "$fedcaf" client -c "$out/C$i.yaml"
  done
  wait "${pid_of[root]}" || fail "pace: the root failed: $(tail -n 3 "$out/pace.log"); RP: $(tail -n 2 "$out/pace_RP.log")"
  for n in RP C1 C2; do wait "${pid_of[$n]}" || fail "pace: $n exited non-zero: $(tail -n 2 "$out/pace_$n.log")"; done
  "$py" - "$out" <<'PY' && pass "pace: a child fetching one chunk again and again, and one dripping new chunks, held a window relay's download only for the idle timeout; a refetch loop was refused past a model; the root sent the relay at most 3 x the model; the round had both honest children" || fail "pace: the reports"
import json, struct, sys
out = sys.argv[1]
r = json.load(open(f"{out}/pace_RP.json"))
clients = [x["clients"] for x in r["rounds"]]
assert clients == [2], clients
log = open(f"{out}/pace_RP.log").read()
assert "X fetched nothing of round 1" in log, "X was not let go"
assert "Z fetched nothing of round 1, or held its siblings back" in log, "Z was not let go"
assert "C1 fetched nothing" not in log and "C2 fetched nothing" not in log, "an honest child was let go"
y = open(f"{out}/pace_Y.log").read()
# Refused past its model of refetches, or once the chunks it loops over
# hold the round's sums (every participant has them).
assert ("too_many_requests" in y and "gone from the relay's cache" in y) or \
    "holds the round's sums already" in y, y[-400:]
with open(f"{out}/init.safetensors", "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    model = len(f.read()) - n
root = json.load(open(f"{out}/pace.json"))
down = root["rounds"][0]["bytes_down"]
assert down <= 3 * model, (down, model)
print(f"   relay's round: {clients[0]} clients; X and Z let go after the idle timeout; "
      f"the root sent RP {down / model:.2f} x the model")
PY
else
  echo "skip: pace: no hostile_peer at $hp"
fi

# -- late: a relay's deadline counts from its parent's model -----------------------
# The root waits 5 s for its second client (C2, direct); the relay RL under
# it, with one client and a 2 s round deadline, holds its round until the
# root's model comes: its deadline must not run out before then (it did:
# the relay's round failed and its group left the run).
root late 2 "{RL: 1}" ""
port[RL]=$((base + 9))
relay RL "$root_port" 1 "{}" ram
sed -i 's/round_deadline_s: 20, min_clients: 1, on_deadline: wait/round_deadline_s: 2/' "$out/RL.yaml"
grep -q "scheduler_kwargs: {round_deadline_s: 2}" "$out/RL.yaml" || fail "late: RL's config"
client 1 "$((base + 9))"; client 2 "$root_port"
start root "$out/late.log" "$fedcaf" server -c "$out/late.yaml" --report "$out/late.json"
start RL "$out/late_RL.log" "$fedcaf" relay -c "$out/RL.yaml"
start C1 "$out/late_C1.log" "$fedcaf" client -c "$out/C1.yaml"
sleep 5
start C2 "$out/late_C2.log" "$fedcaf" client -c "$out/C2.yaml"
wait "${pid_of[root]}" || fail "late: the root failed: $(tail -n 3 "$out/late.log"); RL: $(tail -n 2 "$out/late_RL.log")"
for n in RL C1 C2; do wait "${pid_of[$n]}"; done
"$py" - "$out" <<'PY' && pass "late: a relay with a 2 s deadline under a root that waited 5 s for its other client took part in every round" || fail "late: the root's report"
import json, sys
r = json.load(open(f"{sys.argv[1]}/late.json"))
assert r["status"] == "completed", r["status"]
assert [x["relay_weights"] for x in r["rounds"]] == [{"RL": 1}] * 3, r["rounds"]
assert all(sorted(x["contributors"]) == ["C2", "RL"] for x in r["rounds"]), r["rounds"]
PY

# -- short: a relay short of its children sits rounds out, then rejoins ---------
# The root (no round deadline, min_clients 1) has RA (one client, C1) and RB
# (num_clients 2, min_clients 2, a 2 s registration deadline). Only C3 comes
# to RB at first: RB's round 1 cannot have min_clients, and instead of
# ending (and its group with it) RB offers its parent a sum of weight 0,
# which takes it out of the root's round at once (no deadline needed). C4
# comes while RB waits for the root's next model, and C1 (whose round 1 the
# root waits for) only after: RB's round 2 has both its children, and so
# have the root's rounds 2-4 both relays.
root short 2 "{RA: 1, RB: 2}" ""
sed -i 's/num_global_epochs: 3/num_global_epochs: 4/; s/scheduler_kwargs: {round_deadline_s: 60}/scheduler_kwargs: {min_clients: 1}/' "$out/short.yaml"
relay RA "$root_port" 1 "{}" ram
relay RB "$root_port" 2 "{}" window
sed -i 's/scheduler_kwargs: {round_deadline_s: 20, min_clients: 1, on_deadline: wait}/scheduler_kwargs: {min_clients: 2, registration_deadline_s: 2}/' "$out/RB.yaml"
grep -q "registration_deadline_s: 2" "$out/RB.yaml" || fail "short: RB's config"
client 1 "${port[RA]}"; client 3 "${port[RB]}"; client 4 "${port[RB]}"
start root "$out/short.log" "$fedcaf" server -c "$out/short.yaml" --report "$out/short.json"
start RA "$out/short_RA.log" "$fedcaf" relay -c "$out/RA.yaml"
start RB "$out/short_RB.log" "$fedcaf" relay -c "$out/RB.yaml" --report "$out/short_RB.json"
start C3 "$out/short_C3.log" "$fedcaf" client -c "$out/C3.yaml"
until_in "$out/short_RB.log" "sits its parent's round out" || fail "short: RB sat no round out"
start C4 "$out/short_C4.log" "$fedcaf" client -c "$out/C4.yaml"
until_in "$out/short_RB.log" "registered C4" || fail "short: C4 did not register"
start C1 "$out/short_C1.log" "$fedcaf" client -c "$out/C1.yaml"
wait "${pid_of[root]}" || fail "short: the root failed: $(tail -n 3 "$out/short.log"); RB: $(tail -n 2 "$out/short_RB.log")"
for n in RA RB C1 C3 C4; do wait "${pid_of[$n]}" || fail "short: $n exited non-zero: $(tail -n 2 "$out/short_$n.log")"; done
"$py" - "$out" <<'PY' && pass "short: a relay short of min_clients sat its parent's round out (a sum of weight 0, no deadline needed) and took part again once its children came" || fail "short: the reports"
import json, sys
out = sys.argv[1]
r = json.load(open(f"{out}/short.json"))
assert r["status"] == "completed", r["status"]
c = [sorted(x["contributors"]) for x in r["rounds"]]
assert c == [["RA"]] + [["RA", "RB"]] * 3, c
assert [x["relay_weights"] for x in r["rounds"]] == [{"RA": 1}] + [{"RA": 1, "RB": 2}] * 3, r["rounds"]
assert "relay RB has no partial sum" in open(f"{out}/short.log").read()
rb = json.load(open(f"{out}/short_RB.json"))
assert rb["failed_rounds"] == [1], rb["failed_rounds"]
assert [x["clients"] for x in rb["rounds"]] == [2, 2, 2], rb["rounds"]
print(f"   root rounds' contributors {c}; RB sat out its round {rb['failed_rounds']}")
PY

# -- simulated: a relay's children in its own process ------------------------
# Two relays, each running 40 simulated clients (server_configs.simulated_
# clients) and sampling 3 of them a round: the root's rounds have 2
# contributors weighing 3 each, each relay's rounds 3 clients.
root sim 2 "{R1: 3, R2: 3}" ""
sed -i 's/memory_mode: window/memory_mode: ram/' "$out/sim.yaml"
for r in 1 2; do
  cat > "$out/R$r.yaml" <<EOF
client_id: R$r
comm_configs:
  grpc_configs: {server_uri: 127.0.0.1:$root_port}
server_configs:
  num_clients: 40
  simulated_clients: 40
  scheduler_kwargs: {clients_per_round: 3, round_deadline_s: 20}
  comm_configs:
    grpc_configs: {server_uri: 127.0.0.1:$((base + 6 + r))}
EOF
done
start root "$out/sim.log" "$fedcaf" server -c "$out/sim.yaml" --report "$out/sim.json"
start R1 "$out/sim_R1.log" "$fedcaf" relay -c "$out/R1.yaml" --report "$out/sim_R1.json" \
  --metrics "$out/sim_R1.jsonl"
start R2 "$out/sim_R2.log" "$fedcaf" relay -c "$out/R2.yaml" --report "$out/sim_R2.json"
wait "${pid_of[root]}" || fail "simulated: the root failed: $(tail -n 3 "$out/sim.log")"
wait "${pid_of[R1]}"; wait "${pid_of[R2]}"
"$py" - "$out" <<'PY' && pass "simulated: 2 relays of 40 clients each in their own process, 3 sampled a round: the root's rounds weigh {R1: 3, R2: 3}; a relay's --metrics has its children's rounds, only those drawn registering (a population)" || fail "simulated: the reports"
import json, sys
out = sys.argv[1]
r = json.load(open(f"{out}/sim.json"))
assert r["status"] == "completed", r["status"]
assert [x["relay_weights"] for x in r["rounds"]] == [{"R1": 3, "R2": 3}] * 3, r["rounds"]
for k in (1, 2):
    rr = json.load(open(f"{out}/sim_R{k}.json"))
    assert [x["clients"] for x in rr["rounds"]] == [3, 3, 3], rr["rounds"]
    assert all(c.startswith(f"R{k}-Client") for x in rr["rounds"] for c in x["contributors"]), rr["rounds"]
# A relay's --metrics: its children's registrations and rounds.
lines = [json.loads(l) for l in open(f"{out}/sim_R1.jsonl")]
# Its 40 children a population: those drawn register (3 a round, at most
# 9), those not drawn again leave as the next round opens.
registered = [l["client"] for l in lines if l.get("event") == "registered"]
assert 3 <= len(registered) <= 9, registered
assert all(c.startswith("R1-Client") for c in registered), registered
assert any(l.get("event") == "left" for l in lines) or len(registered) == 3, lines
rounds = [l for l in lines if "client_bytes" in l]
assert len(rounds) == 3 and all(len(l["client_bytes"]) == 3 for l in rounds), rounds
PY

# -- a tree in one process: simulate with server_configs.simulated_relays ----------
# The flat run's 8 clients (Client<i> on partition i-1, as C<i>) under 2
# relays of 4 in one `fedcaf simulate`: every round's model byte-identical
# to the flat run's. Then 8 clients under 3 relays, 4 sampled a round (2, 1
# and 1 per relay), in disk mode: each round's relays weigh what they ran.
root one 8 "{}" "  simulated_relays: 2
  save_global_model: $out/one-{round}.safetensors"
sed -i '/relays: {}/d' "$out/one.yaml"
"$fedcaf" simulate -c "$out/one.yaml" --report "$out/one.json" > "$out/one.log" 2>&1 ||
  fail "one process: simulate of a tree failed: $(tail -n 3 "$out/one.log")"
if same_as_flat one; then
  pass "one process: simulate of 8 clients under 2 relays (simulated_relays: 2): every round's model byte-identical to the flat run's"
else
  fail "one process: the simulated tree's models differ from the flat run's"
fi
# Any values, ram mode everywhere: the dummy trainer's noise makes updates
# whose float32 sums depend on how they are grouped, and each relay sends
# its int32 sums on the root's grid (Offer.gridSums), which the root adds
# as they are: the tree's models byte-identical to a flat run's (unit
# test "relays' int32 sums on the grid ..." has relays cutting chunks of
# another size than the root's). With the relays' sums as floats (the root's chunks of 4100 bytes, no whole runs of 64
# floats: no grid) the same tree differs from flat.
grid_run() { # NAME RELAYS CHUNK_BYTES [MODE]
  sed -e "s|memory_mode: window|memory_mode: ${4:-ram}\n  storage_dir: $out|" \
      -e "s/chunk_bytes: 4096/chunk_bytes: $3/" \
      -e 's/add_by_index: true}/add_by_index: true, noise: 0.01}/' \
      -e "s|one-{round}|$1-{round}|" -e "s/simulated_relays: 2/simulated_relays: $2/" \
      "$out/one.yaml" > "$out/$1.yaml"
  [ "$2" -gt 0 ] || sed -i '/simulated_relays/d' "$out/$1.yaml"
  "$fedcaf" simulate -c "$out/$1.yaml" --report "$out/$1.json" > "$out/$1.log" 2>&1 ||
    fail "one process, grid: $1 failed: $(tail -n 3 "$out/$1.log")"
}
same_models() { # A B: rounds 1-3 byte-identical
  local r
  for r in 1 2 3; do
    [ -s "$out/$1-$r.safetensors" ] && cmp -s "$out/$1-$r.safetensors" "$out/$2-$r.safetensors" || return 1
  done
}
grid_run gflat 0 8192
grid_run gtree 2 8192
grid_run fflat 0 4100
grid_run ftree 2 4100
if same_models gflat gtree && ! same_models fflat ftree &&
   grep -q "noise: 0.01" "$out/gtree.yaml"; then
  pass "one process, ram mode, noisy updates: 8 clients under 2 relays sending int32 sums on the root's grid: every round's model byte-identical to the flat run's (relays' sums as floats, chunks of 4100 bytes: not)"
else
  fail "one process, grid: the tree's models $(same_models gflat gtree && echo equal || echo differ from) the flat run's; with float sums they $(same_models fflat ftree && echo equal || echo differ from) it"
fi
# Window- and disk-mode relays (and root) send each position on the grid
# as it settles: the same models.
grid_run gwtree 2 8192 window
grid_run gdtree 2 8192 disk
if same_models gflat gwtree && same_models gflat gdtree &&
   grep -q "memory_mode: window" "$out/gwtree.yaml" &&
   grep -q "memory_mode: disk" "$out/gdtree.yaml"; then
  pass "one process, window and disk modes, noisy updates: 8 clients under 2 relays streaming their positions on the root's grid: every round's model byte-identical to the flat ram-mode run's"
else
  fail "one process, window or disk mode: the tree's models differ from the flat ram-mode run's"
fi
# The same over sockets: a root and 2 relays (fedcaf relay), all in ram
# mode, 4 clients under each, noisy updates: byte-identical to 8 clients
# on one server.
noisy() {
  sed -i -e 's/memory_mode: window/memory_mode: ram/' \
    -e 's/add_by_index: true}/add_by_index: true, noise: 0.01}/' "$out/$1.yaml"
}
root pflat 8 "{}" "  save_global_model: $out/pflat-{round}.safetensors"
noisy pflat
for i in 1 2 3 4 5 6 7 8; do client "$i" "$root_port"; done
start root "$out/pflat.log" "$fedcaf" server -c "$out/pflat.yaml"
for i in 1 2 3 4 5 6 7 8; do
  start "C$i" "$out/pflat_C$i.log" "$fedcaf" client -c "$out/C$i.yaml"
done
wait "${pid_of[root]}" || fail "grid over sockets: the flat server failed: $(tail -n 2 "$out/pflat.log")"
for i in 1 2 3 4 5 6 7 8; do wait "${pid_of[C$i]}"; done
# socket_tree NAME MODE [MODE_A MODE_B [CHUNK]]: a root in MODE and 2
# relays (ram mode unless given), 4 noisy clients under each; its models
# $out/NAME-{round}.safetensors. A window- or disk-mode relay's chunks are
# CHUNK bytes (8 KiB: whole multiples of the root's 4 KiB, so its sum goes
# up on the grid as its positions settle).
socket_tree() {
  root "$1" 2 "{GA: 4, GB: 4}" "  save_global_model: $out/$1-{round}.safetensors"
  noisy "$1"
  sed -i "s|memory_mode: ram|memory_mode: $2\n  storage_dir: $out|" "$out/$1.yaml"
  relay GA "$root_port" 4 "{}" "${3:-ram}"
  relay GB "$root_port" 4 "{}" "${4:-ram}"
  local g
  for g in GA GB; do
    grep -q "memory_mode: ram" "$out/$g.yaml" ||
      sed -i "s/chunk_bytes: 2048/chunk_bytes: ${5:-8192}/" "$out/$g.yaml"
  done
  start root "$out/$1.log" "$fedcaf" server -c "$out/$1.yaml"
  start GA "$out/$1_GA.log" "$fedcaf" relay -c "$out/GA.yaml"
  start GB "$out/$1_GB.log" "$fedcaf" relay -c "$out/GB.yaml"
  local i n
  for i in 1 2 3 4 5 6 7 8; do
    client "$i" "${port[$( [ "$i" -le 4 ] && echo GA || echo GB )]}"
    start "C$i" "$out/$1_C$i.log" "$fedcaf" client -c "$out/C$i.yaml"
  done
  wait "${pid_of[root]}" || fail "$1: the root failed: $(tail -n 2 "$out/$1.log")"
  for n in GA GB C1 C2 C3 C4 C5 C6 C7 C8; do wait "${pid_of[$n]}"; done
}
socket_tree ptree ram
if same_models pflat ptree; then
  pass "grid over sockets: a root and 2 relay processes in ram mode, 4 clients under each, noisy updates: every round's model byte-identical to 8 clients on one server"
else
  fail "grid over sockets: the tree's models differ from the flat run's"
fi
# Every memory mode sums on the same grid. A window- or disk-mode relay's
# positions go up as they settle, each as int32 sums on the root's grid
# (Chunk.floatSums unset) where it can; the root folds them as they are.
# So a tree in one mode throughout, or mixed, gives the flat ram-mode
# server's models bit for bit.
tree_case() { # NAME ROOT_MODE MODE_A MODE_B: the socket tree against flat
  socket_tree "$1" "$2" "$3" "$4"
  if grep -q "memory_mode: $2" "$out/$1.yaml" &&
     grep -q "memory_mode: $3" "$out/GA.yaml" &&
     grep -q "memory_mode: $4" "$out/GB.yaml" &&
     same_models pflat "$1"; then
    pass "$2 root, $3 and $4 relays: 4 noisy clients under each relay: every round's model byte-identical to 8 clients on one ram-mode server"
  else
    fail "$2 root, $3 and $4 relays: the tree's models differ from the flat ram-mode run's"
  fi
}
tree_case wtree window window window
tree_case dtree disk disk disk
tree_case mtree window ram disk
tree_case rtree ram window ram
# Chunks of 2 KiB at the relays: the root's 4 KiB chunks span two of their
# positions, so their sums go up as floats, and the models are not flat's
# (the check above can fail).
socket_tree ktree window window window 2048
if grep -q "chunk_bytes: 2048" "$out/GA.yaml" && ! same_models pflat ktree &&
   "$py" - "$out" <<'PY'
import json, struct, sys
import numpy as np
out = sys.argv[1]
sys.path.insert(0, sys.argv[1])
from tensors import load
for r in (1, 2, 3):  # float sums: flat's up to their rounding, no more
    a, b = load(f"{out}/pflat-{r}.safetensors"), load(f"{out}/ktree-{r}.safetensors")
    for k in a:
        top = np.abs(a[k]).max()
        assert np.abs(a[k] - b[k]).max() <= 2.0**-20 * top, (r, k)
PY
then
  pass "window relays of 2 KiB chunks under a root of 4 KiB: their sums go up as floats, and the models differ from flat's, within 2^-20 of each tensor's largest value"
else
  fail "window relays of 2 KiB chunks: the models should differ from flat's (float sums), within float32 rounding"
fi
"$fedcaf" simulate -c "$out/one.yaml" --set server_configs.simulated_relays=3 \
  --set server_configs.scheduler_kwargs.clients_per_round=4 \
  --set server_configs.memory_mode=disk --set server_configs.storage_dir="$out" \
  --set server_configs.save_global_model= \
  --report "$out/one3.json" > "$out/one3.log" 2>&1 ||
  fail "one process: 3 relays, sampled, disk mode: $(tail -n 3 "$out/one3.log")"
"$py" - "$out" <<'PY' && pass "one process: 3 relays over 8 clients, 4 a round: every round weighs {Relay1: 2, Relay2: 1, Relay3: 1}, the contributors among each relay's block, its clients summoned when drawn" || fail "one process: the sampled tree's report"
import json, sys
out = sys.argv[1]
r = json.load(open(f"{out}/one3.json"))
assert r["status"] == "completed", r["status"]
assert len(r["rounds"]) == 3, r["rounds"]
for x in r["rounds"]:
    assert x["relay_weights"] == {"Relay1": 2, "Relay2": 1, "Relay3": 1}, x
    assert sorted(x["contributors"]) == ["Relay1", "Relay2", "Relay3"], x
# Each relay's clients a population: spawned when drawn (4 a round), the
# reports of none that failed kept.
assert r.get("clients", []) == [], r["clients"]
assert 4 <= r["summoned_clients"] <= 12, r["summoned_clients"]
assert 4 <= r["peak_clients_alive"] <= 8, r["peak_clients_alive"]
PY

# DP-FedAvg through the relays: the clients clip their updates (the root's
# client_configs reach them through the relays), the relays sum them as
# they are (a relay's sum is no update of its own: not clipped again), and
# the root alone adds the noise, drawn as a flat run draws it (the same
# seed, each position's noise over the same total weight): the models
# equal a flat run's to float32 rounding of the relays' sums.
for k in 0 2; do
  "$fedcaf" simulate -c "$out/one.yaml" --set server_configs.simulated_relays=$k \
    --set server_configs.aggregator_kwargs.dp_fedavg.clip_norm=20 \
    --set server_configs.aggregator_kwargs.dp_fedavg.noise_multiplier=0.5 \
    --set server_configs.aggregator_kwargs.dp_fedavg.seed=11 \
    --set server_configs.save_global_model="$out/dp$k-{round}.safetensors" \
    --report "$out/dp$k.json" > "$out/dp$k.log" 2>&1 ||
    fail "one process: DP-FedAvg, $k relays: $(tail -n 3 "$out/dp$k.log")"
done
"$py" - "$out" <<'PY' && pass "one process: DP-FedAvg through 2 relays (clipped at the clients, noise at the root): the models within 2^-22 of the largest value of a flat DP-FedAvg run's, the same epsilon" || fail "one process: DP-FedAvg through relays"
import json, struct, sys
import numpy as np
out = sys.argv[1]
sys.path.insert(0, sys.argv[1])
from tensors import load
flat, tree = (json.load(open(f"{out}/dp{k}.json")) for k in (0, 2))
assert tree["status"] == "completed", tree["status"]
assert [x["dp_epsilon"] for x in tree["rounds"]] == [x["dp_epsilon"] for x in flat["rounds"]], (tree["rounds"], flat["rounds"])
init = load(f"{out}/init.safetensors")
for r in (1, 2, 3):
    a, b = load(f"{out}/dp0-{r}.safetensors"), load(f"{out}/dp2-{r}.safetensors")
    top = max(np.abs(a[k]).max() for k in a)
    assert max(np.abs(a[k] - b[k]).max() for k in a) <= top * 2.0**-22, r
# the clipped mean adds 20 / sqrt(n) per value a round; the noise's std
# is 0.5 x 20 / 8 = 1.25 per value
d = np.concatenate([(b[k] - init[k]).ravel() for k in b])
n = d.size
assert abs(d.mean() - 3 * 20 / np.sqrt(n)) < 0.2, d.mean()
assert 1.8 < d.std() < 2.5, d.std()  # sqrt(3) x 1.25 after 3 rounds
PY

# Compression through the relays, per hop: downloads (int8, direction
# down) served by each relay as its parent's client_configs say; uploads
# (direction up) compressed to the relays, which decode them and send
# their sums whole (ctest deploy_launchers runs both over sockets). The
# models equal a flat simulate's with the same compression to float32
# rounding (a relay re-encodes values already on int8's grid; it decodes
# each delta against the model its child received, as the flat server
# does), far within one int8 step.
for dir in down up; do
  for k in 0 2; do
    # (compressed uploads are decoded in ram mode)
    "$fedcaf" simulate -c "$out/one.yaml" --set server_configs.simulated_relays=$k \
      --set server_configs.memory_mode=ram \
      --set client_configs.comm_configs.compression.method=int8 \
      --set client_configs.comm_configs.compression.direction=$dir \
      --set server_configs.save_global_model="$out/z$dir$k-{round}.safetensors" \
      --report "$out/z$dir$k.json" > "$out/z$dir$k.log" 2>&1 ||
      fail "one process: int8 $dir, $k relays: $(tail -n 3 "$out/z$dir$k.log")"
  done
  "$py" - "$out" "$dir" <<'PY' && pass "one process: int8 $dir through 2 relays: the root moves 2 models a round (uploads: 2 sums, whole), the models within 2^-20 of the largest value of a flat run's with int8 $dir" || fail "one process: int8 $dir through relays"
import json, struct, sys
import numpy as np
out, way = sys.argv[1], sys.argv[2]
sys.path.insert(0, sys.argv[1])
from tensors import load
flat, tree = (json.load(open(f"{out}/z{way}{k}.json")) for k in (0, 2))
assert tree["status"] == "completed", tree["status"]
for f, t in zip(flat["rounds"], tree["rounds"]):
    if way == "down":
        assert t["compression_down"] > 3.5, t
        # the root serves 2 relays what the flat server serves 8 clients
        assert t["bytes_down"] * 4 == f["bytes_down"], (t["bytes_down"], f["bytes_down"])
    else:  # 8 int8 uploads flat; 2 whole float32 sums at the root
        assert f["compression_up"] > 3.5, f
        assert t["compression_up"] < 1.01, t
for r in (1, 2, 3):
    a, b = load(f"{out}/z{way}0-{r}.safetensors"), load(f"{out}/z{way}2-{r}.safetensors")
    for k in a:
        bound = np.abs(a[k]).max() * 2.0**-20
        assert np.abs(a[k] - b[k]).max() <= bound, (r, k, np.abs(a[k] - b[k]).max(), bound)
PY
done

# -- secagg: SecAgg+ within a relay's group -----------------------------------------
# The root (no secure aggregation) and relay RS (SecAgg+, memory_mode ram)
# with C1-C3 under it; beside it one server running SecAgg+ over the same
# 3 clients. RS unmasks its group's sum and sends it up whole; each run's
# round-r model is within r x n / scale of the exact mean (init + r: the
# clients add 0.5, 1, 1.5), n = 3 clients, scale = (2^22 - 1) / (2 x 128)
# (secure_aggregation_config: the fixed point's error per round).
port[RS]=$((base + 7))
secagg="--set server_configs.secure_aggregation.enabled=true --set server_configs.secure_aggregation.clipping_range=128"
root sroot 1 "{RS: 3}" "  save_global_model: $out/sroot-{round}.safetensors"
relay RS "$root_port" 3 "{}" ram
for i in 1 2 3; do client "$i" "${port[RS]}"; done
start root "$out/sroot.log" "$fedcaf" server -c "$out/sroot.yaml" --report "$out/sroot.json"
start RS "$out/RS.log" "$fedcaf" relay -c "$out/RS.yaml" $secagg \
  --set server_configs.scheduler_kwargs.on_deadline=fail \
  --set server_configs.scheduler_kwargs.min_clients=3
for i in 1 2 3; do start "C$i" "$out/sC$i.log" "$fedcaf" client -c "$out/C$i.yaml"; done
wait "${pid_of[root]}" || fail "secagg: the root failed: $(tail -n 2 "$out/sroot.log")"
wait "${pid_of[RS]}" || fail "secagg: RS failed: $(tail -n 2 "$out/RS.log")"
for i in 1 2 3; do wait "${pid_of[C$i]}"; done
masked=$(grep -l "keys and shares exchanged" "$out"/sC[123].log | wc -l)
root sflat 3 "{}" "  save_global_model: $out/sflat-{round}.safetensors"
for i in 1 2 3; do client "$i" "$root_port"; done
start root "$out/sflat.log" "$fedcaf" server -c "$out/sflat.yaml" $secagg \
  --set server_configs.scheduler_kwargs.min_clients=3
for i in 1 2 3; do start "C$i" "$out/fC$i.log" "$fedcaf" client -c "$out/C$i.yaml"; done
wait "${pid_of[root]}" || fail "secagg: the flat server failed: $(tail -n 2 "$out/sflat.log")"
for i in 1 2 3; do wait "${pid_of[C$i]}"; done
[ "$masked" -eq 3 ] && pass "secagg: the 3 clients under RS masked their uploads (SecAgg+ keys and shares exchanged)" ||
  fail "secagg: $masked of the 3 clients under RS ran SecAgg+"
"$py" - "$out" <<'PY' && pass "secagg: RS unmasked its group's sum and sent it up: the root's models, like one SecAgg+ server's, within r x 3 / scale of the exact mean" || fail "secagg: the models through RS"
import json, struct, sys
import numpy as np
out = sys.argv[1]
sys.path.insert(0, sys.argv[1])
from tensors import load
r = json.load(open(f"{out}/sroot.json"))
assert r["status"] == "completed", r["status"]
assert [x["relay_weights"] for x in r["rounds"]] == [{"RS": 3}] * 3, r["rounds"]
init = load(f"{out}/init.safetensors")
step = 2 * 128 / (2**22 - 1)
for rnd in (1, 2, 3):
    for kind in ("sroot", "sflat"):
        m = load(f"{out}/{kind}-{rnd}.safetensors")
        err = max(np.abs(m[k] - (init[k] + rnd)).max() for k in m)
        assert 0 < err <= rnd * 3 * step, (kind, rnd, err, rnd * 3 * step)
PY
msg=$("$fedcaf" relay -c "$out/RS.yaml" $secagg --set server_configs.memory_mode=window \
  --set server_configs.scheduler_kwargs.on_deadline=fail 2>&1)
grep -q "secure_aggregation: within a relay's group in memory_mode ram" <<< "$msg" && pass "refused: SecAgg+ in a relay in window mode: $(tail -n 1 <<< "$msg")" ||
  fail "refused: SecAgg+ in a relay in window mode: $msg"

# -- refusals at load ---------------------------------------------------------------
refused() { # WHAT EXPECTED-TEXT COMMAND...
  local what=$1 want=$2; shift 2
  local start_ns=$(date +%s%N) msg rc
  msg=$("$@" 2>&1); rc=$?
  if [ $rc -ne 0 ] && grep -q -- "$want" <<< "$msg" && [ "$(grep -c . <<< "$msg")" -le 2 ]; then
    pass "refused: $what: $(tail -n 1 <<< "$msg")"
  else
    fail "refused: $what (exit $rc): $msg"
  fi
}
refused "MedianAggregator with relays" "server_configs.aggregator" \
  "$fedcaf" server -c "$out/tree.yaml" --set server_configs.aggregator=MedianAggregator
refused "FedAsync with relays" "server_configs.aggregator" \
  "$fedcaf" server -c "$out/tree.yaml" --set server_configs.aggregator=FedAsyncAggregator \
  --set server_configs.memory_mode=ram
refused "secure aggregation with relays" "secure_aggregation" \
  "$fedcaf" server -c "$out/tree.yaml" --set server_configs.memory_mode=ram \
  --set server_configs.secure_aggregation.enabled=true
refused "sample_size weights with relays" "client_weights_mode" \
  "$fedcaf" server -c "$out/tree.yaml" --set server_configs.aggregator_kwargs.client_weights_mode=sample_size
refused "a relay with its own FedAdam" "server_configs.aggregator" \
  "$fedcaf" relay -c "$out/RA.yaml" --set server_configs.aggregator=FedAdamAggregator
refused "a relay that keeps cut-off updates" "partial_updates" \
  "$fedcaf" relay -c "$out/RA.yaml" --set server_configs.aggregator_kwargs.partial_updates=keep
refused "a root that keeps cut-off updates, with relays" "partial_updates" \
  "$fedcaf" server -c "$out/tree.yaml" --set server_configs.aggregator_kwargs.partial_updates=keep
refused "a relay with num_global_epochs" "num_global_epochs" \
  "$fedcaf" relay -c "$out/RA.yaml" --set server_configs.num_global_epochs=5
refused "more simulated clients than num_clients" "simulated_clients" \
  "$fedcaf" relay -c "$out/R1.yaml" --set server_configs.simulated_clients=41

refused "simulated_relays with a rule that does not sum" "server_configs.aggregator" \
  "$fedcaf" simulate -c "$out/one.yaml" --set server_configs.aggregator=MedianAggregator
refused "more simulated relays than clients a round" "simulated_relays" \
  "$fedcaf" simulate -c "$out/one.yaml" --set server_configs.simulated_relays=3 \
  --set server_configs.scheduler_kwargs.clients_per_round=2
refused "simulated_relays outside simulate" "simulated_relays" \
  "$fedcaf" server -c "$out/one.yaml"

[ -n "$failures" ] && printf 'the failed checks, again:\n%s' "$failures"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
