#!/usr/bin/env bash
# Large-model plumbing through the command: a llama-shaped model with the
# dummy trainer, each global model saved as safetensors, and a second run
# that starts from a saved file (model_configs.path). Python reads the files
# as any safetensors reader would and checks the arithmetic exactly.
set -eu
fedcaf=$1
. "$(dirname "$0")/lib.sh"
tmp=$out
common=(--set server_configs.comm_configs.stream_configs.chunk_bytes=4096)
"$fedcaf" simulate "${common[@]}" \
  --set 'client_configs.model_configs={name: llama, preset: llama-tiny, dtype: float32}' \
  --set 'client_configs.train_configs={trainer: dummy, add: 0.5}' \
  --set server_configs.num_global_epochs=2 \
  --set "server_configs.save_global_model=$tmp/global_{round}.safetensors" > "$tmp/a.log" 2>&1
"$fedcaf" simulate "${common[@]}" \
  --set "client_configs.model_configs={name: llama, path: $tmp/global_2.safetensors}" \
  --set 'client_configs.train_configs={trainer: dummy, add: 0.25}' \
  --set server_configs.num_global_epochs=1 \
  --set "server_configs.save_global_model=$tmp/next.safetensors" > "$tmp/b.log" 2>&1
# The same run in window mode gives the same model, bit for bit.
"$fedcaf" simulate "${common[@]}" \
  --set 'client_configs.model_configs={name: llama, preset: llama-tiny, dtype: float32}' \
  --set 'client_configs.train_configs={trainer: dummy, add: 0.5}' \
  --set server_configs.num_global_epochs=2 --set server_configs.memory_mode=window \
  --set "server_configs.save_global_model=$tmp/window_{round}.safetensors" > "$tmp/c.log" 2>&1
cmp "$tmp/global_2.safetensors" "$tmp/window_2.safetensors"
# And in disk mode, with the clients' models in files too.
"$fedcaf" simulate "${common[@]}" \
  --set 'client_configs.model_configs={name: llama, preset: llama-tiny, dtype: float32}' \
  --set "client_configs.train_configs={trainer: dummy, add: 0.5, storage: disk, storage_dir: $tmp}" \
  --set server_configs.num_global_epochs=2 --set server_configs.memory_mode=disk \
  --set "server_configs.storage_dir=$tmp" \
  --set "server_configs.save_global_model=$tmp/disk_{round}.safetensors" > "$tmp/d.log" 2>&1
cmp "$tmp/global_2.safetensors" "$tmp/disk_2.safetensors"
[ -z "$(ls "$tmp" | grep '\.bin$')" ] # the working files are gone
python3 - "$tmp" <<'PY'
import json, struct, sys, array
tmp = sys.argv[1]
def load(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {})
    data = raw[8 + n:]
    out = {}
    for name, t in header.items():
        assert t["dtype"] == "F32", t
        b, e = t["data_offsets"]
        out[name] = (t["shape"], array.array("f", data[b:e]))
    return meta, out
m1, g1 = load(f"{tmp}/global_1.safetensors")
m2, g2 = load(f"{tmp}/global_2.safetensors")
m3, g3 = load(f"{tmp}/next.safetensors")
assert m2["fedcaf_round"] == "2" and m3["fedcaf_round"] == "1"
assert g1["model.layers.1.self_attn.k_proj.weight"][0] == [32, 64]
assert "lm_head.weight" in g1 and "model.norm.weight" in g1 and len(g1) == 21
for name in g1:
    a, b, c = g1[name][1], g2[name][1], g3[name][1]
    assert all(y == x + 0.5 for x, y in zip(a, b)), name
    assert all(z == y + 0.25 for y, z in zip(b, c)), name
print("1 passed, 0 failed")
PY
