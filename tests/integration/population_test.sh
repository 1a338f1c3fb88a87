#!/usr/bin/env bash
# A population of simulated clients (docs/design.md, "A population of
# simulated clients"): `fedcaf simulate` with clients_per_round below
# num_clients spawns a client when it is drawn and sends it away when a
# round opens without it.
#
#   same      30 clients, 5 a round, 4 rounds (dummy trainer, add_by_index):
#             every round's model byte-identical to the same run with every
#             client spawned at the start (federated evaluation keeps them
#             all), the same contributors; at most 20 spawned, 10 alive at
#             once; a run resumed from its round-3 checkpoint ends with the
#             same model.
#   rejected  the same with updates far enough to be rejected: members
#             that fail are drawn no more, the same 12 models as every
#             client spawned, and no round waits out a reconnect grace.
#   large     200,000 clients, 100 a round, 3 rounds, flat and under 4
#             relays: completed, 100 distinct contributors a round among
#             the population, at most 300 spawned, and a peak RSS under
#             256 MiB (the same population spawned at the start: over
#             1 GiB, 6.5 KiB a client).
#
#   population_test.sh FEDCAF
set -u
fedcaf=$1
. "$(dirname "$0")/lib.sh"

cat > "$out/small.yaml" <<EOF
server_configs:
  num_clients: 30
  num_global_epochs: 4
  scheduler_kwargs: {clients_per_round: 5, seed: 7, min_clients: 5}
client_configs:
  train_configs: {trainer: dummy, add: 0.05, add_by_index: true}
  model_configs: {name: synthetic, num_tensors: 4, total_bytes: 65536, seed: 5}
EOF

# -- same: a population draws and averages what every client spawned does --
sim() { # NAME ARGS...: simulate small.yaml, models to NAME-{round}
  local name=$1; shift
  "$fedcaf" simulate -c "$out/small.yaml" --report "$out/$name.json" \
    --set server_configs.save_global_model="$out/$name-{round}.safetensors" \
    "$@" > "$out/$name.log" 2>&1 ||
    fail "$name: simulate failed: $(tail -n 3 "$out/$name.log")"
}
sim drawn --set server_configs.checkpoint.dir="$out/ckpt"
sim spawned --set server_configs.federated_evaluation=true
same=0
for r in 1 2 3 4; do
  cmp -s "$out/drawn-$r.safetensors" "$out/spawned-$r.safetensors" && same=$((same + 1))
done
"$py" - "$out" <<'PY' && [ $same -eq 4 ] &&
import json, sys
out = sys.argv[1]
d, s = (json.load(open(f"{out}/{n}.json")) for n in ("drawn", "spawned"))
assert d["status"] == s["status"] == "completed", (d["status"], s["status"])
dc = [sorted(x["contributors"]) for x in d["rounds"]]
assert dc == [sorted(x["contributors"]) for x in s["rounds"]], dc
assert all(len(c) == 5 for c in dc), dc
assert d.get("clients", []) == [] and len(s["clients"]) == 30
assert 5 <= d["summoned_clients"] <= 20, d["summoned_clients"]
assert 5 <= d["peak_clients_alive"] <= 10, d["peak_clients_alive"]
assert "summoned_clients" not in s
assert all(x["missing_clients"] == [] for x in d["rounds"]), d["rounds"]
PY
  pass "same: 30 clients, 5 a round, as a population: every round's model byte-identical ($same of 4) to every client spawned at the start, the same contributors" ||
  fail "same: the population's run differs from every client spawned ($same of 4 models equal)"
mkdir "$out/resume" && cp -r "$out/ckpt/round-000003" "$out/resume/"
"$fedcaf" simulate --resume "$out/resume" --resume-force -c "$out/small.yaml" \
  --set server_configs.checkpoint.dir="$out/resume" \
  --set server_configs.save_global_model="$out/resumed-{round}.safetensors" \
  > "$out/resumed.log" 2>&1 &&
  cmp -s "$out/resumed-4.safetensors" "$out/drawn-4.safetensors" &&
  pass "same: resumed from round 3's checkpoint, round 4 draws the same clients: the same model" ||
  fail "same: the resumed population's round 4: $(tail -n 3 "$out/resumed.log")"

# -- rejected: members whose updates are refused leave for good -----------
# add 0.6 x the index: the far clients' updates pass the update bound and
# are rejected; such a client ends. As with every client spawned: it is
# drawn no more, the same models; and a member that ended without a
# goodbye is dropped at once (it never comes back), so no round waits out
# a reconnect grace of 60 s for it.
for v in false true; do
  timeout 120 "$fedcaf" simulate -c "$out/small.yaml" \
    --set server_configs.num_global_epochs=12 \
    --set server_configs.scheduler_kwargs.min_clients=1 \
    --set client_configs.train_configs.add=0.6 \
    --set server_configs.comm_configs.stream_configs.reconnect_grace_s=60 \
    --set server_configs.federated_evaluation=$v \
    --set server_configs.save_global_model="$out/rej$v-{round}.safetensors" \
    --report "$out/rej$v.json" > "$out/rej$v.log" 2>&1
done
same=0
for r in $(seq 1 12); do
  cmp -s "$out/rejfalse-$r.safetensors" "$out/rejtrue-$r.safetensors" && same=$((same + 1))
done
"$py" - "$out" <<'PY' && [ $same -eq 12 ] &&
import json, sys
out = sys.argv[1]
d, s = (json.load(open(f"{out}/rej{v}.json")) for v in ("false", "true"))
assert len(d["rounds"]) == len(s["rounds"]) == 12
assert [sorted(x["contributors"]) for x in d["rounds"]] == [sorted(x["contributors"]) for x in s["rounds"]]
refused = [c for c in d.get("clients", []) if "poisoned_update" in c["failure"]]
assert refused, d.get("clients")
assert d["total_seconds"] < 60, d["total_seconds"]
PY
  pass "rejected: members whose updates were refused drawn no more: all 12 models byte-identical to every client spawned, no round waits out a reconnect grace" ||
  fail "rejected: $same of 12 models equal, or a round waited (see $out/rejfalse.log)"

# -- large: memory follows the clients drawn, not the population -----------
for relays in 0 4; do
  timeout 300 "$fedcaf" simulate -c "$out/small.yaml" \
    --set server_configs.num_clients=200000 \
    --set server_configs.num_global_epochs=3 \
    --set server_configs.scheduler_kwargs.clients_per_round=100 \
    --set server_configs.scheduler_kwargs.min_clients=90 \
    --set client_configs.train_configs.add_by_index=false \
    --set server_configs.simulated_relays=$relays \
    --report "$out/large$relays.json" > "$out/large$relays.log" 2>&1 ||
    fail "large, $relays relays: $(tail -n 3 "$out/large$relays.log")"
  "$py" - "$out/large$relays.json" "$relays" <<'PY' &&
import json, sys
r = json.load(open(sys.argv[1])); relays = int(sys.argv[2])
assert r["status"] == "completed", r["status"]
assert len(r["rounds"]) == 3, r["rounds"]
for x in r["rounds"]:
    c = x["contributors"]
    if relays:
        assert sorted(c) == sorted(f"Relay{i + 1}" for i in range(relays)), c
        assert sum(x["relay_weights"].values()) == 100, x["relay_weights"]
    else:
        assert len(c) == len(set(c)) == 100, c
        assert all(1 <= int(i[len("Client"):]) <= 200000 for i in c), c
assert 100 <= r["summoned_clients"] <= 300, r["summoned_clients"]
mib = r["peak_rss_bytes"] / 2**20
assert mib < 256, mib
print(f"{mib:.0f} MiB, {r['summoned_clients']} spawned")
PY
    pass "large: 200,000 clients, 100 a round, $relays relays: completed, at most 300 spawned, peak RSS under 256 MiB" ||
    fail "large: 200,000 clients under $relays relays"
done
finish
