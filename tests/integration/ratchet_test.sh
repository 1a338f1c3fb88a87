#!/usr/bin/env bash
# The update bound's ratchet, with real processes over loopback: `fedcaf
# server` (configs/server.yaml, defaults otherwise: max_update_ratio 10,
# max_norm_growth 1.25), two honest `fedcaf client` processes (the dummy
# trainer, +0.01 a round) and a Python client (the fedcaf package) that
# uploads 10.5 x the model it received every round: within 10 x ||g|| of
# it, so round 1 takes it, and ||g|| grows about 4 x with it. Were the
# bound taken of ||g|| itself, every round would take it again (||g||
# x 1,097 in 4 rounds); anchored, the second round refuses it, and so does
# every later one, while the honest clients' rounds complete.
#
#   ratchet_test.sh FEDCAF SRC PYDIR [PYTHON]
set -u
fedcaf=$1; src=$2; pydir=$3; python=${4:-/usr/bin/python3}
export FEDCAF_PYTHON=$pydir PYTHONPATH=$pydir
. "$(dirname "$0")/lib.sh"
rounds=4
port=$(free_port); uri=127.0.0.1:$port
s=server_configs
timeout 120 "$fedcaf" server -c "$src/configs/server.yaml" \
  --set $s.comm_configs.grpc_configs.server_uri=$uri \
  --set $s.num_clients=3 --set $s.num_global_epochs=$rounds \
  --set $s.scheduler_kwargs.round_deadline_s=20 \
  --set "$s.save_global_model=$out/global-{round}.safetensors" \
  --set "client_configs.train_configs={trainer: dummy, add: 0.01}" \
  --set "client_configs.model_configs={name: synthetic, num_tensors: 4, total_bytes: 65536, seed: 7}" \
  --set data_configs.dataset_kwargs.num_clients=3 \
  --report "$out/server.json" > "$out/server.log" 2>&1 & pids+=($!)
server=$!
for k in 1 2; do
  timeout 120 "$fedcaf" client -c "$src/configs/client_1.yaml" \
    --set comm_configs.grpc_configs.server_uri=$uri --set client_id=Client$k \
    --set data_configs.dataset_kwargs.num_clients=3 \
    --set data_configs.dataset_kwargs.client_id=$(( k - 1 )) \
    > "$out/client_$k.log" 2>&1 & pids+=($!)
done
timeout 120 "$python" - "$src/configs/client_1.yaml" "$uri" "$out" \
  > "$out/mallory.log" 2>&1 <<'PY' & pids+=($!)
import sys
import numpy as np
import fedcaf
config, uri, out = sys.argv[1:4]
overrides = {"comm_configs.grpc_configs.server_uri": uri,
             "client_id": "Client3",
             "data_configs.dataset_kwargs.client_id": "2",
             "data_configs.dataset_kwargs.num_clients": "3"}
with fedcaf.Client(config, set=overrides) as c:
    for task in c.tasks():
        if task.evaluate_only:
            continue
        sent = {n: (np.array(a) * np.float32(10.5)).astype(a.dtype)
                for n, a in task.arrays.items()}
        try:
            task.send(sent, num_samples=100)
            print(f"round {task.round}: 10.5 x taken", flush=True)
        except fedcaf.Error as e:
            print(f"round {task.round}: refused: {e}", flush=True)
PY
rc=0; wait $server || rc=$?
[ $rc = 0 ] && pass "the server ran $rounds rounds and exited 0" ||
  { fail "the server exited $rc"; tail -20 "$out/server.log"; }
"$py" - "$out" "$rounds" "$src" <<'PY' && pass "the attacker was refused from round 2 on; the honest rounds completed and ||g|| did not grow after round 1" || fail "the ratchet was not stopped"
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[3] + "/tests/integration")
from python_client_check import read_safetensors
out, rounds = sys.argv[1], int(sys.argv[2])
r = json.load(open(f"{out}/server.json"))
assert r["ok"] and len(r["rounds"]) == rounds, r.get("failure")
contributors = [sorted(x["contributors"]) for x in r["rounds"]]
print("contributors per round:", contributors)
assert "Client3" in contributors[0], "round 1 should take 10.5 x (within the bound)"
for c in contributors[1:]:
    assert c == ["Client1", "Client2"], contributors
def norm(path):
    return float(np.sqrt(sum(float(np.sum(np.square(a.astype(np.float64))))
                             for a in read_safetensors(path).values())))
norms = [norm(f"{out}/global-{k}.safetensors") for k in range(1, rounds + 1)]
print("||g|| after each round:", ", ".join(f"{n:.4g}" for n in norms))
log = open(f"{out}/server.log").read()
assert "max_norm_growth" in log, "no refusal naming max_norm_growth"
print("round times:", [round(x["wall_seconds"], 2) for x in r["rounds"]])
assert norms[-1] <= 1.1 * norms[0], norms  # no growth after round 1
PY
finish
