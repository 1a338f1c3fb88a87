#!/usr/bin/env bash
# Secure aggregation (SecAgg+) end to end: the same synthetic run (3 clients,
# 3 rounds) with and without it, in one process, in the ram, window and disk
# memory modes, for chunks of 64 B, 4000 B and 1 MiB, and composed with
# DP-FedAvg (clients clip, the server adds the same seeded noise after
# unmasking): every round's global model agrees within the quantizer's bound
# (rounds x n x 2 clip / (2^bits - 1) per element, equal weights).
set -u
fedcaf=$1
src=$(cd "$(dirname "$0")/../.." && pwd)
. "$(dirname "$0")/lib.sh"
tmp=$out
run() { # name chunk_bytes memory_mode [more --set]
  local name=$1 chunk=$2 mode=$3; shift 3
  timeout 300 "$fedcaf" simulate -c "$src/configs/synthetic_dummy.yaml" \
    --set client_configs.model_configs.total_bytes=1048576 \
    --set server_configs.num_global_epochs=3 \
    --set server_configs.num_clients=3 \
    --set data_configs.dataset_kwargs.num_clients=3 \
    --set client_configs.train_configs.add_by_index=true \
    --set server_configs.comm_configs.stream_configs.chunk_bytes="$chunk" \
    --set server_configs.memory_mode="$mode" \
    --set server_configs.storage_dir="$tmp" \
    --set "server_configs.save_global_model=$tmp/${name}_{round}.safetensors" \
    "$@" > "$tmp/$name.log" 2>&1 || { fail "$name"; tail -5 "$tmp/$name.log"; }
}
secure=(--set server_configs.secure_aggregation.enabled=true)
dp=(--set server_configs.aggregator_kwargs.dp_fedavg.clip_norm=2
    --set server_configs.aggregator_kwargs.dp_fedavg.noise_multiplier=0.5
    --set server_configs.aggregator_kwargs.dp_fedavg.seed=7)
pairs=()
for mode in ram window disk; do
  for chunk in 64 4000 1048576; do
    run "plain_${mode}_$chunk" "$chunk" "$mode"
    run "secure_${mode}_$chunk" "$chunk" "$mode" "${secure[@]}"
    pairs+=("${mode}_$chunk")
  done
done
for mode in ram window; do
  run "plain_dp_$mode" 4000 "$mode" "${dp[@]}"
  run "secure_dp_$mode" 4000 "$mode" "${dp[@]}" "${secure[@]}"
  pairs+=("dp_$mode")
done
[ -d "$tmp" ] && ! ls "$tmp"/fedcaf-global-* > /dev/null 2>&1 ||
  fail "disk mode left its model file behind"
/usr/bin/python3 - "$src" "$tmp" "${pairs[@]}" <<'PY' || fail "the models differ past the bound"
import sys, numpy as np
sys.path.insert(0, sys.argv[1] + "/tests/integration")
from safetensors_f32 import load_flat as load
tmp, pairs = sys.argv[2], sys.argv[3:]
ok = True
for pair in pairs:
    for r in (1, 2, 3):
        a = load(f"{tmp}/plain_{pair}_{r}.safetensors")
        s = load(f"{tmp}/secure_{pair}_{r}.safetensors")
        bound = r * 3 * 2 * 8.0 / (2**22 - 1)
        d = float(np.abs(a - s).max())
        print(f"{pair}, round {r}: max |secure - plain| {d:.3g} (bound {bound:.3g})")
        ok = ok and 0 < d <= bound * 1.01
# DP-FedAvg was on: its noise (std z S / 3 = 0.33) moved the model.
for mode in ("ram", "window"):
    noise = load(f"{tmp}/secure_dp_{mode}_1.safetensors") - \
        load(f"{tmp}/plain_{mode}_4000_1.safetensors")
    print(f"dp_{mode}: noise std {noise.std():.3f} (z S / n = 0.333)")
    ok = ok and abs(noise.std() - 1 / 3) < 0.05
sys.exit(0 if ok else 1)
PY
[ "$fails" -eq 0 ] && echo "secure_aggregation: all checks passed"
exit "$fails"
