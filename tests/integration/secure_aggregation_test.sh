#!/usr/bin/env bash
# Secure aggregation (SecAgg+) end to end: the same synthetic run with and
# without it, in one process, for chunks of 64 B, 4000 B and 1 MiB: every
# round's global model agrees within the quantizer's bound (rounds x n x
# 2 clip / (2^bits - 1) per element, equal weights).
set -u
fedcaf=$1
src=$(cd "$(dirname "$0")/../.." && pwd)
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
run() { # name chunk_bytes [more --set]
  local name=$1 chunk=$2; shift 2
  timeout 300 "$fedcaf" simulate -c "$src/configs/synthetic_dummy.yaml" \
    --set client_configs.model_configs.total_bytes=1048576 \
    --set server_configs.num_global_epochs=2 \
    --set server_configs.num_clients=3 \
    --set data_configs.dataset_kwargs.num_clients=3 \
    --set client_configs.train_configs.add_by_index=true \
    --set server_configs.comm_configs.stream_configs.chunk_bytes="$chunk" \
    --set "server_configs.save_global_model=$tmp/${name}_{round}.safetensors" \
    "$@" > "$tmp/$name.log" 2>&1 || { fail "$name"; tail -5 "$tmp/$name.log"; }
}
for chunk in 64 4000 1048576; do
  run "plain_$chunk" "$chunk"
  run "secure_$chunk" "$chunk" --set server_configs.secure_aggregation.enabled=true
done
/usr/bin/python3 - "$tmp" <<'PY' || fail "the models differ past the bound"
import json, struct, sys, numpy as np
tmp = sys.argv[1]
def load(p):
    b = open(p, "rb").read(); n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n]); base = 8 + n
    return np.concatenate([np.frombuffer(b[base + v["data_offsets"][0]:
                                           base + v["data_offsets"][1]],
                                         dtype=np.float32)
                           for k, v in sorted(h.items()) if k != "__metadata__"])
ok = True
for chunk in (64, 4000, 1048576):
    for r in (1, 2):
        a = load(f"{tmp}/plain_{chunk}_{r}.safetensors")
        s = load(f"{tmp}/secure_{chunk}_{r}.safetensors")
        bound = r * 3 * 2 * 8.0 / (2**22 - 1)
        d = float(np.abs(a - s).max())
        print(f"chunk {chunk} B, round {r}: max |secure - plain| {d:.3g} (bound {bound:.3g})")
        ok = ok and 0 < d <= bound * 1.01
sys.exit(0 if ok else 1)
PY
[ "$fails" -eq 0 ] && echo "secure_aggregation: all checks passed"
exit "$fails"
